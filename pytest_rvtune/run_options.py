"""How one item is run: warm-up and timed runs, the time its samples span, threads, timeout.

Its own module so both the item pipeline (item.py) and the re-runs that confirm a regression (results/confirm.py)
use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds of samples per item on real hardware. A shared VM changes speed in spells of up to seconds; half a
#: second of samples nearly always holds some of the fast spell, whose minimum repeats within ~1% between
#: sessions (docs/contracts.md, "Timing").
DEFAULT_MAX_TIME = 0.5


@dataclass(frozen=True)
class RunOptions:
    warmup: int = 1
    runs: int = 5
    max_time: float = 0.0  # seconds the samples span (0: exactly `runs` samples)
    threads: int = 1
    timeout: float = 300.0
    check: bool = True
    # Where ``timeout`` comes from, for the message of a run killed at it (a board's own setting, or the option).
    timeout_setting: str = "--rvtune-timeout"

    def harness_args(self) -> list[str]:
        args = ["--warmup", str(self.warmup), "--runs", str(self.runs), "--threads", str(self.threads)]
        if self.max_time > 0:
            args += ["--max-time", repr(self.max_time)]
        return args if self.check else [*args, "--no-check"]


def default_run_options(emulated: bool) -> RunOptions:
    """The run options of a target before the user's. Under emulation one launch: its counts are exact per launch
    (the same in every launch: warm-ups would only repeat them) and emulated time is not performance; each
    extra launch of a vector kernel costs QEMU about as much as the rest of the run. Real hardware gets
    samples spread over DEFAULT_MAX_TIME."""
    if emulated:
        return RunOptions(warmup=0, runs=1, max_time=0.0)
    return RunOptions(warmup=2, runs=10, max_time=DEFAULT_MAX_TIME)
