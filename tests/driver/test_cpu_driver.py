"""pytest_rvtune as a Triton CPU driver: ``kernel[grid](*cpu_tensors)`` through Triton's own JIT, our backend
(real frontend, our lowering, clang-19 for the host) and our launcher, on the tensors' memory in place.

Compilations are counted with Triton's own ``jit_post_compile_hook`` and the loader's build counter, never by
timing. Shapes are tiny: every test compiles at most a few kernels.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl
from driver_kernels import matmul_kernel, run_descriptor_scale
from triton.runtime.driver import driver

import pytest_rvtune.cpu_driver as cpu_driver
from pytest_rvtune.compiler.driver import RVTuneDriver
from pytest_rvtune.compiler.lower import UnsupportedOpError
from pytest_rvtune.cpu_driver.activation import ActivationError
from pytest_rvtune.cpu_driver.launch import LaunchError
from pytest_rvtune.toolchain import HOST_ISA

pytestmark = pytest.mark.usefixtures("active_driver")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def grid_id_kernel(out_ptr):
    # out[z, y, x] = linear id written by program (x, y, z): shows every program ran once, with its own ids.
    x = tl.program_id(0)
    y = tl.program_id(1)
    z = tl.program_id(2)
    nx = tl.num_programs(0)
    ny = tl.num_programs(1)
    tl.store(out_ptr + (z * ny + y) * nx + x, (z * 100 + y * 10 + x).to(tl.int32))


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, big, SCALE: tl.constexpr, NEGATE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask) * SCALE * alpha + (big - 2**40).to(tl.float32)
    if NEGATE:
        y = -y
    tl.store(out_ptr + offs, y, mask=mask)


@triton.jit
def stride_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=mask), mask=mask)


@triton.jit(do_not_specialize=["stride"])
def stride_kernel_unspecialised(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=mask), mask=mask)


@triton.jit
def inline_asm_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(x_ptr + tl.arange(0, BLOCK), y)


@triton.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def line_of(fn, text: str) -> int:
    """The file line of ``text`` inside a jitted kernel."""
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def launch_add(n: int = 37, block: int = 16, **meta):
    x, y = torch.randn(n), torch.randn(n)
    out = torch.full((n + 5,), -7.0)  # 5 guard elements past n: the kernel must not touch them
    kernel = add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block, **meta)
    return x, y, out, kernel


# ---- activation ----------------------------------------------------------------------------------------


def test_activate_makes_ours_the_active_driver():
    assert cpu_driver.is_active() and RVTuneDriver.is_active()
    assert isinstance(driver.active, RVTuneDriver)
    # named as triton-cpu names it: code that makes a torch device of it (Triton's grouped-GEMM tutorial) gets the CPU
    assert driver.active.get_current_target() == triton.backends.compiler.GPUTarget("cpu", HOST_ISA, 1)
    assert driver.active.get_active_torch_device() == torch.device("cpu")
    assert torch.device(driver.active.get_current_target().backend) == torch.device("cpu")


def test_unknown_mode_refused():
    with pytest.raises(ActivationError, match="unknown CPU driver mode 'gpu'"):
        cpu_driver.activate("gpu")
    assert cpu_driver.is_active()  # the refused call changed nothing


def _run_python(tmp_path, code: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` as a script file (Triton reads kernels' source from their file) in a fresh process, with
    Triton's cache under ``tmp_path`` and the CPU driver variable unset unless ``env`` sets it."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    full_env = {k: v for k, v in os.environ.items() if k != cpu_driver.ENV_VAR}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**full_env, "TRITON_CACHE_DIR": str(tmp_path / "triton"), **env}, check=False)


_ADD_SCRIPT = """
    import torch, triton, triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    x, y, out = torch.ones(10), torch.ones(10), torch.zeros(10)
    try:
        add_kernel[(1,)](x, y, out, 10, BLOCK=16)
        print("RESULT", out.tolist() == [2.0] * 10)
    except RuntimeError as e:
        print("ERROR", e)
