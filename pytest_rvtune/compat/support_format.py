"""Which output format reads what a checkout's own support library prints.

Their support library changed its timing line between revisions (July 2025: ``Running Triton Kernel Time: <s> s``,
August: ``Running Triton Kernel Average Time: <s> s``) and may change it again. So the import reads the checkout's
``PRINT_KERNEL_RUNNING_TIME`` macro and ``check_tensor`` (support.h / support.cpp), writes down the lines they
print with a sample value, and picks the built-in format (harness/formats/) that reads those lines. A definition
it cannot follow falls back to the built-in ``triton-rvv`` format, said so; lines no built-in format reads are a
FIX naming the line and how to add a format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvtune.compat.harness_reader import split_call_args, strip_comments
from pytest_rvtune.harness.output_format import RVTUNE, OutputFormat, OutputFormatError, available

DEFAULT_FORMAT = "triton-rvv"
_SAMPLE_SECONDS = "0.00123"


@dataclass
class SupportFormat:
    name: str = DEFAULT_FORMAT
    findings: list[tuple[bool, str]] = field(default_factory=list)  # (ok, message)


@dataclass(frozen=True)
class PrintedLine:
    where: str  # "env_build/include/support/support.h:61"
    stream: str  # stdout | stderr
    texts: tuple[str, ...]  # the line(s) it prints, with a sample value


def _stream_and_text(body: str, params: list[str], values: dict[str, str],
                     constants: dict[str, str]) -> tuple[str, str] | None:
    """What a printing statement writes: ``std::cerr << a << b`` or ``printf(fmt, args)`` / ``fprintf(stderr, ...)``,
    with each parameter replaced by its value; None when it is neither."""
    stream = re.search(r"std\s*::\s*(cerr|cout|clog)\s*<<(.*)", body, re.S)
    if stream:
        out = []
        for term in stream.group(2).split("<<"):
            term = _bare(term.strip().rstrip(";").strip())
            literal = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', term)
            if literal:
                out.append(literal.group(1).replace("\\n", "\n"))
            elif term in values:
                out.append(values[term])
            elif term in constants:
                out.append(constants[term])
            elif re.fullmatch(r"(std\s*::\s*)?endl", term):
                out.append("\n")
            else:
                return None
        return ("stdout" if stream.group(1) == "cout" else "stderr"), "".join(out)
    call = re.search(r"\b(f?printf)\s*\(", body)
    if call is None:
        return None
    try:
        args, _ = split_call_args(body, call.end() - 1)
    except ValueError:
        return None
    target = "stdout"
    if call.group(1) == "fprintf":
        if not args:
            return None
        target = "stderr" if args[0].strip() == "stderr" else "stdout"
        args = args[1:]
    literal = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', args[0].strip()) if args else None
    if literal is None:
        return None
    rest = [_bare(a) for a in args[1:]]
    pieces = iter(rest)

    def conversion(m: re.Match[str]) -> str:
        if m.group(0) == "%%":
            return "%"
        arg = next(pieces, "")
        return values.get(arg, constants.get(arg, "?"))

    text = re.sub(r"%%|%[-+ #0]*\d*(?:\.\d+)?(?:l|ll|h)?[sdifgeuxc]", conversion, literal.group(1))
    return target, text.replace("\\n", "\n")


def _bare(arg: str) -> str:
    """``std::string(Kernel).c_str()`` -> ``Kernel``: the name under conversions that do not change the text."""
    previous = None
    while arg != previous:
        previous, arg = arg, arg.strip()
        arg = re.sub(r"\.c_str\(\)$", "", arg)
        m = re.fullmatch(r"(?:std\s*::\s*string|\(\s*(?:double|float)\s*\))?\s*\((.*)\)", arg, re.S)
        if m:
            arg = m.group(1)
    return arg


def _define(text: str, name: str) -> tuple[list[str], str, int] | None:
    """(parameters, body, line) of ``#define name(params) body`` (continuation lines joined)."""
    m = re.search(rf"^[ \t]*#[ \t]*define[ \t]+{name}[ \t]*\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", text, re.M)
    if m is None:
        return None
    body = m.group(2).replace("\\\n", " ")
    return [p.strip() for p in m.group(1).split(",")], body, text.count("\n", 0, m.start()) + 1


def _constants(text: str) -> dict[str, str]:
    out = {m.group(1): m.group(2) for m in re.finditer(r'\bconst\s+std\s*::\s*string\s+(\w+)\s*=\s*"([^"]*)"', text)}
    out.update({m.group(1): m.group(2) for m in re.finditer(r'^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+"([^"]*)"', text,
                                                            re.M)})
    return out


def _timing_line(text: str, where: str) -> PrintedLine | str | None:
    found = _define(text, "PRINT_KERNEL_RUNNING_TIME")
    if found is None:
        return None
    params, body, line = found
    if len(params) != 2:
        return f"{where}:{line}: PRINT_KERNEL_RUNNING_TIME takes {len(params)} parameters, not (Kernel, Value)"
    constants = _constants(text)
    kernel = constants.get("TRITON_KERNEL", "Triton Kernel")
    printed = _stream_and_text(body, params, {params[0]: kernel, params[1]: _SAMPLE_SECONDS}, constants)
    if printed is None:
        return f"{where}:{line}: PRINT_KERNEL_RUNNING_TIME's body `{body.strip()[:80]}` is not a std::cerr/cout << " \
               "chain or a printf the import can follow"
    return PrintedLine(f"{where}:{line}", printed[0], tuple(t for t in printed[1].split("\n") if t))


