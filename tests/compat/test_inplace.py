"""A buffer updated in place by a kernel in the Triton_RVV format (issue 29), written by us: their harness reads
it from a file (getDB), the kernel writes it, check_tensor compares it with an expected file. Our generic harness
gets both files: the buffer's role is inout (restored from its input before every run, then checked)."""

from __future__ import annotations

from pathlib import Path

from rvv_tree import write_matrix

from pytest_rvtune.compat.generic_run import record_launch
from pytest_rvtune.compat.harness_values import read_data
from pytest_rvtune.compat.project import RvvCase, RvvEntry, RvvVariant
from pytest_rvtune.compat.triton_rvv_module import RvvConfig, load_rvv_module
from pytest_rvtune.compat.variants import ValuePlan, generic_binding

N = 12
HARNESS = f'''
int main(int argc, char *argv[]) {{
  int N = {N};
  float *X = (float *)malloc(N * sizeof(float));
  float *ref = (float *)malloc(N * sizeof(float));
  int rows, cols;
  std::string file1 = getDB("inc", std::to_string(1) + "x" + std::to_string(N), 1);
  if (!readMatrix(file1.c_str(), X, rows, cols)) return -1;
  std::string file2 = getDB("inc", std::to_string(1) + "x" + std::to_string(N), 2);
  if (!readMatrix(file2.c_str(), ref, rows, cols)) return -1;
  inc_kernel_wrap(ceil(1.0 * N / inc_kernel_BLOCK_SIZE_M), 1, 1, 1, inc_kernel, X, N);
  check_tensor(ref, X, N, "out");
  return 0;
}}
'''
MODULE = '''
import triton
import triton.language as tl


def inc_kernel(x_ptr, N, BLOCK_SIZE_M: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < N) + 1.0, mask=offs < N)


def benchmark_triton(x):
    kernel = triton.jit(inc_kernel)
    kernel[lambda META: (triton.cdiv(x.shape[-1], META["BLOCK_SIZE_M"]),)](x, x.shape[-1], BLOCK_SIZE_M=4)
'''


def test_a_buffer_read_from_a_file_and_checked_is_planned_and_bound_in_place(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    data_dir = run_dir / "inc/run/test_data"
    x = [[0.25 * i for i in range(N)]]
    write_matrix(data_dir / f"matrix_1x{N}_1.txt", x)
    write_matrix(data_dir / f"matrix_1x{N}_2.txt", [[v + 1.0 for v in x[0]]])
    data = read_data(HARNESS)
    assert data.checks == {"X": "ref"}
    plan = ValuePlan(4, "generic")
    problems = generic_binding(plan, data, HARNESS, "inc_kernel_BLOCK_SIZE_M", "BLOCK_SIZE_M", {}, run_dir,
                               {"x_ptr": "X", "N": "N"}, {"x_ptr": "x"})
    assert problems == []
    # X is read from its file and checked: both files (before, only the expected one: X started zeroed)
    # (keyed by the parameter of their launch function that feeds the kernel's x_ptr)
    assert plan.args == {"x": f"inc/run/test_data/matrix_1x{N}_1.txt"}
    assert plan.expected == {"x": f"inc/run/test_data/matrix_1x{N}_2.txt"}

    module_path = tmp_path / "inc.py"
    module_path.write_text(MODULE)
    variant = RvvVariant(4, "generic", args=dict(plan.args), expected=dict(plan.expected))
    entry = RvvEntry(name="inc", module=module_path, functions=("inc_kernel",), config_getter="",
                     harness=tmp_path / "inc.cpp", argv=(), data=(), signatures={"inc_kernel": {
                         "x_ptr": "*fp32", "N": "i32"}}, cases={"default": RvvCase("default", {})},
                     num_threads=None, launch="benchmark_triton")
    launch = record_launch(load_rvv_module(module_path), entry, "inc_kernel", variant,
                           RvvConfig({"BLOCK_SIZE_M": 4}, 1), run_dir)
    assert [(a.name, a.role) for a in launch.args] == [("x_ptr", "inout"), ("N", "scalar")]
    assert launch.inputs == {"x_ptr": run_dir / f"inc/run/test_data/matrix_1x{N}_1.txt"}
    assert launch.expected == {"x_ptr": run_dir / f"inc/run/test_data/matrix_1x{N}_2.txt"}
