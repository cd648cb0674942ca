"""Read counter outputs into ``{name: value}``: the QEMU icount plugin's file and ``perf stat -x,`` CSV.

Pure parsing (no processes are started here), shared by the local and SSH targets. A counter that could not
be read is absent from the result, never zero: zero is a real reading (e.g. no vector instructions).
"""

from __future__ import annotations

from pathlib import Path

#: The counts the QEMU plugin writes (docs/contracts.md):
#: ``insns=<n> vector_insns=<n> kernel_insns=<n> launches=<n> [launch_insns=<n> harts=<n> hart_launch_insns=<n>,...]``.
#: ``launch_insns`` (every instruction from a launch's start to its end, on every thread: grid walk, kernel, the libc
#: calls it makes) is there only when the ELF has the launcher function; ``launches`` is how many launches the
#: plugin saw. Every count is exact with any number of guest threads (per-thread counters in the plugin).
#: With the timing model (timing_model.py) also ``est_cycles`` (llvm-mca cycles per block x the block's executions
#: inside launches) and the K1 data-cache model's ``l1d_accesses``, ``l1d_misses``, ``l2_misses`` (inside launches).
#: The X60 model's counters (x60/model.py), computed from the plugin's per-block counts of the launch windows;
#: ``x60_cycles`` is what ranks configs under emulation (results/runs.py).
X60_CYCLES = "x60_cycles"
X60_KEYS = ("x60_cycles", "x60_vector_cycles", "x60_scalar_cycles", "x60_memory_stall_cycles", "x60_standin_share",
            "x60_harts")
ICOUNT_KEYS = ("insns", "vector_insns", "kernel_insns", "launch_insns", "est_cycles", "l1d_accesses", "l1d_misses",
               "l2_misses", *X60_KEYS)

#: The plugin's own count of completed launches (calls of ``<kernel>_wrap``): what divides ``launch_insns``.
LAUNCH_COUNT_KEY = "launches"

#: Keys every plugin output has; a file without them comes from an older plugin.
REQUIRED_ICOUNT_KEYS = ("insns", "vector_insns", "kernel_insns", LAUNCH_COUNT_KEY)

#: The counter that ranks configs under emulation: the whole launch, so work a kernel hands to libc counts.
LAUNCH_COUNTER = "launch_insns"

#: Counters measured only inside launch windows: divided by the launches the plugin saw, so exact per launch.
LAUNCH_WINDOW_COUNTERS = (LAUNCH_COUNTER, "est_cycles", "l1d_accesses", "l1d_misses", "l2_misses", "x60_cycles",
                          "x60_vector_cycles", "x60_scalar_cycles", "x60_memory_stall_cycles")

#: Counters that describe the launches rather than add up over them (a share, a thread count): never divided.
UNDIVIDED_COUNTERS = ("x60_standin_share", "x60_harts")

#: The plugin's per-thread split of ``launch_insns`` (``harts=<n> hart_launch_insns=<n0>,<n1>,...``, when a launch had
#: more than one thread): thread 0 called the launcher, 1.. are the threads it started, in creation order; summed
#: over launches. Not counters (a list, and
#: a thread count): :func:`parse_icount` leaves them out, :func:`parse_hart_launch_insns` reads them.
HARTS_KEY = "harts"
HART_LAUNCH_KEY = "hart_launch_insns"

#: perf prints these instead of a value when an event could not be counted.
PERF_MISSING = ("<not supported>", "<not counted>")


class CounterFormatError(ValueError):
    """A counter file that does not have the documented format; the message names the source."""


def _icount_items(text: str, source: str) -> dict[str, str]:
    """``key=value`` items of the plugin's line; values are integers, ``hart_launch_insns`` a comma list of them."""
    items: dict[str, str] = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        numbers = value.split(",") if key == HART_LAUNCH_KEY else [value]
        if not sep or not all(n.isdigit() for n in numbers):
            expected = "<integer>,<integer>,..." if key == HART_LAUNCH_KEY else "<integer>"
            raise CounterFormatError(f"{source}: expected key={expected} items, got {item!r} in {text.strip()!r}")
        items[key] = value
    return items


def parse_icount(text: str, source: str = "icount output") -> dict[str, float]:
    """``insns=<n> vector_insns=<n> kernel_insns=<n> launches=<n> ...`` -> ``{"insns": n, ...}`` (the per-thread
    items ``harts`` and ``hart_launch_insns`` are left out: see :func:`parse_hart_launch_insns`)."""
    counters = {key: float(value) for key, value in _icount_items(text, source).items()
                if key not in (HARTS_KEY, HART_LAUNCH_KEY)}
    missing = [k for k in REQUIRED_ICOUNT_KEYS if k not in counters]
    if missing:
        raise CounterFormatError(
            f"{source}: missing {', '.join(missing)} in {text.strip()!r} (is the QEMU plugin up to date? "
            "run `rvtune setup`)"
        )
    return counters


def parse_hart_launch_insns(text: str, source: str = "icount output") -> list[int]:
    """``launch_insns`` per guest thread of the launches (see :data:`HART_LAUNCH_KEY`); the list sums to
    ``launch_insns``. The plugin writes the split only when a launch had more than one thread: without it, all of
    ``launch_insns`` is thread 0's (``[launch_insns]``); ``[]`` when there is no ``launch_insns`` either (no
    launcher in the ELF)."""
    items = _icount_items(text, source)
    if HART_LAUNCH_KEY not in items:
        return [int(items[LAUNCH_COUNTER])] if LAUNCH_COUNTER in items else []
    harts = [int(n) for n in items[HART_LAUNCH_KEY].split(",")]
    if HARTS_KEY in items and int(items[HARTS_KEY]) != len(harts):
        raise CounterFormatError(f"{source}: harts={items[HARTS_KEY]} but {len(harts)} hart_launch_insns values "
                                 f"in {text.strip()!r}")
    return harts


def read_icount_file(path: Path) -> dict[str, float]:
    """The plugin's output file; ``{}`` when it does not exist (QEMU was killed before it exited)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    return parse_icount(text, source=str(path))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_perf_stat_csv(text: str) -> dict[str, float]:
    """``perf stat -x,`` output -> ``{event: value}`` with event names as perf prints them (``cycles:u``).

    Fields: ``value,unit,event,[variance,]run-time,pct-enabled,metric,metric-unit`` (the variance field only
    with ``-r``). Lines that are not counter lines (comments, blank lines, the program's own stderr when perf
    shares it) are skipped; ``<not supported>`` and ``<not counted>`` events are left out.
    """
    counters: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.strip().split(",")
        if len(fields) < 4 or line.startswith("#"):
            continue
        value, event = fields[0].strip(), fields[2].strip()
        if not event:
            continue
        if value in PERF_MISSING:
            continue
        if _is_number(value) and _is_number(fields[3].strip().rstrip("%")):
            counters[event] = float(value)
    return counters
