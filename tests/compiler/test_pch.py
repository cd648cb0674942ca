"""The precompiled runtime headers (compiler/pch.py): kernels compile with them to the very same object as
without, a changed header gets a new PCH, and a PCH clang refuses costs nothing but the time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_rvtune.compiler import api, pch
from pytest_rvtune.compiler.cache import BuildCache
from pytest_rvtune.spec import load_kernel_module
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
FLAGS = (*api.KERNEL_CFLAGS, "-w")


def _configs(name: str, count: int) -> list[tuple[object, dict[str, str], dict[str, object]]]:
    """(jit function, signature, constexprs) of up to ``count`` of a kernel's configs: first, middle, last."""
    spec = load_kernel_module(KERNELS / f"{name}.py")
    picks = sorted({0, len(spec.configs) // 2, len(spec.configs) - 1})[:count]
    launches = [spec.capture_launch("small" if "small" in spec.cases else next(iter(spec.cases)), spec.configs[i])
                for i in picks]
    return [(spec.kernel, launch.signature, launch.constexprs) for launch in launches]


@pytest.mark.parametrize("isa", [RISCV_ISA, HOST_ISA])
@pytest.mark.parametrize("kernel", ["matmul", "softmax", "layer_norm", "flash_attention_fwd"])
def test_kernels_compile_with_the_pch_to_the_same_object(kernel: str, isa: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    compiles: list[tuple[str, ...]] = []
    compile_c = Toolchain.compile

    def recording(self: Toolchain, source: Path, output: Path, extra: tuple[str, ...] = ()) -> None:
        compiles.append(extra)
        compile_c(self, source, output, extra)

    monkeypatch.setattr(Toolchain, "compile", recording)
    for fn, signature, constexprs in _configs(kernel, 2):
        built = api.compile_kernel(fn, signature, constexprs, isa, cache_root=tmp_path / "cache", consts_object=False)
        c_file = built.kernel_dir / f"{built.name}.c"
        assert pch.starts_with_prelude(c_file.read_text(), (api.RUNTIME_DIR / pch.PRELUDE_NAME).read_text())
        plain = tmp_path / f"plain-{len(compiles)}.o"
        compile_c(Toolchain.for_isa(isa), c_file, plain, FLAGS)
        assert built.kernel_obj.read_bytes() == plain.read_bytes(), f"{kernel} {constexprs}: the PCH changed the code"
    assert any("-include-pch" in extra for extra in compiles), "no kernel was compiled with the PCH"
    assert len(list((tmp_path / "cache" / "compile" / "pch").glob("*/*/prelude.pch"))) == 1  # made once


def _kernel_c(tmp_path: Path) -> Path:
    fn, signature, constexprs = _configs("softmax", 1)[0]
    built = api.compile_kernel(fn, signature, constexprs, HOST_ISA, cache_root=tmp_path / "first",
                               consts_object=False)
    return built.kernel_dir / f"{built.name}.c"


def test_a_changed_runtime_header_gets_a_new_pch(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    shutil.copytree(api.RUNTIME_DIR, runtime)
    cache, tc = BuildCache(tmp_path / "cache"), Toolchain.for_isa(HOST_ISA)
    flags = ("-I", str(runtime), "-w")
    before = pch.prelude_pch(cache, tc, flags, runtime)
    header = runtime / "rvtune_rt.h"
    header.write_text(header.read_text() + "\n/* edited */\n")
    pch._inputs_fingerprint.cache_clear()  # a new process would list the headers again
    after = pch.prelude_pch(cache, tc, flags, runtime)
    assert before is not None and after is not None and before != after
    c_file = _kernel_c(tmp_path)
    with_pch, without = tmp_path / "with.o", tmp_path / "without.o"
    tc.compile(c_file, with_pch, (*flags, "-include-pch", str(after)))  # clang takes the new one
    tc.compile(c_file, without, flags)
    assert with_pch.read_bytes() == without.read_bytes()


def test_a_pch_clang_refuses_falls_back_to_a_plain_compile(tmp_path: Path) -> None:
    cache, tc = BuildCache(tmp_path / "cache"), Toolchain.for_isa(HOST_ISA)
    made = pch.prelude_pch(cache, tc, FLAGS, api.RUNTIME_DIR)
    assert made is not None
    made.write_bytes(b"not a precompiled header")
    c_file = _kernel_c(tmp_path)
    out, plain = tmp_path / "k.o", tmp_path / "plain.o"
    pch.compile_kernel_c(cache, tc, c_file, out, FLAGS, api.RUNTIME_DIR)
    tc.compile(c_file, plain, FLAGS)
    assert out.read_bytes() == plain.read_bytes()


def test_only_c_that_starts_with_the_prelude_takes_the_pch() -> None:
    prelude = (api.RUNTIME_DIR / pch.PRELUDE_NAME).read_text()
    head = '/* Kernel k lowered from Triton IR by pytest-rvtune. */\n#include "rvtune_rt.h"\n#include "rvtune_dot.h"\n'
    assert pch.starts_with_prelude(head + "void k(void) {}\n", prelude)
    assert not pch.starts_with_prelude('#define RV_INLINE inline\n' + head, prelude)  # a macro before: no
    assert not pch.starts_with_prelude('#include "rvtune_rt.h"\nvoid k(void) {}\n', prelude)  # not both headers
    assert not pch.starts_with_prelude(head, "/* no includes */\n")