"""


def test_without_activation_nothing_changes(tmp_path):
    # A fresh process that does not ask for the driver: Triton sees no active driver, as without rvtune.
    proc = _run_python(tmp_path, _ADD_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    assert "ERROR 0 active drivers" in proc.stdout


def test_environment_variable_activates(tmp_path):
    proc = _run_python(tmp_path, _ADD_SCRIPT, RVTUNE_CPU_DRIVER="1", RVTUNE_CACHE_DIR=str(tmp_path / "rvtune"))
    assert proc.returncode == 0, proc.stderr
    assert "RESULT True" in proc.stdout


@pytest.mark.parametrize("value", ["0", "off", ""])
def test_environment_variable_off_values(value, monkeypatch):
    monkeypatch.setenv(cpu_driver.ENV_VAR, value)
    from pytest_rvtune.cpu_driver import activation

    assert activation.env_mode() is None


def test_environment_variable_bad_value_named(monkeypatch):
    monkeypatch.setenv(cpu_driver.ENV_VAR, "maybe")
    from pytest_rvtune.cpu_driver import activation

    with pytest.raises(ActivationError, match="RVTUNE_CPU_DRIVER='maybe'"):
        activation.env_mode()


def test_driver_module_imported_before_triton(tmp_path):
    proc = _run_python(tmp_path, """
        import pytest_rvtune.compiler.driver as d, triton
        assert triton.backends.backends["rvtune"].driver is d.RVTuneDriver and not d.RVTuneDriver.is_active()
    """)
    assert proc.returncode == 0, proc.stderr


def test_deactivate_restores_triton(tmp_path):
    # Run in a fresh process so this module's activation is not disturbed.
    proc = _run_python(tmp_path, """
        import triton, pytest_rvtune.cpu_driver as cd
        original = triton.Config
        cd.activate()
        assert triton.Config(dict(B=1), num_threads=2).all_kwargs()["num_threads"] == 2
        cd.deactivate()
        assert triton.Config is original and triton.runtime.autotuner.Config is original and not cd.is_active()
        try:
            triton.Config(dict(B=1), num_threads=2)
        except TypeError:
            print("Config refuses num_threads again")
        try:
            triton.runtime.driver.active.get_current_target()
        except RuntimeError as e:
            print("ERROR", e)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "Config refuses num_threads again" in proc.stdout
    assert "ERROR 0 active drivers" in proc.stdout


# ---- launches ------------------------------------------------------------------------------------------


@triton.jit
def c_names_kernel(cos, sin, exp, log, sqrt, floor, int, float, char, double, signed, n, BLOCK: tl.constexpr):
    # parameters named like C keywords and libm functions (the C emitter renames them: cos_v, int_v, ...)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(cos + offs, mask=mask) + tl.load(sin + offs, mask=mask) * 2 + tl.load(exp + offs, mask=mask) * 4
    v += tl.load(log + offs, mask=mask) * 8 + tl.load(sqrt + offs, mask=mask) * 16 + tl.load(floor + offs, mask=mask)
    v += tl.load(int + offs, mask=mask) * 32 + tl.load(float + offs, mask=mask) * 64 + tl.load(char + offs, mask=mask)
    tl.store(double + offs, v * signed, mask=mask)


def test_parameters_named_like_c_keywords_and_libm_functions():
    n = 11
    ins = [torch.randn(n) for _ in range(9)]
    out = torch.zeros(n)
    c_names_kernel[(1,)](*ins[:6], ins[6], ins[7], ins[8], out, 3, n, BLOCK=16)
    weights = (1, 2, 4, 8, 16, 1, 32, 64, 1)
    torch.testing.assert_close(out, sum(w * t for w, t in zip(weights, ins, strict=True)) * 3)


def test_vector_add_writes_tensor_in_place():
    x, y, out, _ = launch_add()
    torch.testing.assert_close(out[:37], x + y)
    assert out[37:].tolist() == [-7.0] * 5  # masked-off lanes untouched


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64])
def test_vector_add_dtypes(dtype):
    x = (torch.arange(20) % 7).to(dtype)
    y = (torch.arange(20) % 5).to(dtype)
    out = torch.zeros(20, dtype=dtype)
    add_kernel[(2,)](x, y, out, 20, BLOCK=16)
    assert torch.equal(out, x + y)


def test_matmul_2d_grid_with_masks():
    M, N, K = 19, 13, 11
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.zeros(M, N)
    grid = (triton.cdiv(M, 8), triton.cdiv(N, 8))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BM=8, BN=8, BK=4)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)


