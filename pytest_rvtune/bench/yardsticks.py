"""The hand-written RVV yardsticks of ``rvtune bench-compiler``: build, run under QEMU, check, count.

Each yardstick (``rvv_matmul.c``, ``rvv_rows.c``, ``rvv_flash.c``, ``rvv_moe.c`` beside this file) is built
with the generated kernels' clang flags and run under QEMU with the same icount plugin; its ``<kernel>_wrap``
makes the plugin count the whole call as ``launch_insns``, the counter that ranks our kernels. Inputs are
written by numpy and every output is checked against numpy (float64) before a count is believed: a fast wrong
yardstick is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_rvtune.toolchain import RISCV_ISA, Toolchain

BENCH_DIR = Path(__file__).resolve().parent
MATMUL_SOURCE = BENCH_DIR / "rvv_matmul.c"
ROWS_SOURCE = BENCH_DIR / "rvv_rows.c"
FLASH_SOURCE = BENCH_DIR / "rvv_flash.c"
MOE_SOURCE = BENCH_DIR / "rvv_moe.c"

#: argv variant of rvv_matmul.c -> (kernel symbol, description).
MATMUL_VARIANTS = {"4x4": ("rvv_matmul", "hand-written RVV 4 rows x LMUL4"),
                   "3x8": ("rvv_matmul_3x8", "hand-written RVV 3 rows x LMUL8, A packed"),
                   "6x4k8": ("rvv_matmul_6x4k8", "hand-written RVV 6 rows x LMUL4, K unrolled 8, A packed")}
#: Must match kernels/layer_norm.py's EPS and rvv_rows.c's LAYER_NORM_EPS.
LAYER_NORM_EPS = 1e-5
#: Launches per QEMU run: the per-launch count is launch_insns / launches, measured over more than one.
REPS = 2
#: VLEN 256 (rv64gcv_zvl256b): fp32 elements in one LMUL-8 register group.
FLOATS_PER_M8 = 256 // 32 * 8


class YardstickError(Exception):
    """A yardstick that failed to build or run, or computed a wrong answer; names which and how."""


@dataclass(frozen=True)
class Counts:
    launch_insns: float  # per launch (the whole call of <kernel>_wrap)
    vector_insns: float  # per run (whole process, like our kernels' vector share)
    insns: float
    x60_cycles: float | None = None  # per launch, the X60 model's (None where the target does not give it)

    @property
    def vector_share(self) -> float:
        return self.vector_insns / self.insns if self.insns else 0.0


def build(source: Path, workdir: Path) -> Path:
    """``source`` compiled and linked with the generated kernels' RVV flags into ``workdir``."""
    tc = Toolchain.for_isa(RISCV_ISA)
    workdir.mkdir(parents=True, exist_ok=True)
    obj, elf = workdir / f"{source.stem}.o", workdir / f"{source.stem}.elf"
    tc.compile(source, obj, extra=(f"-I{BENCH_DIR}",))
    tc.link([obj], elf)
    return elf


def _run(elf: Path, args: list[str], symbol: str, what: str) -> Counts:
    from pytest_rvtune.targets.local import QemuTarget

    res = QemuTarget(with_timing_model=True).run(elf, args, timeout=900, kernel_symbol=symbol)
    if res.returncode != 0:
        raise YardstickError(f"{what} failed under QEMU (exit {res.returncode}): {(res.stdout + res.stderr)[-300:]}")
    launches = res.counters.get("launches", 0)
    if launches != REPS or "launch_insns" not in res.counters:
        raise YardstickError(f"{what}: the QEMU plugin saw {launches} launches of {symbol}_wrap, expected {REPS}")
    x60 = res.counters.get("x60_cycles")
    return Counts(res.counters["launch_insns"] / launches, res.counters["vector_insns"], res.counters["insns"],
                  None if x60 is None else x60 / launches)


def _save(path: Path, array: np.ndarray) -> str:
    np.ascontiguousarray(array, dtype=np.float32).tofile(path)
    return str(path)


