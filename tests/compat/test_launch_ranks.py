"""Which strides triton-cpu specialised: the last dimension's of each tensor, the dimension counted from how our own
module (Triton_RVV format) makes the tensor. Text only: nothing is compiled or run."""

from __future__ import annotations

import textwrap

from pytest_rvtune.compat.harness_reader import parse_harness
from pytest_rvtune.compat.launch_signature import derive_signature
from pytest_rvtune.compat.module_reader import parse_module

HEADER = "import torch\nimport triton\nimport triton.language as tl\n\n"


def _signature(module: str, kernel: str, wrap: str):
    info = parse_module(HEADER + textwrap.dedent(module))
    assert info.error is None
    harness = parse_harness(f"int main() {{\n float *x = 0; float *y = 0; int n = 4; int s = 3;\n  {wrap}\n}}\n")
    return derive_signature(kernel, info.kernels[kernel], info.launches[kernel], harness.wrap_calls[kernel],
                            harness.pointer_types, harness.c_type_of, info.launch_kinds[kernel],
                            info.launch_ranks[kernel])


ROWS = '''
def rows_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    pass


def rows(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    rows_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK=64)
    return y


x = torch.randn(37, 21, device="cpu")
rows(x)
'''


def test_the_row_stride_of_a_2d_tensor_is_not_specialised_though_it_is_the_highest_index_used():
    table, problems = _signature(ROWS, "rows_kernel", "rows_kernel_wrap(37, 1, 1, 1, rows_kernel, y, x, s, s, n);")
    assert problems == []
    assert table == {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32", "out_row_stride": "i32",
                     "n_cols": "i32"}


NORM = '''
def norm_kernel(x_ptr, w_ptr, y_ptr, stride_xm, stride_xn, stride_w, stride_ym, stride_yn, eps,
                BLOCK: tl.constexpr):
    pass


def norm(x, w, eps: float = 1e-5):
    if x.dim() == 3:
        x2 = x.reshape(-1, x.shape[-1])
    else:
        x2 = x
    M, N = x2.shape
    assert w.shape == (N,)
    x2 = x2.contiguous()
    w = w.contiguous().to(torch.float32)
    y = torch.empty_like(x2)
    norm_kernel[(M,)](x2, w, y, x2.stride(0), x2.stride(1), w.stride(0) if w.dim() > 0 else 0,
                      y.stride(0), y.stride(1), eps, BLOCK=128)
    y = y.reshape(x.shape)  # after the launch: tells nothing of what the launch passed
    return y
'''


def test_a_1d_tensors_only_stride_is_specialised_and_the_float_after_it_keeps_its_place():
    table, problems = _signature(NORM, "norm_kernel",
                                 "norm_kernel_wrap(4, 1, 1, 1, norm_kernel, x, x, y, s, s, 1e-5f);")
    assert problems == []
    assert table == {"x_ptr": "*fp32", "w_ptr": "*fp32", "y_ptr": "*fp32", "stride_xm": "i32", "stride_xn": 1,
                     "stride_w": 1, "stride_ym": "i32", "stride_yn": 1, "eps": "fp32"}


def test_ranks_come_from_factories_views_and_call_sites():
    module = '''
    def k_kernel(a_ptr, b_ptr, c_ptr, sa0, sa1, sa2, sb0, sb1, sc0, sc1, sc2, BLOCK: tl.constexpr):
        pass


    def launch(a, b, n):
        c = a.view(n, 4, -1)
        k_kernel[(1,)](a, b, c, a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1),
                       c.stride(0), c.stride(1), c.stride(2), BLOCK=8)


    if __name__ == "__main__":
        a = torch.zeros((2, 3, 8))
        b = torch.rand(5, 6) * 0.5 + 1.0
        launch(a, b, 2)
    '''
    info = parse_module(HEADER + textwrap.dedent(module))
    assert {t: r for t, (r, _) in info.launch_ranks["k_kernel"].items()} == {"a": 3, "b": 2, "c": 3}


def test_a_rank_no_code_tells_is_a_problem_naming_the_tensor_and_nothing_is_specialised():
    module = '''
    def k_kernel(a_ptr, sa0, sa1, BLOCK: tl.constexpr):
        pass


    def launch(a):
        k_kernel[(1,)](a, a.stride(0), a.stride(1), BLOCK=8)
    '''
    table, problems = _signature(module, "k_kernel", "k_kernel_wrap(1, 1, 1, 1, k_kernel, x, s);")
    assert table["sa0"] == table["sa1"] == "i32"
    problem = next(p for p in problems if "how many dimensions a has" in p)
    assert "sa0 = a.stride(0), sa1 = a.stride(1)" in problem and "set that parameter = 1" in problem
    assert any("calls k_kernel_wrap with 2 kernel arguments" in p for p in problems)  # and the count disagrees


def test_another_launch_of_the_same_kernel_tells_a_rank_the_first_does_not():
    module = '''
    def k_kernel(a_ptr, sa0, sa1, BLOCK: tl.constexpr):
        pass


    def benchmark_triton(a):
        k_kernel[(1,)](a, a.stride(0), a.stride(1), BLOCK=8)


    def run(a):
        M, K = a.shape
        k_kernel[(M,)](a, a.stride(0), a.stride(1), BLOCK=8)
    '''
    table, problems = _signature(module, "k_kernel", "k_kernel_wrap(1, 1, 1, 1, k_kernel, x, s);")
    assert problems == []
    assert table == {"a_ptr": "*fp32", "sa0": "i32", "sa1": 1}
    info = parse_module(HEADER + textwrap.dedent(module))
    assert "run()'s launch" in info.launch_ranks["k_kernel"]["a"][1]
