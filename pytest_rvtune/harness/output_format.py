"""How a harness reports its results, described once in data: ``formats/<name>.toml``.

Our own harnesses speak the ``RVTUNE`` line protocol (harness/output.py), the default format ``rvtune``. A
user's hand-written harness prints whatever its support library prints; a format file gives, per fact, the
stream it is on and a regex with named groups:

- ``[sample]``: one timing sample, group ``value``, with ``unit`` (s, ms, us or ns), one launch's time;
- ``[check_ok]`` / ``[check_bad]``: an output comparison, group ``label``; optional groups ``max_abs``,
  ``max_rel``, ``first_bad``, ``count`` when the harness prints them (else nan, and -1 when unknown);
- ``[mismatch]`` (optional): the mismatch lines a harness lists before a bad check on the same stream, group
  ``index``; the first gives ``first_bad``, and their number gives ``count`` when below ``listed_at_most``;
- ``[error]`` (optional): a line that says the harness rejected its input, group ``message``;
- ``[launches]`` (optional): kernel launches in all, group ``count``.

Every line of the stream is tried with ``re.search`` (anchor with ``^``/``$``). A format file with an unknown
key, a bad regex or a missing group is an OutputFormatError naming the file and the key.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvtune.harness.check import Check
from pytest_rvtune.harness.output import HarnessOutput, parse_harness_output

#: The built-in formats' directory (package data).
FORMATS_DIR = Path(__file__).resolve().parent / "formats"

#: Our own line protocol: parsed by harness.output.parse_harness_output, no file.
RVTUNE = "rvtune"

STREAMS = ("stdout", "stderr")
UNITS_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}

#: Per section: (required groups, optional groups, extra keys besides stream and regex).
_SECTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "sample": (("value",), (), ("unit",)),
    "check_ok": (("label",), ("max_abs", "max_rel", "first_bad", "count"), ()),
    "check_bad": (("label",), ("max_abs", "max_rel", "first_bad", "count"), ()),
    "mismatch": (("index",), (), ("listed_at_most",)),
    "error": (("message",), (), ()),
    "launches": (("count",), (), ()),
}
_REQUIRED_SECTIONS = ("sample", "check_ok", "check_bad")
_TOP_KEYS = ("description",)


class OutputFormatError(ValueError):
    """A format file that cannot be used: names the file and the key."""


@dataclass(frozen=True)
class Rule:
    stream: str
    regex: re.Pattern[str]
    options: dict[str, Any]


def _rule(source: str, section: str, table: Any) -> Rule:
    where = f"{source}: [{section}]"
    if not isinstance(table, dict):
        raise OutputFormatError(f"{where} must be a table with stream and regex")
    required, optional, extra = _SECTIONS[section]
    unknown = set(table) - {"stream", "regex", *extra}
    if unknown:
        raise OutputFormatError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} (allowed: stream, regex"
                                f"{''.join(', ' + e for e in extra)})")
    stream = table.get("stream")
    if stream not in STREAMS:
        raise OutputFormatError(f"{where}.stream is {stream!r}: expected one of {', '.join(STREAMS)}")
    text = table.get("regex")
    if not isinstance(text, str):
        raise OutputFormatError(f"{where}.regex is missing (a string)")
    try:
        regex = re.compile(text)
    except re.error as exc:
        raise OutputFormatError(f"{where}.regex '{text}' is not a valid regex: {exc}") from None
    missing = [g for g in required if g not in regex.groupindex]
    if missing:
        raise OutputFormatError(f"{where}.regex '{text}' lacks the named group(s) "
                                f"{', '.join(f'(?P<{g}>...)' for g in missing)}")
    stray = set(regex.groupindex) - {*required, *optional}
    if stray:
        raise OutputFormatError(f"{where}.regex '{text}': unknown named group(s) {', '.join(sorted(stray))} "
                                f"(known: {', '.join((*required, *optional))})")
    options = {k: table[k] for k in extra if k in table}
    if section == "sample" and options.get("unit") not in UNITS_NS:
        raise OutputFormatError(f"{where}.unit is {options.get('unit')!r}: expected one of {', '.join(UNITS_NS)}")
    limit = options.get("listed_at_most")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise OutputFormatError(f"{where}.listed_at_most is {limit!r}: expected a positive integer")
    return Rule(stream, regex, options)


def available() -> list[str]:
    return [RVTUNE, *sorted(p.stem for p in FORMATS_DIR.glob("*.toml"))]


@dataclass(frozen=True)
class OutputFormat:
    """A harness output format; ``rules`` is None for our own RVTUNE protocol."""

    name: str
    rules: dict[str, Rule] | None = None
    source: str = ""  # what load() takes to give this format again: a built-in's name, or a file's absolute path

    @classmethod
    def load(cls, name_or_path: str | Path) -> OutputFormat:
        """A built-in format by name (``rvtune``, ``triton-rvv``) or a format file by path."""
        if name_or_path == RVTUNE:
            return cls(RVTUNE, source=RVTUNE)
        is_path = isinstance(name_or_path, Path) or "/" in name_or_path or name_or_path.endswith(".toml")
        path = Path(name_or_path) if is_path else FORMATS_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            if is_path:
                raise OutputFormatError(f"output format file {path} does not exist")
            raise OutputFormatError(f"unknown output format {name_or_path!r}: expected one of "
                                    f"{', '.join(available())} or the path of a .toml format file")
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise OutputFormatError(f"{path}: not valid TOML: {exc}") from None
        unknown = set(data) - {*_SECTIONS, *_TOP_KEYS}
        if unknown:
            raise OutputFormatError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} (sections: "
                                    f"{', '.join(_SECTIONS)})")
        missing = [s for s in _REQUIRED_SECTIONS if s not in data]
        if missing:
            raise OutputFormatError(f"{path}: missing section(s) {', '.join(f'[{s}]' for s in missing)}")
        rules = {section: _rule(str(path), section, data[section]) for section in _SECTIONS if section in data}
        if "mismatch" in rules and rules["mismatch"].stream != rules["check_bad"].stream:
            raise OutputFormatError(f"{path}: [mismatch].stream must be [check_bad]'s ({rules['check_bad'].stream}):"
                                    " mismatches are counted up to the check line that follows them")
        return cls(path.stem, rules, str(path.resolve()) if is_path else path.stem)

    def describe_sample(self) -> str:
        """What a timing sample looks like in this format and how to read another form: for "no timing sample"."""
        if self.rules is None:
            return "looked for an `RVTUNE sample` line on stdout (harness/output.py)"
        sample = self.rules["sample"]
        built_in = FORMATS_DIR / f"{self.name}.toml"
        where = self.source if "/" in self.source else str(built_in)
        return (f"looked for a {sample.stream} line matching '{sample.regex.pattern}', format {self.name} ({where}); "
                "if the harness prints its time in another form, copy that file, change [sample].regex to match "
                "it, and set output_format = \"<the copy>\" in [triton_rvv] of rvtune.toml")

    def parse(self, stdout: str, stderr: str = "") -> HarnessOutput:
        """Samples, checks, errors and launches of one run's output."""
        if self.rules is None:
            return parse_harness_output(stdout)
        out = HarnessOutput()
        for stream, text in (("stdout", stdout), ("stderr", stderr)):
            self._parse_stream(stream, text, out)
        return out

    def _parse_stream(self, stream: str, text: str, out: HarnessOutput) -> None:
        assert self.rules is not None
        rules = {k: r for k, r in self.rules.items() if r.stream == stream}
        mismatches: list[int] = []  # indices listed since the last check line
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.rstrip("\r")
            try:
                if "sample" in rules and (m := rules["sample"].regex.search(line)):
                    out.samples_ns.append(_sample_ns(m["value"], rules["sample"].options["unit"]))
                elif "check_bad" in rules and (m := rules["check_bad"].regex.search(line)):
                    out.checks.append(self._check(m, ok=False, mismatches=mismatches))
                    mismatches = []
                elif "check_ok" in rules and (m := rules["check_ok"].regex.search(line)):
                    out.checks.append(self._check(m, ok=True, mismatches=[]))
                    mismatches = []
                elif "mismatch" in rules and (m := rules["mismatch"].regex.search(line)):
                    mismatches.append(int(m["index"]))
                elif "error" in rules and (m := rules["error"].regex.search(line)):
                    out.errors.append(m["message"])
                elif "launches" in rules and (m := rules["launches"].regex.search(line)):
                    out.launches = int(m["count"])
            except ValueError as exc:
                out.errors.append(f"unparsable harness output line {lineno} of {stream}: {line!r} "
                                  f"(format {self.name}): {exc}")

    def _check(self, m: re.Match[str], *, ok: bool, mismatches: list[int]) -> Check:
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        if ok:
            first_bad, count = -1, 0
        else:
            first_bad = mismatches[0] if mismatches else -1
            mismatch = (self.rules or {}).get("mismatch")
            limit = mismatch.options.get("listed_at_most") if mismatch is not None else None
            count = len(mismatches) if mismatches and limit is not None and len(mismatches) < limit else -1
        return Check(
            name=groups["label"], ok=ok,
            max_abs=float(groups.get("max_abs", math.nan)), max_rel=float(groups.get("max_rel", math.nan)),
            first_bad=int(groups.get("first_bad", first_bad)), count=int(groups.get("count", count)),
            sizes_given="max_abs" in groups and "max_rel" in groups,
        )


def _sample_ns(value: str, unit: str) -> int:
    amount = float(value)
    if not amount >= 0 or math.isinf(amount):  # also rejects nan
        raise ValueError(f"sample {value!r} is not a non-negative finite time")
    return round(amount * UNITS_NS[unit])
