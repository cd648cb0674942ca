"""Whole kernels, differential: our compiler's ELF against Triton's interpreter on the same random inputs.

For matmul, flash-attention forward and fused MoE, several block configs each (the smallest tiles of their
config spaces included) on the kernels' ragged "small" case (partial tiles everywhere; MoE with an idle
expert and early-returning programs): the interpreter (TRITON_INTERPRET=1, CPU torch) computes the
oracle, then the kernel is compiled by ``compile_kernel`` for the host and for rv64gcv, linked with the
launcher and the generic harness, and run natively and under qemu-riscv64 (VLEN 256) with 2 threads. The
harness itself checks every output tensor against the interpreter's, element by element, with the kernel's
tolerance.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_rvtune.compiler.api import compile_kernel
from pytest_rvtune.harness import HEADER_DIR
from pytest_rvtune.harness import generate as harness
from pytest_rvtune.toolchain import HOST_ISA, RISCV_ISA, Toolchain, qemu_command

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout these tests belong to

CASE = "small"

#: Configs per kernel: the first is the smallest tile of the kernel's config space.
CONFIGS: dict[str, list[dict[str, Any]]] = {
    "matmul": [
        {"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": 8, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8},
        {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2},
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
    ],
    "flash_attention_fwd": [
        {"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": 8, "IS_CAUSAL": False},
        {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 8, "IS_CAUSAL": True},
        {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "IS_CAUSAL": True},
    ],
    "fused_moe": [
        {"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8},
        {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 8},
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2},
    ],
}
ISAS = (HOST_ISA, RISCV_ISA)


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    # A fresh build cache: these tests must run the real frontend, lowering and clang, not yesterday's objects.
    mp = pytest.MonkeyPatch()
    mp.setenv("RVTUNE_CACHE_DIR", str(tmp_path_factory.mktemp("diff-cache")))
    yield
    mp.undo()


def write_txt(path: Path, tensor: Any) -> Path:
    """The golden TXT format (docs/contracts.md): ``rows cols`` then one row per line; rank > 2 flattened
    to (prod(leading), last), rank < 2 to one row. Floats with 9 significant digits round-trip fp32."""
    a = tensor.detach().cpu().numpy()
    a = a.reshape(-1, a.shape[-1]) if a.ndim >= 2 else a.reshape(1, -1)
    with open(path, "w") as f:
        f.write(f"{a.shape[0]} {a.shape[1]}\n")
        np.savetxt(f, a, fmt="%d" if np.issubdtype(a.dtype, np.integer) else "%.9g")
    return path


@pytest.fixture(scope="module")
def interpreted():
    """kernel -> [(config, inputs, interpreter outputs)], one interpreter process per kernel, on demand."""
    from pytest_rvtune.spec import load_kernel_module

    done: dict[str, tuple[Any, list]] = {}

    def get(kernel: str) -> tuple[Any, list]:
        if kernel not in done:
            spec = load_kernel_module(REPO_ROOT / "kernels" / f"{kernel}.py")
            runs = []
            for i, config in enumerate(CONFIGS[kernel]):
                case = spec.case(CASE, spec.variant_of(config))
                # Not the golden data's seed: fresh random inputs for each config.
                runs.append((config, spec.module.make_inputs(case, 1000 + i)))
            results = spec.run_interpreter_batch(CASE, runs)
            done[kernel] = (spec, [(c, i, r) for (c, i), r in zip(runs, results, strict=True)])
        return done[kernel]

    return get


def build_elf(spec: Any, launch: Any, args: list[harness.HarnessArg], isa: str, out: Path) -> Path:
    """compile_kernel's objects + the generic harness -> an ELF for ``isa``."""
    ck = compile_kernel(spec.kernel, launch.signature, launch.constexprs, isa)
    tc = Toolchain.for_isa(isa)
    main_c = out / f"{ck.name}_harness.c"
    main_c.write_text(harness.generate(ck.name, args))
    tc.compile(main_c, out / "harness.o", extra=("-I", str(HEADER_DIR), "-I", str(ck.include_dir)))
    elf = out / f"{ck.name}.elf"
    tc.link([*ck.objects, out / "harness.o"], elf)
    return elf


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(("kernel", "index"), [(k, i) for k, cs in CONFIGS.items() for i in range(len(cs))],
                         ids=lambda v: str(v))
def test_kernel_matches_interpreter(kernel, index, isa, interpreted, tmp_path):
    spec, runs = interpreted(kernel)
    config, inputs, oracle = runs[index]
    variant = spec.variant_of(config)
    launch = spec.capture_launch(CASE, config, inputs)
    outputs = set(spec.reference(inputs, CASE, variant))
    roles = {a.tensor: "out" if a.tensor in outputs else "in" for a in launch.tensor_args}
    in_files = {a.name: write_txt(tmp_path / f"{a.tensor}.txt", inputs[a.tensor])
                for a in launch.tensor_args if roles[a.tensor] == "in"}
    expected = {a.name: write_txt(tmp_path / f"expected_{a.tensor}.txt", oracle[a.tensor])
                for a in launch.tensor_args if roles[a.tensor] == "out"}
    args = [harness.HarnessArg(a.name, a.type, roles[a.tensor] if a.is_pointer else "scalar",
                               label=a.tensor or "") for a in launch.args]
    elf = build_elf(spec, launch, args, isa, tmp_path)
    argv = harness.argv(args, launch.grid, {a.name: a.value for a in launch.scalar_args}, in_files, expected,
                        spec.tolerance["atol"], spec.tolerance["rtol"])
    prefix = qemu_command() if isa == RISCV_ISA else []
    cmd = [*prefix, str(elf), "--warmup", "0", "--runs", "1", "--threads", "2", *map(str, argv)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    checks = [line for line in proc.stdout.splitlines() if line.startswith("RVTUNE check ")]
    report = f"{kernel} {spec.config_id(config)} on {isa}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    assert proc.returncode == 0, report
    assert sorted(line.split()[2] for line in checks) == sorted(outputs), report
    assert all(line.split()[3] == "ok" for line in checks), report
