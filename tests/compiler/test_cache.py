"""The build cache: entries appear atomically, concurrent builders of one key do the work once, and a
rebuild happens exactly when something that changes the output changes (counted, never timed)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pytest_rvtune.compiler.api import CompileError, compile_kernel
from pytest_rvtune.compiler.cache import BuildCache, cache_key
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout these tests belong to


def _build_in_process(root: str, key: str, log: str, queue) -> None:
    def build(tmp: Path) -> None:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.3)  # keep the build open so the other worker arrives while it runs
        (tmp / "out.txt").write_text("built")

    path, hit = BuildCache(Path(root)).get_or_build("obj", key, build)
    queue.put((str(path), hit, (path / "out.txt").read_text()))


def test_concurrent_workers_build_once(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    log = tmp_path / "builds.log"
    key = cache_key(what="x")
    procs = [ctx.Process(target=_build_in_process, args=(str(tmp_path / "c"), key, str(log), queue))
             for _ in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert len(log.read_text().splitlines()) == 1
    assert len({r[0] for r in results}) == 1
    assert sorted(r[1] for r in results) == [False, True, True]
    assert {r[2] for r in results} == {"built"}
    # no temp dirs left behind
    entry = Path(results[0][0])
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]


def test_failed_build_publishes_nothing(tmp_path):
    cache = BuildCache(tmp_path)

    def broken(tmp: Path) -> None:
        (tmp / "half.o").write_text("partial")
        raise RuntimeError("clang failed")

    with pytest.raises(RuntimeError, match="clang failed"):
        cache.get_or_build("obj", "k" * 64, broken)
    assert not cache.entry("obj", "k" * 64).exists()
    assert list(cache.entry("obj", "k" * 64).parent.iterdir()) == []
    path, hit = cache.get_or_build("obj", "k" * 64, lambda tmp: (tmp / "a").write_text("ok"))
    assert not hit and (path / "a").read_text() == "ok"
    assert cache.get_or_build("obj", "k" * 64, lambda tmp: pytest.fail("rebuilt a cached entry")) == (path, True)


def test_cache_key_is_stable_and_sensitive():
    a = cache_key(config={"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32}, lowering="1")
    assert a == cache_key(lowering="1", config={"BLOCK_SIZE_N": 32, "BLOCK_SIZE_M": 16})
    assert a != cache_key(config={"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16}, lowering="1")
    assert a != cache_key(config={"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32}, lowering="2")


# ---- compile_kernel on the real frontend, lowering and clang-19: work counted per stage ------------------
MATMUL = REPO_ROOT / "kernels" / "matmul.py"
SMALL = {"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": 8, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 2}

SCALE_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def helper(x):
    return x * {factor}


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, helper(tl.load(x_ptr + offs, mask=mask)), mask=mask)
'''


@pytest.fixture
def work(monkeypatch):
    """Counts frontend runs, lowerings and clang invocations (by source file name)."""
    from pytest_rvtune.compiler import frontend, lower

    counts: dict[str, list] = {"frontend": [], "lower": [], "clang": []}
    real_front, real_lower, real_compile = frontend.kernel_to_ttir, lower.lower_ttir, Toolchain.compile

    def count_front(fn, *a, **k):
        counts["frontend"].append(fn.__name__)
        return real_front(fn, *a, **k)

    def count_lower(ttir):
        counts["lower"].append(1)
        return real_lower(ttir)

    def count_clang(self, source, output, extra=()):
        counts["clang"].append(Path(source).name)
        return real_compile(self, source, output, extra)

    monkeypatch.setattr(frontend, "kernel_to_ttir", count_front)
    monkeypatch.setattr(lower, "lower_ttir", count_lower)
    monkeypatch.setattr(Toolchain, "compile", count_clang)
    return counts


@pytest.fixture(scope="module")
def matmul():
    from pytest_rvtune.spec import load_kernel_module

    return load_kernel_module(MATMUL)


def _sig(spec):
    return spec.capture_launch("small", {**spec.configs[0], **SMALL}).signature


def test_second_build_does_no_compiler_work(tmp_path, work, matmul):
    first = compile_kernel(matmul.kernel, _sig(matmul), SMALL, RISCV_ISA, cache_root=tmp_path)
    assert not first.cache_hit
    # the runtime's precompiled part (runtime_object.py) too, once: the next config below does not compile it
    assert sorted(work["clang"]) == ["matmul_kernel.c", "matmul_kernel_consts.c", "matmul_kernel_launcher.c",
                                     "rvtune_dot_panels.c"]
    assert (len(work["frontend"]), len(work["lower"])) == (1, 1)
    for path in [*first.objects, first.header, first.blk_constants]:
        assert path.is_file() and path.stat().st_size > 0
    assert json.loads(first.blk_constants.read_text()) == SMALL
    assert "extern const int matmul_kernel_BLOCK_SIZE_K;" in first.header.read_text()
    assert [p.name for p in first.params][:3] == ["a_ptr", "b_ptr", "c_ptr"]

    for counted in work.values():
        counted.clear()
    again = compile_kernel(matmul.kernel, _sig(matmul), SMALL, RISCV_ISA, cache_root=tmp_path)
    assert again.cache_hit
    assert work == {"frontend": [], "lower": [], "clang": []}
    assert again.objects == first.objects and again.c_source == first.c_source


def test_new_config_rebuilds_kernel_but_shares_launcher(tmp_path, work, matmul):
    a = compile_kernel(matmul.kernel, _sig(matmul), SMALL, RISCV_ISA, cache_root=tmp_path)
    work["clang"].clear()
    b = compile_kernel(matmul.kernel, _sig(matmul), {**SMALL, "BLOCK_SIZE_M": 8}, RISCV_ISA, cache_root=tmp_path)
    assert not b.cache_hit
    assert sorted(work["clang"]) == ["matmul_kernel.c", "matmul_kernel_consts.c"]
    assert b.header == a.header and b.launcher_obj == a.launcher_obj  # one harness object serves both
    assert b.kernel_obj != a.kernel_obj


def test_key_covers_lowering_version_toolchain_and_isa(tmp_path, work, matmul, monkeypatch):
    from pytest_rvtune.compiler import lower

    base = compile_kernel(matmul.kernel, _sig(matmul), SMALL, RISCV_ISA, cache_root=tmp_path)
    monkeypatch.setattr(lower, "LOWERING_VERSION", lower.LOWERING_VERSION + "-next")
    bumped = compile_kernel(matmul.kernel, _sig(matmul), SMALL, RISCV_ISA, cache_root=tmp_path)
    monkeypatch.setattr(Toolchain, "fingerprint", lambda self: "another-clang")
    other_tc = compile_kernel(matmul.kernel, _sig(matmul), SMALL, RISCV_ISA, cache_root=tmp_path)
    host = compile_kernel(matmul.kernel, _sig(matmul), SMALL, HOST_ISA, cache_root=tmp_path)
    assert not (bumped.cache_hit or other_tc.cache_hit or host.cache_hit)
    assert len({base.kernel_obj, bumped.kernel_obj, other_tc.kernel_obj, host.kernel_obj}) == 4
    assert len(work["lower"]) == 4


def _load(path: Path, name: str):
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton reads the source through the module
    spec.loader.exec_module(module)
    return module


def test_key_covers_callees(tmp_path, work):
    # Same kernel source, different jit callee: must rebuild (fn.cache_key hashes the dependencies).
    mods = []
    for factor in ("2.0", "3.0"):
        path = tmp_path / f"scale_{factor[0]}.py"
        path.write_text(SCALE_KERNEL.replace("{factor}", factor))
        mods.append(_load(path, f"rvtune_test_scale_{factor[0]}"))
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
    two = compile_kernel(mods[0].scale_kernel, sig, {"BLOCK": 16}, HOST_ISA, cache_root=tmp_path / "c")
    three = compile_kernel(mods[1].scale_kernel, sig, {"BLOCK": 16}, HOST_ISA, cache_root=tmp_path / "c")
    assert not three.cache_hit and two.kernel_obj != three.kernel_obj
    assert work["frontend"] == ["scale_kernel", "scale_kernel"]


def test_bad_signature_names_kernel_and_config(tmp_path, matmul):
    with pytest.raises(CompileError, match=r"kernel matmul_kernel \[BLOCK_SIZE_M=4,.*\].*'stride_cn'"):
        sig = {k: v for k, v in _sig(matmul).items() if k != "stride_cn"}
        compile_kernel(matmul.kernel, sig, SMALL, RISCV_ISA, cache_root=tmp_path)


def test_kernel_object_is_rebuilt_when_the_runtime_headers_change(tmp_path, monkeypatch) -> None:
    """The generated C includes rvtune_*.h: an edit there must not reuse objects compiled with the old text."""
    from pytest_rvtune.compiler import api

    tc, cache, src = Toolchain.for_isa(HOST_ISA), BuildCache(tmp_path), "int k(void) { return 1; }\n"
    monkeypatch.setattr(api, "compiler_source_hash", lambda: "runtime-a")
    first = api._kernel_object(cache, tc, "k", src)
    assert api._kernel_object(cache, tc, "k", src) == first
    monkeypatch.setattr(api, "compiler_source_hash", lambda: "runtime-b")
    assert api._kernel_object(cache, tc, "k", src) != first
