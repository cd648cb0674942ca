"""Targets a user configures: ``[targets.<name>]`` in ``rvtune.toml`` or ``[tool.rvtune.targets.<name>]`` in
``pyproject.toml``, plus the built-in ``qemu`` and ``host``.

This module only reads and checks configuration; :func:`targets.factory.make_target` turns a
:class:`TargetConfig` into a
live :class:`~pytest_rvtune.targets.base.Target` (importing the SSH machinery only when a board is used).
Every problem is a :class:`ConfigError` naming the file, the target and the key, and what to do about it.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_rvtune.toolchain import RISCV_ISA, RISCV_VLEN

TargetKind = Literal["builtin", "ssh", "labgrid"]
Runner = Literal["perf", "plain"]

#: The SpacemiT X60 PMU events the seeds' run_perf.py collected with `perf stat` (user mode only).
X60_PERF_EVENTS: tuple[str, ...] = tuple(
    f"{event}:u"
    for event in (
        "u_mode_cycle",
        "eu_vfpu_full",
        "vidu_total_cycle",
        "vector_micro_op",
        "vector_load_inst",
        "vector_store_inst",
        "vector_inst",
        "l1d_load_miss",
        "l1d_load_access",
        "l1d_access",
        "l1d_miss",
    )
)

#: The seeds' `perf record` L2 events (optional: off unless a target lists them in `record_events`).
X60_RECORD_EVENTS: tuple[str, ...] = ("l2_access", "l2_miss", "l2_load_access", "l2_store_access")


class ConfigError(ValueError):
    """A target configuration that cannot be used; the message names file, target and key."""


@dataclass(frozen=True)
class TargetConfig:
    """One target as configured. For built-ins only ``name`` and ``kind`` matter."""

    name: str
    kind: TargetKind
    source: str = "<built-in>"  # the file this came from, for error messages
    default_case: str | None = None  # the case a bare run uses on this target (None: the plugin's default)
    isa: str = RISCV_ISA
    vlen: int = RISCV_VLEN
    hosts: tuple[str, ...] = ()  # one entry for a single board; several for a pool of identical boards
    port: int | None = None  # None: ~/.ssh/config or 22
    user: str | None = None  # None: ~/.ssh/config or the local user name
    key: Path | None = None  # an identity file; None: agent / ~/.ssh/config / default keys
    agent: bool = True
    known_hosts: Path | None = None  # None: ~/.ssh/known_hosts
    insecure_skip_host_key_check: bool = False
    ssh_config: Path | None = None  # None: ~/.ssh/config when it exists
    work_dir: str = ".cache/rvtune"  # on the board; relative to the login directory unless absolute or ~/
    runner: Runner = "perf"
    perf_events: tuple[str, ...] = X60_PERF_EVENTS
    record_events: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    # Seconds one run may take on this target; None: the session's (--rvtune-timeout). The plugin reads it.
    timeout: float | None = None
    taskset: str | None = None  # CPU list for `taskset -c`, e.g. "0-3"
    exec_prefix: tuple[str, ...] = ()  # e.g. ("qemu-riscv64", "-cpu", "rv64,v=true,vlen=256")
    lock_timeout: float = 3600.0  # seconds to wait for a board another job is measuring on
    connect_timeout: float = 15.0
    keepalive: float = 15.0  # seconds between keepalives: a lost board is noticed after 3 missed ones
    lock_file: str = "/tmp/rvtune-board.lock"  # on the board; every user and checkout must share it
    # kind "labgrid": the board is a place of a labgrid coordinator, its address that of the place's
    # NetworkService resource (targets/labgrid_farm.py); hosts, port and user then come from the place.
    coordinator: str | None = None  # HOST[:PORT]; None: $LG_COORDINATOR, else labgrid's 127.0.0.1:20408
    place: str | None = None  # reserve this place by name ...
    tags: Mapping[str, str] = field(default_factory=dict)  # ... or any place with these tags
    resource: str | None = None  # which NetworkService of the place (None: its only one)
    reserve_timeout: float = 3600.0  # seconds to wait for the place while others hold it

    @property
    def timing_source(self) -> str:
        """Times under an emulator (QEMU, or a board's exec_prefix) are not performance."""
        return "emulated" if self.name == "qemu" or self.exec_prefix else "real"

    def where(self, key: str | None = None) -> str:
        """`file [targets.name] key`: the prefix of every message about this target."""
        return f"{self.source} [targets.{self.name}]" + (f" {key}" if key else "")


# --- value checkers: each takes (value, where) and returns the converted value or raises ConfigError ---


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: expected a list of non-empty strings, got {value!r}")
    return tuple(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}: expected a positive number of seconds, got {value!r}")
    return float(value)


def _port(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ConfigError(f"{where}: expected a TCP port 1-65535, got {value!r}")
    return value


def _isa(value: Any, where: str) -> str:
    if value != RISCV_ISA:
        raise ConfigError(f"{where}: boards must be {RISCV_ISA!r} (what the cross build targets), got {value!r}")
    return value


def _vlen(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 32 or value & (value - 1):
        raise ConfigError(f"{where}: expected a power of two >= 32 (bits), got {value!r}")
    return value


def _runner(value: Any, where: str) -> str:
    if value not in ("perf", "plain"):
        raise ConfigError(f'{where}: expected "perf" (perf stat) or "plain", got {value!r}')
    return value


def _env(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table of NAME = \"value\", got {value!r}")
    for name, val in value.items():
        if not name.isidentifier() or not isinstance(val, str):
            raise ConfigError(f"{where}: {name!r} = {val!r}: names must be identifiers, values strings")
    return dict(value)


def _taskset(value: Any, where: str) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not text or not all(c.isdigit() or c in ",-" for c in text):
        raise ConfigError(f'{where}: expected a CPU list for taskset -c such as "0-3" or "4,5", got {value!r}')
    return text


def _hosts(value: Any, where: str) -> tuple[str, ...]:
    hosts = _str_list(value, where)
    if not hosts:
        raise ConfigError(f"{where}: a pool needs at least one host")
    return hosts


def _tags(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise ConfigError(f'{where}: expected a table of tag = "value", e.g. {{ board = "k1" }}, got {value!r}')
    for name, val in value.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]+", name) or not isinstance(val, str) or not val:
            raise ConfigError(f"{where}: {name!r} = {val!r}: labgrid tag names are lower-case letters, digits and "
                              "_ (at least two characters), values non-empty strings")
    return dict(value)


_Checker = Callable[[Any, str], Any]

#: Every key a board may set -> (TargetConfig field, checker). Paths are handled separately (relative to the file).
_KEYS: dict[str, tuple[str, _Checker]] = {
    "host": ("hosts", lambda v, w: (_str(v, w),)),
    "hosts": ("hosts", _hosts),
    "port": ("port", _port),
    "user": ("user", _str),
    "agent": ("agent", _bool),
    "insecure_skip_host_key_check": ("insecure_skip_host_key_check", _bool),
    "work_dir": ("work_dir", _str),
    "isa": ("isa", _isa),
    "vlen": ("vlen", _vlen),
    "runner": ("runner", _runner),
    "perf_events": ("perf_events", _str_list),
    "record_events": ("record_events", _str_list),
    "env": ("env", _env),
    "timeout": ("timeout", _positive),
    "taskset": ("taskset", _taskset),
    "exec_prefix": ("exec_prefix", _str_list),
    "lock_timeout": ("lock_timeout", _positive),
    "connect_timeout": ("connect_timeout", _positive),
    "keepalive": ("keepalive", _positive),
    "lock_file": ("lock_file", _str),
    "default_case": ("default_case", _str),
}
_PATH_KEYS = ("key", "known_hosts", "ssh_config")

#: The keys of a ``kind = "labgrid"`` target beyond a board's (whose host, port and user come from the place).
_LABGRID_KEYS: dict[str, tuple[str, _Checker]] = {
    "coordinator": ("coordinator", _str),
    "place": ("place", _str),
    "tags": ("tags", _tags),
    "resource": ("resource", _str),
    "reserve_timeout": ("reserve_timeout", _positive),
}
#: A board's keys that a labgrid place sets instead.
_FROM_PLACE = ("host", "hosts", "port", "user")


def _path(value: Any, where: str, base: Path) -> Path:
    text = _str(value, where)
    path = Path(os.path.expanduser(text))
    return path if path.is_absolute() else base / path


def _builtin_names() -> set[str]:
    from pytest_rvtune.targets.local import builtin_targets

    return set(builtin_targets())


def parse_target(name: str, table: Any, source: Path) -> TargetConfig:
    """One ``[targets.<name>]`` table -> TargetConfig (an SSH board)."""
    where = f"{source} [targets.{name}]"
    if name in _builtin_names():
        raise ConfigError(f"{where}: {name!r} is a built-in target; give the board another name")
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table of settings, got {table!r}")
    kind = table.get("kind", "ssh")
    if kind not in ("ssh", "labgrid"):
        raise ConfigError(f'{where} kind: expected "ssh" (a board you name, the default) or "labgrid" (a place of '
                          f"a labgrid coordinator), got {kind!r}")
    if kind == "labgrid":
        return _parse_labgrid(name, {k: v for k, v in table.items() if k != "kind"}, source)
    table = {k: v for k, v in table.items() if k != "kind"}
    if "host" in table and "hosts" in table:
        raise ConfigError(f"{where}: set either host (one board) or hosts (a pool), not both")
    if "host" not in table and "hosts" not in table:
        raise ConfigError(f'{where}: missing host: set host = "<name or address>" (or hosts = [...] for a pool)')
    values = _values(table, where, source, _KEYS)
    return TargetConfig(name=name, kind="ssh", source=str(source), **values)


def _parse_labgrid(name: str, table: dict[str, Any], source: Path) -> TargetConfig:
    """A ``kind = "labgrid"`` table: the board keys minus those the place's NetworkService sets."""
    where = f"{source} [targets.{name}]"
    for key in _FROM_PLACE:
        if key in table:
            raise ConfigError(f"{where} {key}: a labgrid target's board address (host, port, user) comes from its "
                              "place's NetworkService resource; remove it here (set it in the exporter's config)")
    if "place" not in table and "tags" not in table:
        raise ConfigError(f'{where}: missing place: set place = "<labgrid place name>" or tags = {{ ... }} (any '
                          "place with those tags)")
    keys = {k: v for k, v in _KEYS.items() if k not in _FROM_PLACE} | _LABGRID_KEYS
    return TargetConfig(name=name, kind="labgrid", source=str(source), **_values(table, where, source, keys))


def _values(table: dict[str, Any], where: str, source: Path, keys: dict[str, tuple[str, _Checker]]) -> dict[str, Any]:
    """A target table's values, checked, as TargetConfig fields."""
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in _PATH_KEYS:
            values[key] = _path(value, f"{where} {key}", source.parent)
        elif key in keys:
            attr, check = keys[key]
            values[attr] = check(value, f"{where} {key}")
        else:
            known = ", ".join(sorted([*keys, *_PATH_KEYS, "kind"]))
            raise ConfigError(f"{where}: unknown key {key!r} (known keys: {known})")
    if values.get("runner", "perf") == "plain" and "perf_events" in values:
        raise ConfigError(f'{where} perf_events: only used with runner = "perf"; remove it or set the runner')
    return values


#: The top-level tables of rvtune.toml: boards here, Triton_RVV projects in compat/project.py.
RVTUNE_TOML_TABLES = ("targets", "triton_rvv")
#: The tables under [tool.rvtune] of pyproject.toml.
PYPROJECT_TABLES = ("targets",)


def _check_tables(tables: dict[str, Any], known: tuple[str, ...], source: Path, prefix: str) -> None:
    """An unknown table is an error naming it: a typo such as [target.board] would otherwise define nothing,
    and the board would only be missing later ("unknown target") with no word about the file."""
    for name, value in tables.items():
        if name in known:
            continue
        what = f"table [{prefix}{name}]" if isinstance(value, dict) else f"key {prefix}{name}"
        close = difflib.get_close_matches(name, known, n=1)
        hint = ""
        if close:
            subs = [f"[{prefix}{close[0]}.{sub}]" for sub in value] if isinstance(value, dict) else []
            hint = f"; did you mean {', '.join(subs) or f'[{prefix}{close[0]}]'}?"
        shown = ", ".join(f"[{prefix}{k}]" for k in known)
        raise ConfigError(f"{source}: unknown {what} (known tables: {shown}){hint}")


def _targets_table(data: dict[str, Any], source: Path, pyproject: bool) -> dict[str, Any]:
    if pyproject:
        tool = data.get("tool", {}).get("rvtune", {})
        if isinstance(tool, dict):
            _check_tables(tool, PYPROJECT_TABLES, source, "tool.rvtune.")
        table = tool.get("targets", {}) if isinstance(tool, dict) else {}
        label = "[tool.rvtune.targets]"
    else:
        _check_tables(data, RVTUNE_TOML_TABLES, source, "")
        table = data.get("targets", {})
        label = "[targets]"
    if not isinstance(table, dict):
        raise ConfigError(f"{source} {label}: expected tables [targets.<name>], got {table!r}")
    return table


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror}") from exc


def builtin_configs() -> dict[str, TargetConfig]:
    """The targets that need no configuration (their Target objects come from targets/local.py)."""
    from pytest_rvtune.targets.local import builtin_targets

    return {
        name: TargetConfig(name=name, kind="builtin", isa=factory.isa)
        for name, factory in builtin_targets().items()
    }


def load_targets(rootdir: Path, config_file: Path | None = None) -> dict[str, TargetConfig]:
    """Built-in targets plus the boards configured for this project.

    With ``config_file`` (``--rvtune-config-file``) only that file is read (a ``pyproject.toml`` is read at
    ``[tool.rvtune.targets]``, anything else at ``[targets]``). Otherwise ``<rootdir>/pyproject.toml`` and then
    ``<rootdir>/rvtune.toml``; a board defined in both is an error rather than a silent override.
    """
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"{config_file}: config file not found (given by --rvtune-config-file)")
        files = [config_file]
    else:
        files = [p for p in (rootdir / "pyproject.toml", rootdir / "rvtune.toml") if p.is_file()]
    targets = builtin_configs()
    defined_in: dict[str, Path] = {}
    for path in files:
        data = _read_toml(path)
        for name, table in _targets_table(data, path, path.name == "pyproject.toml").items():
            if name in defined_in:
                raise ConfigError(f"{path} [targets.{name}]: already defined in {defined_in[name]}; keep one")
            targets[name] = parse_target(name, table, path)
            defined_in[name] = path
    return targets