def _load(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    return np.fromfile(path, dtype=np.float32).reshape(shape)


def _check(what: str, name: str, got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> None:
    if not np.allclose(got, want, atol=atol, rtol=rtol):
        worst = float(np.max(np.abs(got.astype(np.float64) - want)))
        raise YardstickError(f"{what}: output {name} differs from numpy (max abs error {worst:g}, "
                             f"atol {atol:g} rtol {rtol:g}): the yardstick is wrong, its count means nothing")


def matmul(n: int, variant: str, workdir: Path) -> Counts:
    """One n^3 fp32 matmul of rvv_matmul.c's ``variant``, checked against numpy."""
    if variant not in MATMUL_VARIANTS:
        raise YardstickError(f"unknown matmul yardstick {variant!r}: one of {', '.join(MATMUL_VARIANTS)}")
    symbol = MATMUL_VARIANTS[variant][0]
    what = f"{symbol} ({n}^3)"
    elf = build(MATMUL_SOURCE, workdir)
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    out = workdir / f"mm_{variant}_{n}_c.bin"
    counts = _run(elf, [variant, str(n), str(REPS), _save(workdir / f"mm_{n}_a.bin", a),
                        _save(workdir / f"mm_{n}_b.bin", b), str(out)], symbol, what)
    want = a.astype(np.float32).astype(np.float64) @ b.astype(np.float32).astype(np.float64)
    _check(what, "C", _load(out, (n, n)), want, atol=1e-4 * n, rtol=1e-4)
    return counts


def softmax(rows: int, cols: int, workdir: Path) -> Counts:
    """rvv_rows.c's softmax of a rows x cols fp32 matrix (x ~ 4 N(0, 1), as kernels/softmax.py), checked."""
    what = f"rvv_softmax ({rows}x{cols})"
    elf = build(ROWS_SOURCE, workdir)
    x = (np.random.default_rng(rows * cols).standard_normal((rows, cols)) * 4).astype(np.float32)
    out = workdir / f"softmax_{rows}x{cols}_y.bin"
    counts = _run(elf, ["softmax", str(rows), str(cols), str(REPS), _save(workdir / f"softmax_{rows}x{cols}_x.bin", x),
                        str(out)], "rvv_softmax", what)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    _check(what, "y", _load(out, (rows, cols)), e / e.sum(axis=1, keepdims=True), atol=1e-6, rtol=1e-4)
    return counts


def layer_norm(rows: int, cols: int, workdir: Path) -> Counts:
    """rvv_rows.c's layer_norm (x ~ 2 N(0, 1) + 0.5, w, b as kernels/layer_norm.py), y, mean, rstd checked."""
    what = f"rvv_layer_norm ({rows}x{cols})"
    elf = build(ROWS_SOURCE, workdir)
    rng = np.random.default_rng(rows + cols)
    x = (rng.standard_normal((rows, cols)) * 2 + 0.5).astype(np.float32)
    w, b = (rng.random(cols) + 0.5).astype(np.float32), (rng.random(cols) - 0.5).astype(np.float32)
    tag = f"ln_{rows}x{cols}"
    outs = [workdir / f"{tag}_{name}.bin" for name in ("y", "mean", "rstd")]
    counts = _run(elf, ["layer_norm", str(rows), str(cols), str(REPS), _save(workdir / f"{tag}_x.bin", x),
                        _save(workdir / f"{tag}_w.bin", w), _save(workdir / f"{tag}_b.bin", b), *map(str, outs)],
                  "rvv_layer_norm", what)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1)
    rstd = 1 / np.sqrt(x64.var(axis=1) + LAYER_NORM_EPS)
    y = (x64 - mean[:, None]) * rstd[:, None] * w.astype(np.float64) + b.astype(np.float64)
    _check(what, "y", _load(outs[0], (rows, cols)), y, atol=1e-4, rtol=1e-4)
    _check(what, "mean", _load(outs[1], (rows,)), mean, atol=1e-4, rtol=1e-4)
    _check(what, "rstd", _load(outs[2], (rows,)), rstd, atol=1e-4, rtol=1e-4)
    return counts


def flash_attention(heads: int, n: int, d: int, causal: bool, workdir: Path) -> Counts:
    """rvv_flash.c on q, k, v ~ N(0, 1) of shape [heads, n, d] (as kernels/flash_attention_fwd.py with Z=1);
    out and L (logsumexp of each score row) checked against numpy."""
    what = f"rvv_flash (heads={heads} n={n} d={d} causal={causal})"
    elf = build(FLASH_SOURCE, workdir)
    rng = np.random.default_rng(heads * n * d)
    q, k, v = (rng.standard_normal((heads, n, d)).astype(np.float32) for _ in range(3))
    tag = f"flash_{heads}x{n}x{d}_{int(causal)}"
    outs = [workdir / f"{tag}_out.bin", workdir / f"{tag}_lse.bin"]
    inputs = [_save(workdir / f"{tag}_{name}.bin", t) for name, t in (("q", q), ("k", k), ("v", v))]
    counts = _run(elf, [str(heads), str(n), str(d), str(int(causal)), str(REPS), *inputs, *map(str, outs)],
                  "rvv_flash", what)
    s = np.einsum("hid,hjd->hij", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(d)
    if causal:
        s = np.where(np.triu(np.ones((n, n), dtype=bool), 1), -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - top)
    want = np.einsum("hij,hjd->hid", e / e.sum(axis=-1, keepdims=True), v.astype(np.float64))
    lse = (top[..., 0] + np.log(e.sum(axis=-1)))
    _check(what, "out", _load(outs[0], (heads, n, d)), want, atol=1e-4, rtol=1e-4)
    _check(what, "L", _load(outs[1], (heads, n)), lse, atol=1e-4, rtol=1e-4)
    return counts


def fused_moe(m: int, experts: int, k: int, n: int, top_k: int, block_m: int, workdir: Path,
              idle_experts: tuple[int, ...] = ()) -> Counts:
    """rvv_moe.c on kernels/fused_moe.py's kind of inputs: a, b ~ U(-1, 1) ([m, k], [experts, n, k]), a router's
    top-k experts per token (none of ``idle_experts``) and renormalised weights, its slots grouped by
    ``moe_align_block_size`` with padding per ``block_m``; C checked against numpy (float64) from the top-k ids
    directly, not from the sorted ids the yardstick reads."""
    from pytest_rvtune.moe_align import moe_align_block_size

    what = f"rvv_moe (M={m} E={experts} K={k} N={n} top_k={top_k} BLOCK_M={block_m})"
    elf = build(MOE_SOURCE, workdir)
    rng = np.random.default_rng(m * experts * k * n)
    a = rng.random((m, k), dtype=np.float32) * 2 - 1
    b = rng.random((experts, n, k), dtype=np.float32) * 2 - 1
    logits = rng.standard_normal((m, experts))
    logits[:, list(idle_experts)] = -np.inf
    topk_ids = np.argsort(-logits, axis=1, kind="stable")[:, :top_k]
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    weights = np.take_along_axis(probs, topk_ids, axis=1)
    weights = (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)
    import torch

    sorted_ids, expert_ids, post_padded = moe_align_block_size(torch.from_numpy(topk_ids), block_m, experts)
    em = int(post_padded[0])
    tag = f"moe_{m}x{experts}x{k}x{n}x{top_k}_{block_m}"
    ids_paths = [workdir / f"{tag}_sorted_ids.bin", workdir / f"{tag}_expert_ids.bin"]
    sorted_ids.numpy().astype("<i4").tofile(ids_paths[0])
    expert_ids.numpy().astype("<i4").tofile(ids_paths[1])
    out = workdir / f"{tag}_c.bin"
    inputs = [_save(workdir / f"{tag}_{name}.bin", t) for name, t in (("a", a), ("b", b), ("w", weights))]
    counts = _run(elf, [str(v) for v in (m, experts, k, n, top_k, em, block_m, REPS)]
                  + [*inputs, *map(str, ids_paths), str(out)], "rvv_moe", what)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = np.einsum("tk,tsnk->tsn", a64, b64[topk_ids]) * weights.astype(np.float64)[:, :, None]
    _check(what, "C", _load(out, (m, top_k, n)), want, atol=1e-4, rtol=1e-4)
    return counts


#: The X60's fp32 FMA peak per core: vfmacc.vf at e32m8 issues every 8 cycles (rvv-bench's X60 instruction table,
#: camel-cdr/rvv-bench-results spacemit_x60/index.html at 6438d64) = 64 lanes x 2 FLOP / 8 = 16 FLOP per cycle.
X60_PEAK_FLOP_PER_CYCLE = 16.0


def moe_flops(m: int, k: int, n: int, top_k: int) -> float:
    """Multiply-adds x 2 of a fused MoE launch: every valid (token, k) slot times its expert's [n, k] weights."""
    return 2.0 * m * top_k * n * k


def gemm_floor_insns_per_flop(rows: int = 3, lanes: int = FLOATS_PER_M8) -> float:
    """The GEMM floor, a computed figure: per K step of a ``rows`` x LMUL-8 register tile, one B vector load,
    one address add, and per row one scalar A load and one vfmacc.vf of ``lanes`` multiply-adds (2 FLOPs
    each); no loop bookkeeping, packing or stores. 3 rows is the most LMUL-8 accumulators beside B's vector."""
    return (2 * rows + 2) / (rows * lanes * 2)


__all__ = [
    "FLOATS_PER_M8",
    "MATMUL_VARIANTS",
    "X60_PEAK_FLOP_PER_CYCLE",
    "Counts",
    "YardstickError",
    "flash_attention",
    "fused_moe",
    "gemm_floor_insns_per_flop",
    "layer_norm",
    "matmul",
    "moe_flops",
    "softmax",
]
