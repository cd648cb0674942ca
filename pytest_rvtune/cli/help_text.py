"""What `rvtune ... --help` shows: plain text for a terminal, with the environment variables every command reads.

Several commands describe themselves with their module's docstring, which is written for people reading the code:
reStructuredText literals (````--emit````) and the modules that do the work (``(build.py)``,
``pytest_rvtune/results/peer.py:``). ``plain`` turns such text into what a user of the installed command can use:
literals without their backticks, references to the package's own source files left out (a kernel file such as
``kernels/matmul.py`` stays). ``ENVIRONMENT`` is the epilog of ``rvtune --help`` and of every subcommand.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Iterator

#: The environment variables pytest-rvtune reads, and what each does (also in docs/usage.md).
ENVIRONMENT_VARIABLES = (
    ("RVTUNE_CACHE_DIR", "the build, data and count caches (default: .rvtune/cache under the project)"),
    ("RVTUNE_CACHE_MAX", "the cache's size cap, e.g. 4GB, 500MB or off (default 4GB)"),
    ("RVTUNE_TOOLS_DIR", "the built QEMU instruction-count plugin (default: ~/.cache/pytest-rvtune/tools)"),
    ("RVTUNE_GOLDEN_DIR", "the committed golden data (default: golden/ beside the kernels directory)"),
    ("RVTUNE_CPU_DRIVER", "1, host or qemu: Triton scripts launch kernels on CPU tensors through pytest-rvtune"),
)
ENVIRONMENT = "environment variables:\n" + "\n".join(f"  {name:<19} {what}" for name, what in ENVIRONMENT_VARIABLES)

_LITERAL = re.compile(r"``([^`]+)``")
#: A source file or directory of the package, as docstrings name them (pytest_rvtune/x60, build.py,
#: results/peer.py, bench/yardsticks.py); a kernel file of the project (kernels/matmul.py) is not one.
_PATH = r"(?:pytest_rvtune/[\w/.]*\w|(?<![\w/<>.-])(?!kernels/)(?:\w+/)*\w+\.py\b)"
_RULES = (
    (re.compile(rf"\s*\({_PATH}\)"), ""),                   # "the harness (build.py)": the whole parenthesis
    (re.compile(rf",\s*{_PATH}(?=\))"), ""),                 # "(a computed figure, bench/yardsticks.py)"
    (re.compile(rf"([(;]\s*){_PATH}[:;,]\s*"), r"\1"),       # "(compiler/cache.py: build entries ..."
    (re.compile(r"pytest_rvtune/[\w/]*\w"), "the package"),  # "a yardstick of pytest_rvtune/bench"
)


def plain(text: str) -> str:
    """``text`` without RST literals and without references to the package's source files."""
    text = _LITERAL.sub(r"\1", text)
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions and epilogs keep their line breaks (examples, lists); a line wider than the terminal is wrapped,
    indented as it was. Option help is reflowed as usual."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            if len(indent + line) <= width:
                lines.append(indent + line)
                continue
            lead = indent + line[:len(line) - len(line.lstrip())]
            column = re.match(r"\s+\S+\s{2,}", line)  # "  NAME   what it is": go on under "what"
            hang = indent + " " * column.end() if column else lead
            lines += textwrap.wrap(line.strip(), width, initial_indent=lead, subsequent_indent=hang) or [""]
        return "\n".join(lines)


def parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.ArgumentParser, str | None]]:
    """Every parser under ``parser`` (itself first), with the one-line help it is listed with."""
    yield parser, None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                for found, listed in parsers(sub):
                    yield found, listed if found is not sub else helps.get(name)


def finish(parser: argparse.ArgumentParser) -> None:
    """Plain descriptions for every (sub)command (its one-line help where it has none), the environment epilog."""
    for found, listed in parsers(parser):
        found.formatter_class = HelpFormatter
        if not found.description and listed:
            found.description = listed[0].upper() + listed[1:] + "."
        if found.description:
            found.description = plain(found.description)
        for action in found._actions:
            if action.help and action.help is not argparse.SUPPRESS:
                action.help = plain(action.help)
        found.epilog = f"{plain(found.epilog)}\n\n{ENVIRONMENT}" if found.epilog else ENVIRONMENT
