"""Harness output formats described in data: the shipped triton-rvv format, our RVTUNE default, and the
errors a bad format file gets (naming the file and the key)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pytest_rvtune.harness.output_format import OutputFormat, OutputFormatError
from pytest_rvtune.targets.base import RunResult
from pytest_rvtune.verdict import judge

GOOD = """
[sample]
stream = "stdout"
regex = '^took (?P<value>\\S+) ms$'
unit = "ms"

[check_ok]
stream = "stdout"
regex = '^(?P<label>\\w+) fine err=(?P<max_abs>\\S+) rel=(?P<max_rel>\\S+)$'

[check_bad]
stream = "stdout"
regex = '^(?P<label>\\w+) broken at (?P<first_bad>\\d+) err=(?P<max_abs>\\S+) rel=(?P<max_rel>\\S+)$'

[launches]
stream = "stderr"
regex = '^launched (?P<count>\\d+)$'
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fmt.toml"
    path.write_text(text)
    return path


def test_triton_rvv_reads_their_lines_from_their_streams():
    fmt = OutputFormat.load("triton-rvv")
    stdout = ("Data shape 5x6x7x3\nThreshold=1.000000e-05\n4 : 0.5 vs 1.5\n9 : 1 vs 2\nout NOT OK\nx OK\n"
              "Running Triton Kernel Average Time: 9 s\n")  # a timing line on the wrong stream is not a sample
    stderr = "Running Triton Kernel Average Time: 2.5e-05 s\nRunning C Kernel Average Time: 1 s\n"
    out = fmt.parse(stdout, stderr)
    assert out.samples_ns == [25000]
    bad, ok = out.checks
    assert (bad.name, bad.ok, bad.first_bad, bad.count, bad.sizes_given) == ("out", False, 4, 2, False)
    assert math.isnan(bad.max_abs) and math.isnan(bad.max_rel)
    assert (ok.name, ok.ok, ok.first_bad, ok.count) == ("x", True, -1, 0)
    assert out.errors == [] and out.launches is None


def test_both_generations_of_their_time_line_are_samples():
    """Their support library printed "... Time:" until July 2025 (da801a2), "... Average Time:" from August."""
    fmt = OutputFormat.load("triton-rvv")
    out = fmt.parse("out OK\n", "Running Triton Kernel Time: 0.5 s\nRunning Triton Kernel Average Time: 0.25 s\n"
                                 "Running Triton Kernel Median Time: 9 s\n")
    assert out.samples_ns == [500_000_000, 250_000_000]


def test_no_sample_names_the_pattern_the_lines_seen_and_how_to_add_a_format():
    fmt = OutputFormat.load("triton-rvv")
    out = fmt.parse("out OK\n", "Triton took 3 s\n")
    result = RunResult(returncode=0, stdout="out OK\n", stderr="Triton took 3 s\n", checks=out.checks)
    verdict = judge(result, what="k", timeout=1, expected_sample=fmt.describe_sample())
    assert verdict.outcome == "error"
    assert verdict.message.startswith("k: the harness reported no timing sample (looked for a stderr line matching "
                                      "'^Running Triton Kernel (?:Average )?Time: ")
    assert "harness/formats/triton-rvv.toml); if the harness prints its time in another form, copy that file" \
        in verdict.message
    assert verdict.message.endswith("output tail:\n    out OK\n    \n    Triton took 3 s")


def test_a_full_mismatch_list_leaves_the_count_unknown():
    fmt = OutputFormat.load("triton-rvv")
    listed = "".join(f"{i} : 0 vs 1\n" for i in range(3, 35))  # check_tensor stops listing at 32
    (check,) = fmt.parse(listed + "out NOT OK\n").checks
    assert (check.first_bad, check.count) == (3, -1)
    verdict = judge(RunResult(returncode=0, checks=[check], samples_ns=[1]), what="k", timeout=1)
    assert verdict.outcome == "wrong" and "out: first bad index 3" in verdict.message
    assert "elements wrong" not in verdict.message and "max abs" not in verdict.message


def test_a_nan_time_is_an_error_not_a_sample():
    out = OutputFormat.load("triton-rvv").parse("out OK\n", "Running Triton Kernel Average Time: nan s\n")
    assert out.samples_ns == []
    assert len(out.errors) == 1 and "line 1 of stderr" in out.errors[0] and "triton-rvv" in out.errors[0]


def test_rvtune_is_the_default_protocol():
    out = OutputFormat.load("rvtune").parse("RVTUNE sample 12\nRVTUNE check y ok max_abs=0 max_rel=0 "
                                            "first_bad=-1 count=0\n", "RVTUNE sample 99\n")
    assert out.samples_ns == [12] and [c.name for c in out.checks] == ["y"]


def test_a_format_file_gives_optional_groups_units_and_launches(tmp_path: Path):
    fmt = OutputFormat.load(write(tmp_path, GOOD))
    out = fmt.parse("took 1.5 ms\nacc fine err=0 rel=0\nout broken at 3 err=0.25 rel=nan\n", "launched 4\n")
    assert out.samples_ns == [1_500_000] and out.launches == 4
    ok, bad = out.checks
    assert ok.ok and ok.sizes_given and ok.max_abs == 0
    assert (bad.first_bad, bad.max_abs, bad.count, bad.sizes_given) == (3, 0.25, -1, True)
    assert math.isnan(bad.max_rel)


@pytest.mark.parametrize(("edit", "message"), [
    (("(?P<value>\\S+) ms", "(?P<value>\\S+ ms"), "[sample].regex '^took (?P<value>\\S+ ms$' is not a valid regex"),
    (("(?P<label>\\w+) fine", "(\\w+) fine"), "[check_ok].regex '^(\\w+) fine err=(?P<max_abs>\\S+) "
                                              "rel=(?P<max_rel>\\S+)$' lacks the named group(s) (?P<label>...)"),
    (('unit = "ms"', 'unit = "minutes"'), "[sample].unit is 'minutes': expected one of s, ms, us, ns"),
    (('stream = "stderr"', 'stream = "stdin"'), "[launches].stream is 'stdin': expected one of stdout, stderr"),
    (("[launches]", "[launch]"), "unknown key(s) launch"),
    (('unit = "ms"', 'unit = "ms"\nper = "launch"'), "[sample]: unknown key(s) per"),
    (("(?P<first_bad>\\d+)", "(?P<where>\\d+)"), "[check_bad].regex '^(?P<label>\\w+) broken at (?P<where>\\d+) "
                                                 "err=(?P<max_abs>\\S+) rel=(?P<max_rel>\\S+)$': unknown named "
                                                 "group(s) where"),
    (("[check_bad]", "[elsewhere]"), "unknown key(s) elsewhere"),
])
def test_a_bad_format_file_names_the_file_and_the_key(tmp_path: Path, edit: tuple[str, str], message: str):
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(OutputFormatError) as err:
        OutputFormat.load(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_missing_section_and_an_unknown_name_are_errors(tmp_path: Path):
    path = write(tmp_path, GOOD.split("[check_bad]")[0])
    with pytest.raises(OutputFormatError, match=r"fmt.toml: missing section\(s\) \[check_bad\]"):
        OutputFormat.load(path)
    with pytest.raises(OutputFormatError, match="unknown output format 'nope': expected one of rvtune, triton-rvv"):
        OutputFormat.load("nope")