def test_matmul_on_strided_views():
    # Non-contiguous operands: the kernel reads through the strides the launch passes.
    M, N, K = 9, 7, 6
    a = torch.randn(K, M).t()
    b = torch.randn(N, K).t()
    c_full = torch.zeros(M, 2 * N)
    c = c_full[:, ::2]
    matmul_kernel[(2, 1)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                          c.stride(0), c.stride(1), BM=8, BN=8, BK=4)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    assert c_full[:, 1::2].abs().sum() == 0


@pytest.mark.parametrize("grid", [(4,), (4, 3), (4, 3, 2)])
def test_grids_of_one_to_three_dims(grid):
    nx, ny, nz = (*grid, 1, 1)[:3]
    out = torch.full((nz, ny, nx), -1, dtype=torch.int32)
    grid_id_kernel[grid](out)
    z, y, x = torch.meshgrid(torch.arange(nz), torch.arange(ny), torch.arange(nx), indexing="ij")
    assert torch.equal(out, (z * 100 + y * 10 + x).to(torch.int32))


def test_grid_as_a_function_of_meta():
    n = 50
    x, y, out = torch.randn(n), torch.randn(n), torch.zeros(n)
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=8)
    torch.testing.assert_close(out, x + y)


def test_empty_grid_runs_nothing():
    out = torch.full((4,), -1, dtype=torch.int32)
    grid_id_kernel[(0,)](out)
    assert out.tolist() == [-1] * 4


@pytest.mark.parametrize("num_threads", [0, 1, 3])
def test_num_threads_reaches_the_launch(num_threads):
    grid = (5, 4, 3)
    out = torch.full((3, 4, 5), -1, dtype=torch.int32)
    kernel = grid_id_kernel[grid](out, num_threads=num_threads)
    assert kernel.metadata.num_threads == num_threads
    z, y, x = torch.meshgrid(torch.arange(3), torch.arange(4), torch.arange(5), indexing="ij")
    assert torch.equal(out, (z * 100 + y * 10 + x).to(torch.int32))


def test_scalar_and_constexpr_args():
    n = 20
    x = torch.arange(n, dtype=torch.float32)
    out = torch.zeros(n)
    # alpha: fp32 scalar; big: i64 scalar (> 2**32); SCALE: float constexpr; NEGATE: bool constexpr
    scale_kernel[(2,)](x, out, n, 0.5, 2**40 + 3, SCALE=4.0, NEGATE=False, BLOCK=16)
    torch.testing.assert_close(out, x * 2.0 + 3.0)
    scale_kernel[(2,)](x, out, n, 0.5, 2**40 + 3, SCALE=4.0, NEGATE=True, BLOCK=16)
    torch.testing.assert_close(out, -(x * 2.0 + 3.0))


def test_launch_hooks_see_every_launch(monkeypatch):
    # Triton's launch hooks (what profilers such as proton use) wrap each launch with its metadata.
    from triton import knobs

    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", lambda md: seen.append(("enter", md.get()["name"])))
    monkeypatch.setattr(knobs.runtime, "launch_exit_hook", lambda md: seen.append(("exit", md.get()["name"])))
    launch_add()
    launch_add()
    assert seen == [("enter", "add_kernel"), ("exit", "add_kernel")] * 2


# ---- compilation cache and specialisation ---------------------------------------------------------------


def test_second_launch_compiles_nothing(compile_log):
    x, y = torch.randn(41), torch.randn(41)
    copy_kernel[(1,)](x, y, BLOCK=32)  # copy_kernel's first launch in this module with BLOCK=32
    assert compile_log.count == 1
    assert compile_log.binaries_built in (1, 2)  # the kernel (and its launcher, unless built before)
    compile_log.reset()
    y.zero_()
    copy_kernel[(1,)](x, y, BLOCK=32)
    assert torch.equal(y[:32], x[:32])
    assert compile_log.count == 0 and compile_log.binaries_built == 0


def test_new_config_compiles_kernel_but_reuses_launcher(compile_log):
    launch_add(n=41, block=64)
    compile_log.reset()
    x, y, out, _ = launch_add(n=41, block=128)
    torch.testing.assert_close(out[:41], x + y)
    assert compile_log.count == 1
    # The launcher depends only on the kernel's parameters: one library serves every config.
    assert compile_log.binaries_built == 1


