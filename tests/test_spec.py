"""Kernel-module contract: loading, validation errors, config ids and filters, launch capture."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import triton

from pytest_rvtune.spec import (
    KernelModuleError,
    LaunchError,
    config_id,
    discover,
    filter_configs,
    load_kernel_module,
)

KERNELS = Path(__file__).resolve().parent.parent / "kernels"

# A minimal valid module; tests replace pieces of it to make it invalid in one way at a time.
GOOD = """
import torch
import triton
import triton.language as tl


@triton.jit
def {name}_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, FLAG: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x * scale, mask=offs < n)


def get_{name}_kernel_autotune_config():
    return {configs}


CASES = {{"small": dict(n=10)}}
TOLERANCE = dict(atol=1e-6, rtol=1e-6)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    return {{"x": torch.rand(case["n"], generator=g), "y": torch.empty(case["n"])}}


def reference(inputs, case):
    return {{"y": inputs["x"] * 2}}


def launch(kernel, inputs, case):
    {launch}
"""
GOOD_CONFIGS = '[triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 8, "FLAG": True})]'
GOOD_LAUNCH = 'kernel[lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)](inputs["x"], inputs["y"], case["n"], 2.0)'


def write_module(tmp_path: Path, name: str = "scale", body: str | None = None, **parts: str) -> Path:
    text = body or GOOD.format(
        name=name, configs=parts.get("configs", GOOD_CONFIGS), launch=parts.get("launch", GOOD_LAUNCH)
    )
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(KernelModuleError) as info:
        load_kernel_module(path)
    message = str(info.value)
    assert str(path) in message  # every error names the module
    return message


# ---- loading -------------------------------------------------------------------------------------
def test_every_kernel_of_the_suite_loads_with_its_cases():
    paths = discover(KERNELS)
    names = {p.stem for p in paths}
    assert {"matmul", "fused_moe", "flash_attention_fwd", "softmax", "layer_norm", "jacobi"} <= names
    for path in paths:
        spec = load_kernel_module(path)
        assert {"small", "emu", "bench"} <= set(spec.cases), path
        assert spec.configs and spec.kernel_name == f"{path.stem}_kernel"
        for config in spec.configs:
            assert set(config) <= set(spec.constexpr_names)


def test_config_spaces_are_the_seeds():
    matmul = load_kernel_module(KERNELS / "matmul.py")
    assert len(matmul.configs) == 150
    assert {c["BLOCK_SIZE_M"] for c in matmul.configs} == {4, 8, 16, 32, 64, 128}
    assert {c["BLOCK_SIZE_K"] for c in matmul.configs} == {8, 16, 32, 64, 128}
    moe = load_kernel_module(KERNELS / "fused_moe.py")
    assert {c["BLOCK_SIZE_M"] for c in moe.configs} == {4, 8, 16, 32, 64}
    assert moe.variant_keys == ("BLOCK_SIZE_M",)
    flash = load_kernel_module(KERNELS / "flash_attention_fwd.py")
    assert {(c["BLOCK_SIZE_M"], c["IS_CAUSAL"]) for c in flash.configs} >= {(4, False), (64, True)}


def test_a_good_module_loads(tmp_path):
    spec = load_kernel_module(write_module(tmp_path))
    assert spec.name == "scale" and spec.constexpr_names == ["BLOCK", "FLAG"]
    assert spec.configs == [{"BLOCK": 4}, {"BLOCK": 8, "FLAG": True}]
    assert spec.tolerance == {"atol": 1e-6, "rtol": 1e-6} and spec.variant_keys == ()


def test_default_config_and_the_work_of_a_launch(tmp_path):
    """DEFAULT_CONFIG names the untuned config (else the first config is); FLOPS(case) / BYTES(case) give one
    launch's work for the report's FLOP/cycle, bytes/cycle and roofline."""
    plain = load_kernel_module(write_module(tmp_path))
    assert plain.default_config_id({}) == "BLOCK=4" and plain.work_of("small") == {}
    extra = textwrap.dedent("""
        DEFAULT_CONFIG = triton.Config({"BLOCK": 8, "FLAG": True})
        def FLOPS(case):
            return case["n"]
        def BYTES(case):
            return 8 * case["n"]
        """)
    path = write_module(tmp_path)
    path.write_text(path.read_text() + extra)
    spec = load_kernel_module(path)
    assert spec.default_config_id({}) == "BLOCK=8-FLAG=True"
    assert spec.work_of("small") == {"flops": 10.0, "bytes": 80.0}
    path.write_text(path.read_text().replace('DEFAULT_CONFIG = triton.Config({"BLOCK": 8, "FLAG": True})',
                                             'DEFAULT_CONFIG = {"BLOCK": 16}'))
    assert "DEFAULT_CONFIG BLOCK=16 is none of the kernel's configs" in load_error(path)
    path.write_text(path.read_text().replace('{"BLOCK": 16}', '{"BLOCK": 4}').replace('return case["n"]\n',
                                                                                      'return -1\n'))
    with pytest.raises(KernelModuleError, match=r"FLOPS\(case\) must return a positive number .* got -1"):
        load_kernel_module(path).work_of("small")
    path.write_text(path.read_text() + "\nBYTES = 12\n")
    assert "BYTES must be a function of the case dict" in load_error(path)


def test_import_failure_is_named(tmp_path):
    path = write_module(tmp_path, body="import torch\nraise RuntimeError('boom in module')\n")
    assert "import failed" in load_error(path) and "boom in module" in load_error(path)


def test_missing_kernel_function(tmp_path):
    path = write_module(tmp_path, name="other")
    renamed = tmp_path / "scale.py"
    path.rename(renamed)  # the functions say other_kernel, the file says scale
    assert "no kernel function scale_kernel" in load_error(renamed)


@pytest.mark.parametrize(
    ("configs", "cause"),
    [
        ("[]", "returned no configs"),
        ('[triton.Config({"BLOCK": 4.0})]', "BLOCK=4.0 must be an int or a bool"),
        ('[triton.Config({"BLOCK": 4, "WARP": 2})]', "WARP is not a tl.constexpr parameter"),
        ('[triton.Config({"BLOCK": 4, "n": 2})]', "n is not a tl.constexpr parameter"),
        ('[triton.Config({"BLOCK": 12})]', "BLOCK=12 is used as a tl.arange length: it must be a power of two"),
        ('[triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 4})]', "listed twice"),
        ('[{"BLOCK": 4}]', "is not a triton.Config"),
    ],
)
def test_invalid_configs(tmp_path, configs, cause):
    assert cause in load_error(write_module(tmp_path, configs=configs))


def test_missing_contract_pieces(tmp_path):
    base = GOOD.format(name="scale", configs=GOOD_CONFIGS, launch=GOOD_LAUNCH)
    cases = [
        (base.replace("def make_inputs(", "def make_inputs_renamed("), "no function make_inputs()"),
        (base.replace("def reference(inputs, case)", "def reference(inputs)"), "reference() must take 2"),
        (base.replace('CASES = {"small": dict(n=10)}', "CASES = {}"), "CASES must be a non-empty dict"),
        (base.replace("TOLERANCE = dict(atol=1e-6, rtol=1e-6)", "TOLERANCE = dict(atol=-1)"), "TOLERANCE must"),
        (base + '\nVARIANT_KEYS = ("FLAG",)\n', "VARIANT_KEYS names FLAG, which not every config sets"),
        (base.replace("def get_scale_kernel_autotune_config", "def configs"), "no get_scale_kernel_autotune_config"),
    ]
    for body, cause in cases:
        assert cause in load_error(write_module(tmp_path, body=body)), cause


# ---- config ids and filters ----------------------------------------------------------------------
def test_config_id_keeps_the_written_key_order():
    assert config_id({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32}) == (
        "BLOCK_SIZE_M=16-BLOCK_SIZE_N=64-BLOCK_SIZE_K=32"
    )
    assert config_id({"BLOCK_SIZE_N": 8, "IS_CAUSAL": True}) == "BLOCK_SIZE_N=8-IS_CAUSAL=True"
    matmul = load_kernel_module(KERNELS / "matmul.py")
    ids = [matmul.config_id(c) for c in matmul.configs]
    assert len(set(ids)) == len(ids)
    assert ids[0] == "BLOCK_SIZE_M=4-BLOCK_SIZE_N=8-BLOCK_SIZE_K=8-GROUP_SIZE_M=8"


def test_filter_configs():
    configs = [{"M": m, "N": n, "C": c} for m in (16, 32, 64) for n in (8, 64) for c in (False, True)]
    got = filter_configs(configs, "M=16,32;N=64")
    assert got == [c for c in configs if c["M"] in (16, 32) and c["N"] == 64] and len(got) == 4
    assert filter_configs(configs, " C=True ") == [c for c in configs if c["C"] is True]
    assert filter_configs(configs, "C=1") == []  # a bool key is matched by True/False, not by 1
    assert filter_configs(configs, "") == configs
    with pytest.raises(ValueError, match="no config has key X"):
        filter_configs(configs, "X=1")
    with pytest.raises(ValueError, match="is not KEY=V1,V2"):
        filter_configs(configs, "M16")
    with pytest.raises(ValueError, match="values of M must be integers"):
        filter_configs(configs, "M=big")


# ---- launch capture ------------------------------------------------------------------------------
def test_capture_launch_matmul():
    spec = load_kernel_module(KERNELS / "matmul.py")
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    launch = spec.capture_launch("small", config)
    case = spec.cases["small"]
    assert launch.kernel == "matmul_kernel"
    assert [(a.name, a.tensor, a.type) for a in launch.tensor_args] == [
        ("a_ptr", "a", "*fp32"), ("b_ptr", "b", "*fp32"), ("c_ptr", "c", "*fp32"),
    ]  # fmt: skip
    scalars = {a.name: (a.value, a.type) for a in launch.scalar_args}
    assert scalars["M"] == (case["M"], "i32") and scalars["stride_am"] == (case["K"], "i32")
    assert scalars["stride_ak"] == (1, "i32")  # no specialisation of 1s: our ABI keeps every argument
    assert launch.constexprs == config and launch.kwargs_constexprs == {}
    assert launch.grid == (triton.cdiv(case["M"], 16) * triton.cdiv(case["N"], 32), 1, 1)
    assert list(launch.signature) == spec.param_names
    assert launch.signature["BLOCK_SIZE_M"] == "constexpr" and launch.signature["K"] == "i32"
    assert spec.signature("small", config) == launch.signature


def test_capture_launch_variant_inputs_follow_the_config():
    spec = load_kernel_module(KERNELS / "fused_moe.py")
    small = spec.cases["small"]
    grids, ems = {}, {}
    for bm in (4, 64):
        config = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
        launch = spec.capture_launch("small", config)
        ems[bm] = next(a.value for a in launch.args if a.name == "EM")
        grids[bm] = launch.grid
        assert ems[bm] % bm == 0 and grids[bm] == (ems[bm] // bm * triton.cdiv(small["N"], 16), 1, 1)
        assert launch.kwargs_constexprs == {"MUL_ROUTED_WEIGHT": True, "top_k": small["top_k"]}
        assert list(launch.constexprs) == ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                                           "MUL_ROUTED_WEIGHT", "top_k"]  # fmt: skip
        assert launch.signature["sorted_token_ids_ptr"] == "*i32"
    assert ems[64] > ems[4]  # more padding with bigger blocks


def test_capture_launch_grid_tuple_and_kwargs(tmp_path):
    spec = load_kernel_module(KERNELS / "flash_attention_fwd.py")
    launch = spec.capture_launch("small", {"BLOCK_SIZE_M": 8, "BLOCK_SIZE_N": 16, "IS_CAUSAL": True})
    case = spec.cases["small"]
    assert launch.grid == (triton.cdiv(case["N_CTX"], 8), case["Z"] * case["H"], 1)
    assert launch.constexprs["IS_CAUSAL"] is True
    assert launch.kwargs_constexprs == {"BLOCK_SIZE_DMODEL": 16}
    assert {a.name: a.type for a in launch.scalar_args}["sm_scale"] == "fp32"

    # A plain tuple grid and a defaulted constexpr.
    path = write_module(tmp_path, launch='kernel[(3,)](inputs["x"], inputs["y"], case["n"], 2.0)')
    launch = load_kernel_module(path).capture_launch("small", {"BLOCK": 4})
    assert launch.grid == (3, 1, 1) and launch.constexprs == {"BLOCK": 4, "FLAG": False}


@pytest.mark.parametrize(
    ("launch_src", "cause"),
    [
        ('kernel[(1,)](inputs["x"], inputs["y"], case["n"], 2.0, BLOCK=4)', "which the config also sets"),
        ('kernel[(1,)](inputs["x"][1:], inputs["y"], case["n"], 2.0)', "not one of make_inputs' tensors"),
        ('kernel[(1,)](inputs["x"], inputs["y"], case["n"])', "do not match scale_kernel's parameters"),
        ("pass", "exactly once, it did 0"),
        ('kernel(inputs["x"])', "write kernel[grid](...)"),
        ('kernel[lambda META: (META["NOPE"],)](inputs["x"], inputs["y"], case["n"], 2.0)', "evaluating the grid"),
        ('kernel[(1,)](inputs["x"], inputs["y"], case["n"], "two")', "unsupported argument type str"),
    ],
)
def test_capture_launch_errors(tmp_path, launch_src, cause):
    spec = load_kernel_module(write_module(tmp_path, launch=launch_src))
    with pytest.raises(LaunchError) as info:
        spec.capture_launch("small", {"BLOCK": 4})
    assert cause in str(info.value) and "config BLOCK=4" in str(info.value)


def test_unknown_case_is_named(tmp_path):
    spec = load_kernel_module(write_module(tmp_path))
    with pytest.raises(KernelModuleError, match="no case 'huge'; cases are"):
        spec.capture_launch("huge", {"BLOCK": 4})


def test_configs_work_as_dicts_and_as_triton_configs():
    spec = load_kernel_module(KERNELS / "matmul.py")
    config = spec.configs[7]
    assert config.kwargs == dict(config)  # what code written against triton.Config reads
    upstream = triton.Config(dict(config))
    assert spec.config_id(upstream) == spec.config_id(config)
    assert spec.capture_launch("small", upstream) == spec.capture_launch("small", config)
    assert filter_configs([upstream], f"BLOCK_SIZE_M={config['BLOCK_SIZE_M']}") == [upstream]


# ---- the triton-cpu habits our format accepts --------------------------------------------------
def test_undecorated_kernel_is_jitted(tmp_path):
    body = GOOD.format(name="scale", configs=GOOD_CONFIGS, launch=GOOD_LAUNCH).replace("@triton.jit\n", "")
    spec = load_kernel_module(write_module(tmp_path, body=body))
    assert isinstance(spec.kernel, triton.runtime.JITFunction) and spec.kernel.__name__ == "scale_kernel"
    assert spec.constexpr_names == ["BLOCK", "FLAG"]
    assert spec.capture_launch("small", {"BLOCK": 4}).kernel == "scale_kernel"


def test_jitted_alias_builds_under_the_function_name(tmp_path):
    # `rvv_scale_kernel = triton.jit(scale_kernel)` in rvv_scale.py: the compiler names the launcher and the
    # constants after the function, so the launch (and with it the harness) must say scale_kernel too
    body = (GOOD.format(name="scale", configs=GOOD_CONFIGS, launch=GOOD_LAUNCH).replace("@triton.jit\n", "")
            .replace("def get_scale_kernel",
                     "rvv_scale_kernel = triton.jit(scale_kernel)\n\n\ndef get_rvv_scale_kernel"))
    spec = load_kernel_module(write_module(tmp_path, name="rvv_scale", body=body))
    assert spec.name == "rvv_scale" and spec.kernel_name == "scale_kernel"
    assert spec.capture_launch("small", {"BLOCK": 4}).kernel == "scale_kernel"


def test_num_threads_is_kept_out_of_the_values_and_named_in_the_id(tmp_path):
    configs = ('[triton.Config({"BLOCK": 4}, num_threads=1), triton.Config({"BLOCK": 4}, num_threads=0), '
               'triton.Config({"BLOCK": 8})]')
    spec = load_kernel_module(write_module(tmp_path, configs=configs))
    assert spec.configs == [{"BLOCK": 4}, {"BLOCK": 4}, {"BLOCK": 8}]  # the constexprs only
    assert [c.num_threads for c in spec.configs] == [1, 0, None]
    assert [spec.config_id(c) for c in spec.configs] == ["BLOCK=4-num_threads=1", "BLOCK=4-num_threads=0", "BLOCK=8"]
    assert spec.capture_launch("small", spec.configs[0]).constexprs == {"BLOCK": 4, "FLAG": False}
    with pytest.raises(TypeError, match="num_threads"):  # only while the getter ran: triton is left as it was
        triton.Config({"BLOCK": 4}, num_threads=1)
    bad = '[triton.Config({"BLOCK": 4}, num_threads=-1)]'
    assert "config 0 (BLOCK=4): num_threads=-1 must be an int >= 0" in load_error(write_module(tmp_path, configs=bad))
    twice = '[triton.Config({"BLOCK": 4}, num_threads=2), triton.Config({"BLOCK": 4}, num_threads=2)]'
    assert "config BLOCK=4-num_threads=2 is listed twice" in load_error(write_module(tmp_path, configs=twice))


def test_from_triton_import_config_accepts_num_threads_too(tmp_path):
    body = GOOD.format(name="scale", configs='[Config({"BLOCK": 4}, num_threads=2)]', launch=GOOD_LAUNCH)
    spec = load_kernel_module(write_module(tmp_path, body="from triton import Config\n" + body))
    assert spec.config_id(spec.configs[0]) == "BLOCK=4-num_threads=2"
    assert spec.module.Config is triton.Config  # the module's own name is given back


@pytest.mark.parametrize("exit_call", ["sys.exit(3)", "raise SystemExit('bye')"])
def test_sys_exit_at_import_is_the_modules_error(tmp_path, exit_call):
    message = load_error(write_module(tmp_path, body=f"import sys\n{exit_call}\n"))
    assert "import failed: SystemExit:" in message and "called sys.exit()" in message


def test_keyboard_interrupt_at_import_is_not_swallowed(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        load_kernel_module(write_module(tmp_path, body="raise KeyboardInterrupt\n"))


NONE_ARG = GOOD.replace(
    "def {name}_kernel(x_ptr, y_ptr, n, scale,", "def {name}_kernel(x_ptr, y_ptr, bias_ptr, n, scale,"
).replace(
    "    tl.store(y_ptr + offs, x * scale, mask=offs < n)",
    "    if bias_ptr is not None:\n"
    "        x += tl.load(bias_ptr + offs, mask=offs < n, other=0.0)\n"
    "    tl.store(y_ptr + offs, x * scale, mask=offs < n)",
).replace('{{"y": inputs["x"] * 2}}', '{{"y": inputs["x"] * 2.0}}')
NONE_LAUNCH = ('kernel[lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)]'
               '(inputs["x"], inputs["y"], None, case["n"], 2.0)')


def test_none_argument_is_a_constexpr_none(tmp_path):
    """vLLM passes None for an unused pointer; Triton makes it a constexpr None, so do we."""
    path = write_module(tmp_path, body=NONE_ARG.format(name="scale", configs=GOOD_CONFIGS, launch=NONE_LAUNCH))
    launch = load_kernel_module(path).capture_launch("small", {"BLOCK": 4})
    assert [a.name for a in launch.args] == ["x_ptr", "y_ptr", "n", "scale"]  # no run-time bias_ptr
    assert launch.constexprs == {"bias_ptr": None, "BLOCK": 4, "FLAG": False}
    assert launch.kwargs_constexprs == {"bias_ptr": None, "FLAG": False}
    assert launch.signature["bias_ptr"] == "constexpr" and launch.signature["x_ptr"] == "*fp32"
