"""Find our item that an outside ELF's counts are to be set beside (``rvtune count --compare-to RESULTS``).

The rule (docs/usage.md, "Counting any ELF"):

- the kernel: a record whose kernel function (``rerun.kernel_symbol``, what the plugin counted as kernel_insns)
  is the ELF's ``--symbol``, or whose kernel module name is that symbol or that symbol without ``_kernel``
  (Triton_RVV names the function ``fused_moe_kernel`` where our module is ``fused_moe``);
- the config: ``--config 'BLOCK_SIZE_M=4,BLOCK_SIZE_N=16'`` when given, every key equal in the record's config;
  else the ELF's own block constants (``const int <kernel>_<NAME>``, which both our launcher and triton-cpu's
  emit), every constant that the record's config also has equal (and at least one shared);
- only valid items (passed, or only failed by a comparison gate); ``--case`` narrows to one case.

Several cases (small, emu, ...) of one config can match: each is a row of its own, for the user to pick the
one whose problem size is the ELF's.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.runs import Run


class PeerConfigError(ValueError):
    """A ``--config`` that cannot be read; names it and the format."""


def parse_config(text: str) -> dict[str, int]:
    """``'BLOCK_SIZE_M=4,BLOCK_SIZE_N=16'`` -> ``{"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": 16}`` (true/false as 1/0)."""
    config: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        word = value.strip().lower()
        if word in ("true", "false"):
            config[key.strip()] = int(word == "true")
            continue
        try:
            config[key.strip()] = int(value)
        except ValueError:
            raise PeerConfigError(f"--config {text!r}: {part!r} is not NAME=<integer>; write e.g. "
                                  "'BLOCK_SIZE_M=4,BLOCK_SIZE_N=16'") from None
        if not sep or not key.strip():
            raise PeerConfigError(f"--config {text!r}: {part!r} is not NAME=<integer>")
    if not config:
        raise PeerConfigError(f"--config {text!r} names no value; write e.g. 'BLOCK_SIZE_M=4,BLOCK_SIZE_N=16'")
    return config


def kernel_symbol_of(record: RunRecord) -> str:
    rerun = record.raw.get("rerun")
    return str(rerun.get("kernel_symbol", "")) if isinstance(rerun, dict) else ""


def same_kernel(record: RunRecord, symbol: str) -> bool:
    return symbol in (kernel_symbol_of(record), record.kernel) or symbol.removesuffix("_kernel") == record.kernel


def same_config(record: RunRecord, config: Mapping[str, int], *, all_keys: bool) -> bool:
    """``config``'s values equal in the record's config: every key (``all_keys``: a --config the user wrote),
    else the keys both have, at least one."""
    shared = [k for k in config if k in record.config]
    if all_keys and len(shared) < len(config):
        return False
    return bool(shared) and all(_as_int(record.config[k]) == config[k] for k in shared)


def _as_int(value: object) -> int | None:
    if isinstance(value, bool | int):
        return int(value)
    return None


def matching_records(run: Run, symbol: str, config: Mapping[str, int], *, from_user: bool,
                     case: str | None = None) -> list[RunRecord]:
    """The run's valid records of kernel ``symbol`` and ``config`` (see the module doc), by case."""
    found = [r for r in run.records if r.valid and same_kernel(r, symbol)
             and same_config(r, config, all_keys=from_user) and (case is None or r.case == case)]
    return sorted(found, key=lambda r: (r.case, r.target, r.config_id))


def kernels_in(run: Run) -> list[str]:
    """Kernel names and functions the run has, for an error that names what could match."""
    return sorted({f"{r.kernel} ({kernel_symbol_of(r) or '?'})" for r in run.records})


__all__ = ["PeerConfigError", "kernel_symbol_of", "kernels_in", "matching_records", "parse_config", "same_config",
           "same_kernel"]