def test_shared_objects_cached_on_disk(compile_log):
    # A fresh JITFunction (as in a new process) compiles through Triton again, but clang builds nothing.
    x, y, out = torch.randn(9), torch.randn(9), torch.zeros(9)
    triton.jit(add_kernel.fn)[(5,)](x, y, out, 9, BLOCK=2)
    compile_log.reset()
    out.zero_()
    triton.jit(add_kernel.fn)[(5,)](x, y, out, 9, BLOCK=2)
    torch.testing.assert_close(out, x + y)
    assert compile_log.count == 1 and compile_log.binaries_built == 0


def test_int_equal_to_one_is_its_own_specialisation(compile_log):
    x = torch.arange(16, dtype=torch.float32)
    out = torch.zeros(16)
    stride_kernel[(1,)](x, out, 8, 1, BLOCK=8)
    stride_kernel[(1,)](x, out, 8, 2, BLOCK=8)
    assert torch.equal(out[:8], x[:16:2])
    stride_kernel[(1,)](x, out, 8, 1, BLOCK=8)
    assert torch.equal(out[:8], x[:8])
    stride_kernel[(1,)](x, out, 5, 3, BLOCK=8)  # 3 specialises like 2: no compile
    assert torch.equal(out[:5], x[:15:3])
    assert compile_log.count == 2
    stride_types = [c["signature"]["stride"] for c in compile_log.compiles]
    assert stride_types == ["constexpr", "i32"]  # 1 is baked in, as Triton's JIT does on GPUs


def test_divisibility_by_16_is_its_own_specialisation(compile_log):
    x = torch.arange(64, dtype=torch.float32)
    out = torch.zeros(64)
    stride_kernel[(1,)](x, out, 4, 3, BLOCK=4)
    stride_kernel[(1,)](x, out, 4, 16, BLOCK=4)
    assert torch.equal(out[:4], x[:64:16])
    assert compile_log.count == 2


def test_do_not_specialize_keeps_one_variant(compile_log):
    x = torch.arange(16, dtype=torch.float32)
    out = torch.zeros(16)
    stride_kernel_unspecialised[(1,)](x, out, 8, 1, BLOCK=8)
    assert torch.equal(out[:8], x[:8])
    stride_kernel_unspecialised[(1,)](x, out, 8, 2, BLOCK=8)
    assert torch.equal(out[:8], x[:16:2])
    assert compile_log.count == 1


# ---- autotuning and benchmarking -------------------------------------------------------------------------


def _autotuned_add(key: list[str], cache_results: bool = False):
    configs = [triton.Config({"BLOCK": 4}, num_threads=1), triton.Config({"BLOCK": 16}, num_threads=2)]

    @triton.autotune(configs=configs, key=key, cache_results=cache_results)
    @triton.jit
    def tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    return tuned_add, configs


def test_autotune_picks_a_config_and_reuses_it(compile_log):
    tuned, configs = _autotuned_add(key=["n"])
    n = 30
    x, y, out = torch.randn(n), torch.randn(n), torch.zeros(n)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    tuned[grid](x, y, out, n)
    torch.testing.assert_close(out, x + y)
    assert tuned.best_config in configs
    assert compile_log.count == 2  # each config compiled once, to be benchmarked
    assert sorted(c["constants"][(4,)] for c in compile_log.compiles) == [4, 16]

    compile_log.reset()
    out.zero_()
    tuned[grid](x, y, out, n)  # same key: the cached choice, no benchmark, no compile
    torch.testing.assert_close(out, x + y)
    assert compile_log.count == 0 and compile_log.binaries_built == 0

    n2 = 7  # a new tuning key re-benchmarks, on kernels already compiled for this specialisation
    x2, y2, out2 = torch.randn(n2), torch.randn(n2), torch.zeros(n2)
    tuned[lambda meta: (triton.cdiv(n2, meta["BLOCK"]),)](x2, y2, out2, n2)
    torch.testing.assert_close(out2, x2 + y2)
    assert len(tuned.cache) == 2
    assert compile_log.count == 0


def test_autotune_config_num_threads_reaches_the_kernel(compile_log):
    tuned, _ = _autotuned_add(key=[])
    x, y, out = torch.randn(20), torch.randn(20), torch.zeros(20)
    kernel = tuned[lambda meta: (triton.cdiv(20, meta["BLOCK"]),)](x, y, out, 20)
    torch.testing.assert_close(out, x + y)
    assert kernel.metadata.num_threads == tuned.best_config.num_threads
    assert sorted(c["constants"][(4,)] for c in compile_log.compiles) == [4, 16]