def _check_lines(text: str, where: str) -> PrintedLine | None:
    """The lines check_tensor(ref, out, n, "out") prints for a pass and a fail: their `printf("%s %s\n", label,
    ACC.c_str())` with ACC "OK" / "NOT OK"."""
    m = re.search(r"\bcheck_tensor\s*\([^)]*\)\s*\{", text)
    if m is None:
        return None
    end = text.find("\n}", m.end())
    body = text[m.end():end if end > 0 else len(text)]
    label = re.search(r"const\s+char\s*\*\s*(\w+)", text[m.start():m.end()])
    acc = re.search(r"(\w+)\s*=\s*\w+\s*\?\s*\"([^\"]*)\"\s*:\s*\"([^\"]*)\"", body)
    if label is None or acc is None:
        return None
    texts, stream = [], "stdout"
    for verdict in (acc.group(2), acc.group(3)):
        for statement in re.findall(r"(?:std\s*::\s*c(?:out|err)\s*<<[^;]*|f?printf\s*\([^;]*);", body):
            if label.group(1) not in statement:
                continue
            printed = _stream_and_text(statement, [], {label.group(1): "out", acc.group(1): verdict,
                                                       acc.group(1) + ".c_str()": verdict}, {})
            if printed:
                stream = printed[0]
                texts.append(printed[1].strip("\n"))
    line = text.count("\n", 0, m.start()) + 1
    return PrintedLine(f"{where}:{line}", stream, tuple(texts)) if len(texts) == 2 else None


def _reads(fmt: OutputFormat, timing: PrintedLine | None, check: PrintedLine | None) -> bool:
    if timing is not None:
        text = "\n".join(timing.texts)
        out = fmt.parse(*((text, "") if timing.stream == "stdout" else ("", text)))
        if len(out.samples_ns) != 1:
            return False
    if check is not None:
        text = "\n".join(check.texts)
        out = fmt.parse(*((text, "") if check.stream == "stdout" else ("", text)))
        if [c.ok for c in out.checks] != [True, False]:
            return False
    return True


def read_support_format(root: Path, include_dirs: list[str], support_sources: list[str]) -> SupportFormat:
    """The format for this checkout's support library, with what was read and why."""
    result = SupportFormat()
    files = [f"{d}/support/support.h" for d in include_dirs] + list(support_sources)
    timing: PrintedLine | None = None
    check: PrintedLine | None = None
    for rel in files:
        try:
            text = strip_comments((root / rel).read_text(errors="replace"))
        except OSError:
            continue  # the layout check names unreadable files
        found = _timing_line(text, rel)
        if isinstance(found, str):
            result.findings.append((True, f"{found}: using the built-in format {DEFAULT_FORMAT}"))
            return result
        timing = timing or found
        check = check or _check_lines(text, rel)
    if timing is None:
        looked = ", ".join(files) or "the checkout"
        result.findings.append((True, f"no PRINT_KERNEL_RUNNING_TIME definition in {looked}: using the built-in "
                                      f"format {DEFAULT_FORMAT}"))
        return result
    said = f"{timing.where}: PRINT_KERNEL_RUNNING_TIME prints `{timing.texts[0] if timing.texts else ''}` on " \
           f"{timing.stream}" + (f"; {check.where}: check_tensor prints `{' | '.join(check.texts)}` on "
                                 f"{check.stream}" if check else "")
    names = [DEFAULT_FORMAT] + [n for n in available() if n not in (DEFAULT_FORMAT, RVTUNE)]
    for name in names:
        try:
            fmt = OutputFormat.load(name)
        except OutputFormatError:
            continue
        if _reads(fmt, timing, check):
            result.name = name
            result.findings.append((True, f"{said}: format {name} reads it"))
            return result
    result.findings.append((False, f"{said}, which no built-in format reads ({', '.join(names)}): copy "
                                   "pytest_rvtune/harness/formats/triton-rvv.toml into the checkout, change its "
                                   "[sample] (and [check_ok]/[check_bad]) regex to match these lines, and set "
                                   "output_format = \"<that file>\" in [triton_rvv] of rvtune.toml"
                                   + _suggested_sample(timing)))
    return result


def _escape(text: str) -> str:
    return re.escape(text).replace("\\ ", " ")


def _suggested_sample(timing: PrintedLine) -> str:
    """A [sample] table for the line the macro prints, its value (seconds, as their harnesses pass a
    std::chrono::duration<double>::count()) as the group."""
    line = next((t for t in timing.texts if _SAMPLE_SECONDS in t), None)
    if line is None:
        return ""
    before, _, after = line.partition(_SAMPLE_SECONDS)
    regex = f"^{_escape(before)}(?P<value>[-+0-9.eE]+|nan|inf){_escape(after.rstrip())}\\s*$"
    return f" (its [sample]: stream = \"{timing.stream}\", regex = '{regex}', unit = \"s\")"
