"""A fork's shapes file beside its harness (``src/main/<x>_kernel.cfg`` or ``<x>.cfg``): the kernel's default
case(s), used where neither ``--case`` nor rvtune.toml gives one (else the harness's built-in sizes).

Read tolerantly, as text, line by line (``#``, ``//`` and ``;`` start a comment; blank lines separate groups):

- ``1024x512x256`` (or ``1024 x 512 x 256``, ``1024,512,256``): one case, the numbers given to the harness's argv
  fields in order (``MxNxKxRUN_COUNT``); one number fewer leaves the last field (RUN_COUNT) at the harness's value;
- ``M=1024, N=512`` / ``M: 1024 N: 512`` on one line: one case; single ``key=value`` lines in a row (a group, or
  under a ``[name]`` header, which names the case) together make one case. Keys are the argv fields, any case;
  a field not given keeps the harness's value.

Anything else (an unknown key, a count of numbers that fits no field list, a value that is not an integer) is a
problem naming the file, the line and what to write; the lines it can read still give their cases.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

_COMMENT = re.compile(r"\s*(?:#|//|;).*$")
_SHAPE = re.compile(r"\s*\d+(?:\s*[xX,*]\s*\d+)*\s*")
_PAIR = re.compile(r"([A-Za-z_]\w*)\s*[=:]\s*([^\s,;=:]+)")
_HEADER = re.compile(r"\s*\[\s*([\w.-]+)\s*\]\s*")


@dataclass
class ShapeCfg:
    cases: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def cfg_for(harness: Path, stem: str) -> Path | None:
    """The shapes file beside a harness: ``<harness stem>.cfg``, else ``<kernel>.cfg``."""
    for candidate in (harness.with_suffix(".cfg"), harness.parent / f"{stem}.cfg"):
        if candidate.is_file():
            return candidate
    return None


def read_shape_cfg(path: Path, fields: list[str], defaults: Mapping[str, int], shown: str) -> ShapeCfg:
    """The cases of a shapes file for a harness whose argv fields are ``fields`` (``shown``: the path to print)."""
    out = ShapeCfg()
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        out.problems.append(f"{shown}: cannot read it ({exc.strerror or exc}): fix or remove it")
        return out
    by_name = {f.lower(): f for f in fields}
    group: dict[str, int] = {}
    group_name: str | None = None

    def add(values: dict[str, int], name: str | None) -> None:
        case = {**{f: defaults.get(f, 0) for f in fields}, **values}
        key = name or "x".join(str(case[f]) for f in fields)
        out.cases.setdefault(key, case)

    def flush() -> None:
        nonlocal group, group_name
        if group:
            add(group, group_name)
        group, group_name = {}, None

    for number, raw in enumerate(lines, 1):
        line = _COMMENT.sub("", raw).strip()
        where = f"{shown}:{number}: `{raw.strip()[:60]}`"
        if not line:
            flush()
            continue
        header = _HEADER.fullmatch(line)
        if header:
            flush()
            group_name = header.group(1)
            continue
        if _SHAPE.fullmatch(line):
            numbers = [int(n) for n in re.findall(r"\d+", line)]
            if len(numbers) == len(fields) or (len(numbers) == len(fields) - 1 and fields):
                add(dict(zip(fields, numbers, strict=False)), None)
            else:
                out.problems.append(f"{where}: {len(numbers)} number(s), the harness takes {len(fields)} argv "
                                    f"field(s) ({'x'.join(fields) or 'none'}): write them in that order")
            continue
        pairs = _PAIR.findall(line)
        rest = _PAIR.sub("", line).strip(" \t,;")
        bad = [k for k, _ in pairs if k.lower() not in by_name]
        not_int = [f"{k}={v}" for k, v in pairs if not re.fullmatch(r"[+-]?\d+", v)]
        if not pairs or rest or bad or not_int:
            why = (f"{', '.join(bad)} is not one of the harness's argv fields ({', '.join(fields) or 'none'})" if bad
                   else f"{', '.join(not_int)}: not an integer" if not_int
                   else "neither `MxN...` nor `KEY=VALUE` pairs")
            out.problems.append(f"{where}: cannot read it ({why}): write `{'x'.join(fields) or 'M'}` numbers or "
                                f"`{fields[0] if fields else 'M'}=<n>, ...` (it is left out)")
            continue
        values = {by_name[k.lower()]: int(v) for k, v in pairs}
        if len(pairs) > 1 and not group and group_name is None:
            add(values, None)
        else:
            group.update(values)
    flush()
    return out
