"""`rvtune import` on checkouts that differ from the one it was first built on (our own files in the Triton_RVV
format): other layouts, harnesses it cannot fully read, broken files, both generations of their support library,
getter parameters in cases, duplicate configs, re-imports. Text only: nothing is compiled here."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness_fuzz import random_harness
from rvv_tree import add_pipe, make_tree

from pytest_rvtune.cli import main
from pytest_rvtune.compat import import_scan
from pytest_rvtune.compat.import_scan import scan
from pytest_rvtune.compat.project import read_project
from pytest_rvtune.compat.support_format import read_support_format
from pytest_rvtune.harness.output_format import FORMATS_DIR, OutputFormat


def _problems(root: Path) -> list[str]:
    return [f"{f.subject}: {f.message}" for f in scan(root).findings if not f.ok]


def test_a_fork_layout_is_found_by_what_is_there_and_said(tmp_path):
    """Kernels in src/triton/, harnesses in src/main/, headers in include/, data under data/."""
    root = make_tree(tmp_path / "repo")
    (root / "src").mkdir()
    shutil.move(root / "benchmark/src/triton", root / "src/triton")
    shutil.move(root / "benchmark/src/main", root / "src/main")
    shutil.move(root / "benchmark/src/support", root / "src/support")
    shutil.move(root / "env_build/include", root / "include")
    shutil.move(root / "benchmark/auto-tuner", root / "data")
    (root / "src/main/scale_kernel.cfg").write_text("8x12x3\n")  # their shapes file beside the harness
    result = scan(root)
    assert [f.message for f in result.findings if not f.ok] == []
    [layout] = [f.message for f in result.findings if f.subject == "layout"]
    assert layout == ("kernels in src/triton/, harnesses in src/main/, support src/support/support.cpp, includes "
                      "include, data under data/")
    assert (result.table["run_dir"], result.table["include_dirs"]) == ("data", ["include"])
    entry = result.table["kernels"]["scale"]
    assert (entry["module"], entry["harness"]) == ("src/triton/scale.py", "src/main/scale_kernel.cpp")
    assert set(entry["cases"]["8x12x3"]["sha256"]) == {"scale/run/test_data/matrix_8x12_1.txt",
                                                        "scale/run/test_data/matrix_8x12_2.txt"}


def test_a_construct_the_reader_cannot_read_is_a_fix_line_for_that_kernel_only(tmp_path, capsys):
    root = add_pipe(make_tree(tmp_path / "repo"))
    harness = root / "benchmark/src/main/pipe_kernel.cpp"
    text = harness.read_text().replace('getDB("pipe", std::to_string(M) + "x" + std::to_string(N), 2)',
                                       'getDB("pipe", std::to_string(M) + "x" + std::to_string(round_up(N)), 2)')
    harness.write_text(text)
    line = text[:text.index("round_up")].count("\n") + 1
    assert main(["import", str(root)]) == 1
    out = capsys.readouterr().out
    assert (f"FIX  pipe: benchmark/src/main/pipe_kernel.cpp:{line}: cannot read `round_up(N)`: a call of round_up(): "
            "the import does not run the harness's functions") in out
    assert "Traceback" not in out
    project = read_project(root / "rvtune.toml")
    assert project is not None and set(project.entries) == {"pipe", "scale"}  # the others proceed
    assert project.entries["pipe"].data == ("pipe/run/test_data/matrix_{M}x{N}_1.txt",)


def test_an_unexpected_error_in_one_kernel_names_it_and_the_others_are_imported(tmp_path, monkeypatch):
    root = add_pipe(make_tree(tmp_path / "repo"))
    real = import_scan.derive_signature

    def failing(function, *args, **kwargs):
        if function.startswith("pipe"):
            raise RuntimeError("nobody foresaw this")
        return real(function, *args, **kwargs)

    monkeypatch.setattr(import_scan, "derive_signature", failing)
    result = scan(root)
    assert set(result.table["kernels"]) == {"scale"}
    [problem] = [f for f in result.findings if not f.ok]
    assert problem.subject == "pipe"
    assert problem.message.startswith("benchmark/src/triton/pipe.py: the import failed on this kernel (RuntimeError: "
                                      "nobody foresaw this); it is left out, the others are imported")


def test_a_symlink_loop_is_named_and_skipped(tmp_path, capsys):
    root = make_tree(tmp_path / "repo")
    os.symlink("loop.py", root / "benchmark/src/triton/loop.py")
    assert main(["import", str(root)]) == 1
    out = capsys.readouterr().out
    assert "Traceback" not in out
    assert "loop.py: cannot read it: Too many levels of symbolic links (a symbolic link to loop.py: a loop or a " \
           "dangling link)" in out
    assert set(read_project(root / "rvtune.toml").entries) == {"scale"}  # type: ignore[union-attr]


AUGUST = '  std::cerr << "Running " << Kernel << " Average Time: " << Value << " s" << std::endl;'
JULY = '  std::cerr << "Running " << Kernel << " Time: " << Value << " s" << std::endl;'
PRINTF = '  fprintf(stderr, "Running %s Time: %f s\\n", std::string(Kernel).c_str(), Value);'
OTHER = '  std::cerr << Kernel << " took " << Value << " seconds" << std::endl;'
SUPPORT_H = """#include <iostream>
template <typename T = float>
bool check_tensor(T *a, T *b, int n, const char *label, float threshold = 1e-4) {
  bool ok = true;
  for (int i = 0; i < n; i++) if (a[i] != b[i]) ok = false;
  std::string ACC = ok ? "OK" : "NOT OK";
  printf("%s %s\\n", label, ACC.c_str());
  return ok;
}
#define PRINT_KERNEL_RUNNING_TIME(Kernel, Value) \\
MACRO
const std::string TRITON_KERNEL = "Triton Kernel";
"""


def _support(tmp_path: Path, body: str | None) -> Path:
    header = tmp_path / "inc/support/support.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    text = SUPPORT_H.replace("MACRO", body) if body else SUPPORT_H.split("#define")[0]
    header.write_text(text)
    return tmp_path


@pytest.mark.parametrize(("body", "line"), [(AUGUST, "Running Triton Kernel Average Time: 0.00123 s"),
                                            (JULY, "Running Triton Kernel Time: 0.00123 s"),
                                            (PRINTF, "Running Triton Kernel Time: 0.00123 s")])
def test_both_generations_of_their_timing_line_are_read_from_support_h(tmp_path, body, line):
    got = read_support_format(_support(tmp_path, body), ["inc"], [])
    assert got.name == "triton-rvv"
    [(ok, message)] = got.findings
    assert ok and message == (f"inc/support/support.h:10: PRINT_KERNEL_RUNNING_TIME prints `{line}` on stderr; "
                              "inc/support/support.h:3: check_tensor prints `out OK | out NOT OK` on stdout: format "
                              "triton-rvv reads it")


def test_a_timing_line_no_format_reads_is_a_fix_naming_the_line_and_how_to_add_a_format(tmp_path):
    [(ok, message)] = read_support_format(_support(tmp_path, OTHER), ["inc"], []).findings
    assert not ok
    assert message.startswith("inc/support/support.h:10: PRINT_KERNEL_RUNNING_TIME prints `Triton Kernel took "
                              "0.00123 seconds` on stderr")
    assert "which no built-in format reads (triton-rvv" in message
    assert 'change its [sample] (and [check_ok]/[check_bad]) regex to match these lines, and set output_format = ' \
           '"<that file>" in [triton_rvv] of rvtune.toml' in message
    suggested = message.split("(its [sample]: ")[1]
    assert suggested == ('stream = "stderr", regex = \'^Triton Kernel took (?P<value>[-+0-9.eE]+|nan|inf) '
                         'seconds\\s*$\', unit = "s")')
    # the suggestion, pasted into a copy of the built-in format, reads the line
    builtin = (FORMATS_DIR / "triton-rvv.toml").read_text()
    regex = suggested.split("regex = '")[1].split("', unit")[0]
    copy = tmp_path / "ours.toml"
    copy.write_text(re.sub(r"(?m)^regex = '\^Running Triton Kernel.*$", lambda _: f"regex = '{regex}'", builtin))
    out = OutputFormat.load(str(copy)).parse("out OK\n", "Triton Kernel took 0.25 seconds\n")
    assert out.samples_ns == [250_000_000]


def test_without_a_definition_the_built_in_format_is_used_and_said(tmp_path):
    got = read_support_format(_support(tmp_path, None), ["inc"], [])
    assert got.name == "triton-rvv"
    assert got.findings == [(True, "no PRINT_KERNEL_RUNNING_TIME definition in inc/support/support.h: using the "
                                   "built-in format triton-rvv")]


def _pipe_with_width(root: Path) -> Path:
    """The pipe getter takes WIDTH, which no argv field gives (as their attention getter takes DMODEL)."""
    module = root / "benchmark/src/triton/pipe.py"
    module.write_text(module.read_text().replace("def get_pipe_kernel_autotune_config(N, num_threads=1):",
                                                 "def get_pipe_kernel_autotune_config(WIDTH, num_threads=1):")
                      .replace("cols = triton.next_power_of_2(N)", "cols = triton.next_power_of_2(WIDTH)"))
    return root


def test_the_fix_line_for_a_getter_parameter_gives_a_case_the_import_then_accepts(tmp_path, capsys):
    root = _pipe_with_width(add_pipe(make_tree(tmp_path / "repo")))
    assert main(["import", str(root)]) == 1
    out = capsys.readouterr().out
    suggested = "--case pipe/default:M=8,N=12,RUN_COUNT=2,WIDTH=<value>"
    assert "takes the parameter WIDTH, which is not given (given: M, N, RUN_COUNT): give it in the case, e.g. " \
           f"`rvtune import {root} {suggested}`" in out
    assert main(["import", str(root), suggested.split()[0], suggested.split()[1].replace("<value>", "12")]) == 0
    out = capsys.readouterr().out
    assert "FIX" not in out and "pipe: benchmark/src/triton/pipe.py: 2 kernel(s)" in out and "(2 configs)" in out
    project = read_project(root / "rvtune.toml")
    assert project is not None and project.entries["pipe"].cases["default"].params["WIDTH"] == 12
    assert main(["import", str(root), "--case", "pipe/w:M=8,WIDTHS=3"]) == 1
    assert ("case w: WIDTHS is neither one of the harness's argv fields (MxNxRUN_COUNT) nor a parameter of the "
            "config getter or the data paths (WIDTH): use those names") in capsys.readouterr().out


def test_a_getters_duplicate_configs_are_dropped_with_a_note(tmp_path, capsys):
    root = make_tree(tmp_path / "repo")
    module = root / "benchmark/src/triton/scale.py"
    module.write_text(module.read_text().replace("for m in (4, 8) for n in (8, 16)]",
                                                 "for m in (4, 8) for n in (8, 16) for _ in (1, 2)]"))
    assert main(["import", str(root)]) == 0
    out = capsys.readouterr().out
    assert ("(4 configs; get_scale_kernel_autotune_config() listed 4 config(s) more than once (first "
            "BLOCK_SIZE_M=4-BLOCK_SIZE_N=8-num_threads=1): each runs once)") in out


def test_a_reimport_without_case_keeps_the_cases_of_rvtune_toml(tmp_path, capsys):
    root = make_tree(tmp_path / "repo")
    assert main(["import", str(root), "--case", "scale/tiny:M=8,N=12,RUN_COUNT=2"]) == 0
    assert main(["import", str(root)]) == 0  # what "changed since it was pinned" tells the user to run
    project = read_project(root / "rvtune.toml")
    assert project is not None
    assert {n: c.params for n, c in project.entries["scale"].cases.items()} == {
        "tiny": {"M": 8, "N": 12, "RUN_COUNT": 2}}


def test_pytest_in_a_checkout_not_imported_says_how_to_import_it(tmp_path):
    root = make_tree(tmp_path / "repo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert f"rvtune: {root} looks like a Triton_RVV checkout (kernels in benchmark/src/triton/) that has not been " \
           f"imported: run `rvtune import {root}` (it writes rvtune.toml), then pytest again" in proc.stdout
    assert main(["import", str(root)]) == 0
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--co"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)
    assert "looks like a Triton_RVV checkout" not in proc.stdout and "4 tests collected" in proc.stdout


def test_import_of_fuzzed_harnesses_ends_in_ok_or_fix_lines_never_a_traceback(tmp_path, capsys):
    rng = random.Random(1726)
    root = make_tree(tmp_path / "repo")
    harness = root / "benchmark/src/main/scale_kernel.cpp"
    good = harness.read_text()
    fixes = 0
    for _ in range(25):
        # their harness with random lines of the constructs real harnesses use spliced in before main's end
        harness.write_text(good.replace("  return 0;\n}", random_harness(rng).split("{\n", 1)[1]))
        assert main(["import", str(root), "--dry-run"]) in (0, 1)
        out = capsys.readouterr().out
        assert "Traceback" not in out and "ok   layout:" in out
        fixes += "FIX  scale:" in out
    assert fixes > 5