def test_autotune_results_cached_on_disk_keep_num_threads(compile_log):
    # Triton rebuilds the chosen config from its disk cache with Config(**saved): num_threads must survive.
    x, y, out = torch.randn(24), torch.randn(24), torch.zeros(24)
    first, _ = _autotuned_add(key=["n"], cache_results=True)
    first[lambda meta: (triton.cdiv(24, meta["BLOCK"]),)](x, y, out, 24)
    second, _ = _autotuned_add(key=["n"], cache_results=True)
    out.zero_()
    kernel = second[lambda meta: (triton.cdiv(24, meta["BLOCK"]),)](x, y, out, 24)
    torch.testing.assert_close(out, x + y)
    assert second.best_config == first.best_config
    assert kernel.metadata.num_threads == first.best_config.num_threads
    assert compile_log.count == 3  # two configs benchmarked by the first; the second only runs its pick


def test_do_bench_returns_positive_milliseconds():
    x, y, out, _ = launch_add()
    ms = triton.testing.do_bench(lambda: add_kernel[(3,)](x, y, out, 37, BLOCK=16), warmup=1, rep=3)
    assert isinstance(ms, float) and ms > 0
    q = triton.testing.do_bench(lambda: add_kernel[(3,)](x, y, out, 37, BLOCK=16), warmup=1, rep=3,
                                quantiles=[0.2, 0.5, 0.8])
    assert len(q) == 3 and 0 < q[0] <= q[1] <= q[2]
    assert driver.active.get_benchmarker() is triton.testing.do_bench


def test_triton_rvv_style_benchmark_script_runs_unchanged():
    import rvv_style_matmul

    M, N, K = 20, 12, 10
    a, b = torch.randn(M, K), torch.randn(K, N)
    c, tuned = rvv_style_matmul.benchmark_triton((M, N, K), a, b)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    assert tuned.best_config.num_threads == 1
    assert len(tuned.configs_timings) == 4 and all(t[0] > 0 for t in tuned.configs_timings.values())


# ---- errors ----------------------------------------------------------------------------------------------


def test_unsupported_op_names_kernel_op_and_line():
    with pytest.raises(UnsupportedOpError) as err:
        inline_asm_kernel[(1,)](torch.zeros(8, dtype=torch.int32), BLOCK=8)
    message = str(err.value)
    assert "tt.elementwise_inline_asm" in message and "kernel inline_asm_kernel" in message
    assert f"{__file__}:{line_of(inline_asm_kernel, 'tl.inline_asm_elementwise')}" in message


def test_tensor_on_another_device_is_refused_by_name():
    x = torch.empty(8, device="meta")
    with pytest.raises(LaunchError, match=r"kernel copy_kernel: argument 'x_ptr' is on device meta"):
        copy_kernel[(1,)](x, torch.zeros(8), BLOCK=8)


def test_reinterpreted_unsigned_tensors():
    # triton.reinterpret wraps a tensor to give it a type torch lacks (Triton's own tests pass uint32 so).
    x = triton.reinterpret(torch.tensor([2**31 + 5, 7, 3, 1], dtype=torch.int64).to(torch.int32), tl.uint32)
    out = triton.reinterpret(torch.zeros(4, dtype=torch.int32), tl.uint32)
    add_kernel[(1,)](x, x, out, 4, BLOCK=4)
    assert out.base.tolist() == (x.base * 2).tolist()


def test_negative_num_threads_refused_by_name():
    with pytest.raises(LaunchError, match=r"kernel copy_kernel: num_threads=-2 is negative"):
        copy_kernel[(1,)](torch.zeros(8), torch.zeros(8), BLOCK=8, num_threads=-2)


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_tensor_descriptor_parameters(padding):
    # TensorDescriptor arguments reach the kernel as Triton's launchers decompose them: base, shape, strides,
    # padding (here a view whose rows are 16 apart, 13 columns wide), so bounds and padding hold.
    x, out, corner = run_descriptor_scale(padding)
    assert torch.equal(out, x * 2)
    assert (out._base[:, 13:] == -1).all()  # stores past the descriptor's shape were dropped
    fill = torch.full((4, 8), float("nan") if padding == "nan" else 0.0)
    fill[:2, :5] = x[8:, 8:]
    torch.testing.assert_close(corner, fill, equal_nan=True, rtol=0, atol=0)
