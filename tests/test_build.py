"""build_item: real Triton frontend + our lowering + clang-19 + the harness, run under QEMU (and natively).

Every build goes to a cache private to this module, so the first build of an item really compiles and the
second one must be a cache hit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvtune import build
from pytest_rvtune.spec import KernelSpec, load_kernel_module
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, qemu_command

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout these tests belong to

RUN_OPTS = ["--warmup", "0", "--runs", "2"]


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RVTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("rvtune_cache")))
        yield


@pytest.fixture(scope="module")
def matmul() -> KernelSpec:
    return load_kernel_module(REPO_ROOT / "kernels" / "matmul.py")


@pytest.fixture(scope="module")
def fused_moe() -> KernelSpec:
    return load_kernel_module(REPO_ROOT / "kernels" / "fused_moe.py")


MATMUL_CONFIG = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 8}


def run_elf(art: build.BuildArtifact, isa: str, *extra: str, argv: list | None = None) -> subprocess.CompletedProcess:
    prefix = qemu_command() if isa == RISCV_ISA else []
    args = [*prefix, str(art.elf), *RUN_OPTS, *extra, *map(str, art.argv if argv is None else argv)]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def checks(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith("RVTUNE check ")]


@pytest.fixture(scope="module")
def matmul_rv(matmul: KernelSpec) -> build.BuildArtifact:
    return build.build_item(matmul, "small", MATMUL_CONFIG, RISCV_ISA)


def test_generic_harness_matmul_small_under_qemu(matmul_rv: build.BuildArtifact):
    art = matmul_rv
    assert art.harness_kind == "generic"
    assert not art.cache_hit
    assert art.kernel_symbol == "matmul_kernel"
    assert art.elf.is_file() and len(art.elf_sha256) == 64
    assert "matmul_kernel>:" in art.asm.read_text()  # the kernel's code as linked, for its author
    # grid = cdiv(67, 16) * cdiv(45, 32) = 5 * 2, scalars M N K and the strides on argv
    assert art.argv[:2] == ["--grid", "10,1,1"]
    scalars = [a for a in art.argv if not isinstance(a, Path)][6:]
    assert scalars == ["67", "45", "33", "33", "1", "45", "1", "45", "1"]
    proc = run_elf(art, RISCV_ISA)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len([ln for ln in proc.stdout.splitlines() if ln.startswith("RVTUNE sample ")]) == 2
    assert checks(proc.stdout) and all(" ok " in c for c in checks(proc.stdout))


def test_second_build_is_a_cache_hit(matmul: KernelSpec, matmul_rv: build.BuildArtifact):
    again = build.build_item(matmul, "small", MATMUL_CONFIG, RISCV_ISA)
    assert again.cache_hit
    assert (again.elf, again.elf_sha256, again.argv) == (matmul_rv.elf, matmul_rv.elf_sha256, matmul_rv.argv)


def test_generic_harness_matmul_small_on_host(matmul: KernelSpec):
    art = build.build_item(matmul, "small", MATMUL_CONFIG, HOST_ISA)
    proc = run_elf(art, HOST_ISA, "--threads", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert checks(proc.stdout) and all(" ok " in c for c in checks(proc.stdout))


def test_corrupted_golden_file_fails_the_run_naming_the_file(matmul_rv: build.BuildArtifact, tmp_path: Path):
    argv = list(matmul_rv.argv)
    i = next(k for k, a in enumerate(argv) if isinstance(a, Path))  # the first input file: a
    bad = tmp_path / argv[i].name
    shutil.copyfile(argv[i], bad)
    lines = bad.read_text().splitlines()
    lines[3] = lines[3].replace(" ", " 0.1x ", 1)  # one malformed value on line 4
    bad.write_text("\n".join(lines) + "\n")
    argv[i] = bad
    proc = run_elf(matmul_rv, RISCV_ISA, argv=argv)
    assert proc.returncode == 2
    assert f"RVTUNE error {bad}:4: malformed number '0.1x'" in proc.stdout
    assert checks(proc.stdout) == []


def test_wrong_expected_output_fails_the_check(matmul_rv: build.BuildArtifact, tmp_path: Path):
    argv = list(matmul_rv.argv)
    i = max(k for k, a in enumerate(argv) if isinstance(a, Path))  # the last file: expected c
    lines = Path(argv[i]).read_text().splitlines()
    row = lines[2].split()
    row[5] = str(float(row[5]) + 1.0)  # element (1, 5)
    lines[2] = " ".join(row)
    bad = tmp_path / "expected_c.txt"
    bad.write_text("\n".join(lines) + "\n")
    argv[i] = bad
    proc = run_elf(matmul_rv, RISCV_ISA, argv=argv)
    assert proc.returncode == 1
    (check,) = checks(proc.stdout)
    assert " bad " in check and "first_bad=50 " in check and check.endswith("count=1")  # 1 * N(45) + 5


@pytest.mark.parametrize("bm", [4, 8, 16, 32, 64])
def test_fused_moe_main_cpp_every_block_size_m(fused_moe: KernelSpec, bm: int):
    config = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    art = build.build_item(fused_moe, "small", config, RISCV_ISA)
    assert art.harness_kind == "main_cpp"
    files = [a for a in art.argv if isinstance(a, Path)]
    assert len(files) == 7  # a b topk_weights sorted_token_ids expert_ids num_tokens_post_padded | c
    proc = run_elf(art, RISCV_ISA)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (check,) = checks(proc.stdout)
    assert check.startswith("RVTUNE check c ok ")


def test_build_error_names_kernel_and_config_and_carries_clang_message(tmp_path: Path):
    # a project of its own: kernels/matmul.py with a (broken) main_cpp/matmul.cpp beside it, which the build
    # must pick up (and the repository's harness-less matmul must not)
    (tmp_path / "kernels").mkdir()
    shutil.copy(REPO_ROOT / "kernels" / "matmul.py", tmp_path / "kernels" / "matmul.py")
    (tmp_path / "main_cpp").mkdir()
    (tmp_path / "main_cpp" / "matmul.cpp").write_text("int main() { return undeclared_thing; }\n")
    project_matmul = load_kernel_module(tmp_path / "kernels" / "matmul.py")
    assert build.main_cpp_path(project_matmul) == tmp_path / "main_cpp" / "matmul.cpp"
    with pytest.raises(build.BuildError) as err:
        build.build_item(project_matmul, "small", MATMUL_CONFIG, RISCV_ISA)
    msg = str(err.value)
    assert "kernel matmul" in msg and "BLOCK_SIZE_M=16-BLOCK_SIZE_N=32-BLOCK_SIZE_K=16-GROUP_SIZE_M=8" in msg
    assert "use of undeclared identifier 'undeclared_thing'" in msg


BUILD_ONE = """
import json, sys
from pytest_rvtune import build
from pytest_rvtune.spec import load_kernel_module
art = build.build_item(load_kernel_module(sys.argv[1]), "small", json.loads(sys.argv[2]), "rv64gcv_zvl256b")
print(json.dumps({"elf": str(art.elf), "sha": art.elf_sha256, "hit": art.cache_hit}))
"""


def test_concurrent_builds_of_one_item_share_one_elf(tmp_path: Path):
    # two processes (as two xdist workers) build the same item into one fresh cache at the same time
    env = {**os.environ, "RVTUNE_CACHE_DIR": str(tmp_path / "cache")}
    config = {"BLOCK_SIZE_M": 8, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    cmd = [sys.executable, "-c", BUILD_ONE, str(REPO_ROOT / "kernels" / "matmul.py"), json.dumps(config)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert results[0]["elf"] == results[1]["elf"] and results[0]["sha"] == results[1]["sha"]
    assert not all(r["hit"] for r in results)  # a fresh cache: somebody built (the work may be split)
    # every step was built exactly once: one entry per kind, and no half-built entry left behind
    cache = tmp_path / "cache"
    for kind in ("compile/kernel", "compile/launcher", "harness", "elf"):
        entries = list((cache / kind).glob("*/*"))
        assert len(entries) == 1 and not entries[0].name.startswith("."), (kind, entries)


def test_roles_from_golden_files_and_aliases():
    from pytest_rvtune.spec import KernelArg, Launch

    def launch(*args: KernelArg) -> Launch:
        return Launch("k_kernel", args, {}, {}, (1, 1, 1), {})

    files = {"a": Path("a.txt"), "c": Path("c.txt")}
    roles = build.harness_args_of(launch(KernelArg("a_ptr", "*fp32", tensor="a"), KernelArg("n", "i32", value=3),
                                         KernelArg("c_ptr", "*fp32", tensor="c")),
                                  {"a": files["a"]}, {"c": files["c"]})
    assert [(r.name, r.role, r.shown) for r in roles] == [("a_ptr", "in", "a"), ("n", "scalar", "n"),
                                                          ("c_ptr", "out", "c")]
    # a tensor passed twice: the second parameter is an alias of the first's buffer (one buffer, one file pair)
    roles = build.harness_args_of(launch(KernelArg("x_ptr", "*fp32", tensor="a"),
                                         KernelArg("y_ptr", "*fp32", tensor="a")), {"a": files["a"]}, {"a": files["a"]})
    assert [(r.name, r.role, r.shown) for r in roles] == [("x_ptr", "inout", "a"), ("y_ptr", "alias", "a")]
    with pytest.raises(build.generic.HarnessError, match="'a' is passed to x_ptr as \\*fp32 and to y_ptr as \\*i32"):
        build.harness_args_of(launch(KernelArg("x_ptr", "*fp32", tensor="a"), KernelArg("y_ptr", "*i32", tensor="a")),
                              {"a": files["a"]}, {"a": files["a"]})
    with pytest.raises(build.generic.HarnessError, match=r"'b' .* has no golden file"):
        build.harness_args_of(launch(KernelArg("b_ptr", "*fp32", tensor="b")), {}, {})


# A kernel module in the triton-cpu habit: an undecorated function, jitted under another name, and a pointer
# argument launch() passes as None (vLLM's unused bias): Triton makes it a constexpr None.
ALIASED_MODULE = '''
import torch
import triton
import triton.language as tl


def scale_kernel(x_ptr, y_ptr, bias_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x * 2.0, mask=offs < n)


rvv_scale_kernel = triton.jit(scale_kernel)


def get_rvv_scale_kernel_autotune_config():
    return [triton.Config({"BLOCK": 16}, num_threads=1)]


CASES = {"small": dict(n=37)}


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.rand(case["n"], generator=g), "y": torch.empty(case["n"])}


def reference(inputs, case):
    return {"y": inputs["x"] * 2.0}


def launch(kernel, inputs, case):
    kernel[lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)](inputs["x"], inputs["y"], None, case["n"])
'''


def test_jitted_alias_with_a_none_argument_builds_and_runs(tmp_path: Path):
    """rvv_scale.py holds `rvv_scale_kernel = triton.jit(scale_kernel)`: the launcher is named after
    scale_kernel, and the harness must include that one (it once looked for rvv_scale_kernel_launcher.h)."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "rvv_scale.py").write_text(ALIASED_MODULE)
    spec = load_kernel_module(tmp_path / "kernels" / "rvv_scale.py")
    art = build.build_item(spec, "small", spec.configs[0], RISCV_ISA)
    assert art.kernel_symbol == "scale_kernel"
    proc = run_elf(art, RISCV_ISA)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (check,) = checks(proc.stdout)
    assert check.startswith("RVTUNE check y ok ")


