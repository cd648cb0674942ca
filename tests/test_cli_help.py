"""`rvtune ... --help` as a user reads it: plain text (no reStructuredText, no paths of the package's own
source), a description for every command, the environment variables in every epilog and in docs/usage.md, and one
name per option across commands (the old names still parse)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_rvtune.cli import build_parser
from pytest_rvtune.cli.help_text import ENVIRONMENT_VARIABLES, parsers, plain

ROOT = Path(__file__).resolve().parents[1]
SOURCE_PATH = re.compile(r"pytest_rvtune/|(?<![\w/<>.-])(?!kernels/)(?:\w+/)*\w+\.py\b")


def _helps() -> list[tuple[str, str]]:
    return [(found.prog, found.format_help()) for found, _ in parsers(build_parser())]


@pytest.mark.parametrize(("prog", "text"), _helps(), ids=lambda v: v if v.startswith("rvtune") else "")
def test_every_help_is_plain_text_with_a_description_and_the_environment(prog: str, text: str) -> None:
    assert "``" not in text and ":func:" not in text and ":class:" not in text, prog
    assert not SOURCE_PATH.search(text), (prog, SOURCE_PATH.search(text))
    body = text.split("\n\n")
    assert len(body) >= 3, f"{prog}: no description"  # usage, description, arguments...
    for name, _ in ENVIRONMENT_VARIABLES:
        assert f"\n  {name} " in text, (prog, name)


def test_every_environment_variable_the_package_reads_is_documented() -> None:
    read = set()
    for path in (ROOT / "pytest_rvtune").rglob("*.py"):
        read |= set(re.findall(r"\"(RVTUNE_[A-Z_]+)\"", path.read_text()))
    listed = {name for name, _ in ENVIRONMENT_VARIABLES}
    assert read <= listed, f"read but not in rvtune --help: {sorted(read - listed)}"
    usage = (ROOT / "docs" / "usage.md").read_text()
    assert all(f"`{name}`" in usage for name in listed)


def test_plain_drops_literals_and_source_references_but_keeps_kernel_files() -> None:
    text = ("``--emit elf`` links it with the harness (build.py); see kernels/matmul.py or a kernels/<name>.py "
            "module (compiler/cache.py: entries; targets/count_cache.py: records), a yardstick of "
            "``pytest_rvtune/bench`` (a computed figure, bench/yardsticks.py) and module's ``launch()``")
    assert plain(text) == ("--emit elf links it with the harness; see kernels/matmul.py or a kernels/<name>.py "
                           "module (entries; records), a yardstick of the package (a computed figure) and "
                           "module's launch()")


def test_one_name_per_option_and_the_old_names_still_parse() -> None:
    parser = build_parser()
    for argv in (["noise", "a", "b", "-o", "n.json"], ["noise", "a", "b", "--out", "n.json"],
                 ["noise", "a", "b", "--output", "n.json"]):
        assert parser.parse_args(argv).output == "n.json"
    assert parser.parse_args(["noise", "a", "b"]).output == "noise.json"
    for flag in ("--kernels-dir", "--kernels"):
        assert parser.parse_args(["bench-compiler", flag, "k2"]).kernels == Path("k2")
    assert parser.parse_args(["bench-compiler"]).kernels == Path("kernels")
    assert parser.parse_args(["report", "r.jsonl", "-o", "d"]).out == Path("d")
    assert parser.parse_args(["export-best", "r.jsonl", "-o", "d"]).out == Path("d")
    noise_help = parser._subparsers._group_actions[0].choices["noise"].format_help()  # type: ignore[union-attr]
    assert "--out" in noise_help and "--output" not in noise_help  # the old name is not advertised
