"""Issue 15, faults 1 and 2, end to end: real Triton kernels whose stores overrun or underrun their output,
and one whose output holds a NaN, on QEMU and on the host; the user reads the buffer, the side and the count
(or "NaN" and where), and the other items still run and pass.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from plugin_helpers import KERNEL_TEMPLATE, by_kernel, read_results

#: kernel bodies over the y = x + 1 template of plugin_helpers (offs, mask and n defined)
BODIES = {
    # the mask lets 5 elements past y's end through (n = 75: the last program covers up to 79 either way)
    "overrun": "    m = offs < n + 5\n"
               "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)",
    # the same kernel with the right mask
    "right": "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)",
    # shifted by 3 with no `>= 0` in the mask: every value in bounds is right, 3 land before y's start
    "underrun": "    o = offs - 3\n"
                "    m = o < n\n"
                "    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=m) + 1.0, mask=m)",
    # 0/0 at index 7: a NaN where the reference has a number
    "nan": "    x = tl.load(x_ptr + offs, mask=mask)\n"
           "    y = tl.where(offs == 7, x * 0.0 / 0.0, x + 1.0)\n"
           "    tl.store(y_ptr + offs, y, mask=mask)",
}


def source(name: str, kind: str) -> str:
    return KERNEL_TEMPLATE.format(name=name, configs=[16, 32], body=BODIES[kind], ref="x + 1.0", loops=1)


@pytest.mark.parametrize("target", ["qemu", "host"])
def test_out_of_bounds_stores_fail_naming_buffer_side_and_count(project: pytest.Pytester,
                                                                 add_kernel: Callable[..., Path], target: str) -> None:
    for kind in ("overrun", "right", "underrun"):
        add_kernel(f"fh_{kind}", source=source(f"fh_{kind}", kind))
    result = project.runpytest("--rvtune-case", "small", "--rvtune-target", target, "--rvtune-results", "run.jsonl",
                               "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=4)  # the right mask passes in both configs
    result.stdout.fnmatch_lines_random([
        f"*fh_overrun [[]case small, BLOCK=16[]] on target {target}: out-of-bounds store",
        f"*fh_overrun [[]case small, BLOCK=32[]] on target {target}: out-of-bounds store",
        "*y: 5 elements written after its end, starting right after it (the kernel stores out of bounds*",
        f"*fh_underrun [[]case small, BLOCK=16[]] on target {target}: out-of-bounds store",
        "*y: 3 elements written before its start, starting right before it (*",
    ])
    assert "max abs error" not in result.stdout.str()  # the values in bounds were right
    records = by_kernel(read_results(project.path / "run.jsonl"))
    assert {key: r["outcome"] for key, r in records.items()} == {
        f"fh_{kind}[BLOCK={b}]": "passed" if kind == "right" else "wrong"
        for kind in ("overrun", "right", "underrun") for b in (16, 32)}
    guard = [c for c in records["fh_overrun[BLOCK=16]"]["checks"] if c["name"] == "y:after"]
    assert guard and (guard[0]["ok"], guard[0]["count"], guard[0]["first_bad"]) == (False, 5, 0)


def test_a_nan_output_is_reported_as_nan_at_its_index(project: pytest.Pytester,
                                                      add_kernel: Callable[..., Path]) -> None:
    add_kernel("fh_nan", source=source("fh_nan", "nan"))
    result = project.runpytest("--rvtune-case", "small", "--rvtune-config", "BLOCK=16", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fh_nan [[]case small, BLOCK=16[]] on target qemu: wrong answer",
                                 "*y: NaN where a number was expected, first at index 7; 1 element wrong*"])
    assert "max abs error inf" not in result.stdout.str()