@pytest.mark.parametrize("isa", [RISCV_ISA, HOST_ISA])
def test_code_symbols_lists_the_functions_an_object_defines(isa: str, tmp_path: Path) -> None:
    """What the .s disassembles: global and static functions, no data, no undefined or local labels."""
    from pytest_rvtune.toolchain import Toolchain, ToolchainError

    src = tmp_path / "k.c"
    src.write_text("extern int used(int);\nint table[4];\n"
                   "static __attribute__((noinline)) int helper(int x) { return used(x) * 3 + table[x & 3]; }\n"
                   "int kernel(int x) { return helper(x) + helper(x + 1); }\n")
    Toolchain.for_isa(isa).compile(src, tmp_path / "k.o")
    assert sorted(build.code_symbols(tmp_path / "k.o")) == ["helper", "kernel"]
    (tmp_path / "bad.o").write_text("not an object")
    with pytest.raises(ToolchainError, match=r"bad\.o"):
        build.code_symbols(tmp_path / "bad.o")


def test_the_disassembly_is_made_only_when_read(matmul: KernelSpec):
    """A session never reads the .s, so building does not run llvm-objdump; reading ``asm`` makes it once."""
    config = {**MATMUL_CONFIG, "BLOCK_SIZE_K": 32}
    art = build.build_item(matmul, "small", config, RISCV_ISA)
    cache = Path(os.environ["RVTUNE_CACHE_DIR"])
    before = set(cache.glob("asm/*/*/*.s"))  # the build made none of its own
    text = art.asm.read_text()
    assert "matmul_kernel>:" in text and "matmul_kernel_wrap>:" in text
    assert set(cache.glob("asm/*/*/*.s")) - before == {art.asm}  # made now, in its own cache entry
    assert art.asm == art.asm and art.asm.read_text() == text  # once


