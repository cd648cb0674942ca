"""Tiny kernel modules and results-file helpers for the plugin tests (imported by conftest and the tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
#: A kernel module template: y = x + 1 over n elements, BLOCK per program. ``{body}`` is the kernel's body
#: (offs, mask already defined), ``{ref}`` the reference's expression of x, ``{configs}`` the BLOCK values.
KERNEL_TEMPLATE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def {name}_kernel(x_ptr, y_ptr, n, loops, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
{body}


def get_{name}_kernel_autotune_config():
    return [triton.Config({{"BLOCK": b}}) for b in {configs}]


CASES = {{"small": dict(n=75), "emu": dict(n=300)}}
TOLERANCE = dict(atol=1e-6, rtol=1e-6)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    return {{"x": torch.randn(case["n"], generator=g), "y": torch.empty(case["n"])}}


def reference(inputs, case):
    x = inputs["x"]
    return {{"y": {ref}}}


def launch(kernel, inputs, case):
    grid = lambda META: (triton.cdiv(case["n"], META["BLOCK"]),)  # noqa: E731
    kernel[grid](inputs["x"], inputs["y"], case["n"], {loops})
'''

BODIES: dict[str, dict[str, Any]] = {
    # right answer
    "good": dict(body="    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)", ref="x + 1.0"),
    # the reference disagrees with the kernel by 1.0 everywhere: wrong answer at index 0
    "wrong": dict(body="    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)", ref="x + 2.0"),
    # inline assembly (GPU code by nature): the lowering rejects tt.elementwise_inline_asm -> build error
    "asm": dict(body=(
        "    x = tl.load(x_ptr + offs, mask=mask)\n"
        "    y = tl.inline_asm_elementwise(\"mov.b32 $0, $1;\", \"=r,r\", [x], dtype=tl.float32,\n"
        "                                  is_pure=True, pack=1)\n"
        "    tl.store(y_ptr + offs, y, mask=mask)"), ref="x"),
    # stores 1 GiB past the buffer: SIGSEGV
    "crash": dict(body="    tl.store(y_ptr + offs + (1 << 28), tl.load(x_ptr + offs, mask=mask), mask=mask)", ref="x"),
    # "good" the long way: 2000 passes of an idempotent max per element, a real slow-down of the same item
    # (same scalars and golden data as "good": only the code differs)
    "slow": dict(body=(
        "    x = tl.load(x_ptr + offs, mask=mask)\n"
        "    acc = x\n"
        "    for i in range(0, 2000):\n"
        "        acc = tl.maximum(acc, x)\n"
        "    tl.store(y_ptr + offs, acc + 1.0, mask=mask)"), ref="x + 1.0"),
    # 2**31 - 1 iterations of a load-add under QEMU: never ends within the test's timeout
    "hang": dict(body=(
        "    acc = tl.zeros([BLOCK], dtype=tl.float32)\n"
        "    for i in range(0, loops):\n"
        "        acc += tl.load(x_ptr + offs, mask=mask)\n"
        "    tl.store(y_ptr + offs, acc, mask=mask)"), ref="x", loops=2**31 - 1),
}


def kernel_source(name: str, kind: str = "good", configs: tuple[int, ...] = (16, 32)) -> str:
    spec = {"loops": 1, **BODIES[kind]}
    return KERNEL_TEMPLATE.format(name=name, configs=list(configs), **spec)


def read_results(path: Path) -> list[dict[str, Any]]:
    """Records of a results file (every line must be whole)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def results_file(project: pytest.Pytester) -> Path:
    files = list((project.path / ".rvtune" / "results").glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def by_kernel(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{r['kernel']}[{r['config_id']}]": r for r in records}


def subprocess_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RVTUNE_GOLDEN"))}
    return env | {"RVTUNE_CACHE_DIR": str(cache)}