def test_the_gemm_panels_are_compiled_once_and_counted_as_the_kernels_own(matmul: KernelSpec,
                                                                          matmul_rv: build.BuildArtifact,
                                                                          tmp_path: Path) -> None:
    """The RVV GEMM panels come from the runtime object (compiled once per toolchain), not from each kernel's
    object; under QEMU their instructions are the kernel's (kernel_insns), as when they were inlined."""
    from pytest_rvtune import paths
    from pytest_rvtune.compiler.api import compile_kernel
    from pytest_rvtune.compiler.runtime_object import KERNEL_HELPER_PREFIX
    from pytest_rvtune.counters import parse_icount
    from pytest_rvtune.targets.local import QemuTarget

    launch = matmul.capture_launch("small", MATMUL_CONFIG)
    ck = compile_kernel(matmul.kernel, launch.signature, launch.constexprs, RISCV_ISA)
    other = compile_kernel(matmul.kernel, launch.signature,
                           {**launch.constexprs, "BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64}, RISCV_ISA)
    assert ck.runtime_obj is not None and ck.runtime_obj in ck.objects and other.runtime_obj == ck.runtime_obj
    assert any(s.startswith(KERNEL_HELPER_PREFIX) for s in build.code_symbols(ck.runtime_obj))
    assert not any(s.startswith(KERNEL_HELPER_PREFIX) for s in build.code_symbols(ck.kernel_obj))
    assert compile_kernel(matmul.kernel, launch.signature, launch.constexprs, HOST_ISA).runtime_obj is None
    # the item's .s shows the panels' code with the kernel's: the loops a kernel author wants to read
    asm = matmul_rv.asm.read_text()
    assert "<matmul_kernel>:" in asm and "<rv_dot_panel_m4>:" in asm and "vfmacc.vf" in asm

    result = QemuTarget().run(matmul_rv.elf, [*RUN_OPTS, *map(str, matmul_rv.argv)], timeout=120,
                              kernel_symbol=matmul_rv.kernel_symbol)
    assert result.returncode == 0 and result.all_checks_ok
    # the kernel symbol alone, as the plugin counts without helpers=: the panels' work is missing from it
    out = tmp_path / "alone.txt"
    proc = subprocess.run([*qemu_command(), "-plugin", f"{paths.icount_plugin()},out={out},symbol=matmul_kernel",
                           str(matmul_rv.elf), *RUN_OPTS, *map(str, matmul_rv.argv)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    alone = parse_icount(out.read_text(), source=str(out))["kernel_insns"]
    counted = result.counters["kernel_insns"] * result.counters["launches"]  # per launch -> the whole run
    assert counted > 1.5 * alone  # the multiply-adds are in the panels
    assert result.counters["kernel_insns"] <= result.counters["launch_insns"]
