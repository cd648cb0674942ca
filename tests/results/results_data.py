"""Result records for the results tests, whose timing samples are really measured.

Each "config" is a blocked matrix product done with numpy, so different block sizes really take different
times; samples of configs that must be comparable are measured interleaved (round robin), so drift in the
machine's load hits them all alike. Counters under "QEMU" are the deterministic counts of the blocked
algorithm (instructions are not measurable here without a kernel run; the shape of the numbers is what matters).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

SIZE = 96  # matrix size of the measured op: ~0.1-1 ms per sample, so 40 samples stay well under a second


def blocked_matmul(a: np.ndarray, b: np.ndarray, bm: int, bn: int) -> np.ndarray:
    c = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    for i in range(0, a.shape[0], bm):
        for j in range(0, b.shape[1], bn):
            c[i:i + bm, j:j + bn] = a[i:i + bm] @ b[:, j:j + bn]
    return c


def measure(configs: Sequence[tuple[int, int]], rounds: int, inner: int = 3) -> list[list[float]]:
    """Samples (ns) per config, round robin; each sample is the min of ``inner`` runs to cut scheduler noise."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((SIZE, SIZE)), rng.standard_normal((SIZE, SIZE))
    samples: list[list[float]] = [[] for _ in configs]
    for _ in range(rounds):
        for index, (bm, bn) in enumerate(configs):
            best = float("inf")
            for _ in range(inner):
                start = time.perf_counter_ns()
                blocked_matmul(a, b, bm, bn)
                best = min(best, time.perf_counter_ns() - start)
            samples[index].append(float(best))
    return samples


def exact_counts(bm: int, bn: int, m: int = SIZE) -> dict[str, float]:
    """Deterministic 'instruction counts' of the blocked algorithm: per-block overhead plus vector work."""
    blocks = -(-m // bm) * -(-SIZE // bn)
    vector = m * SIZE * SIZE // 8
    return {"kernel_insns": float(blocks * 200 + vector), "insns": float(blocks * 200 + vector + 50_000),
            "vector_insns": float(vector)}


def make_record(kernel: str, case: str, config: dict[str, Any], samples: Sequence[float], *,
                target: str = "host", outcome: str = "passed", counters: dict[str, float] | None = None,
                machine: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    config_id = "-".join(f"{k}={v}" for k, v in config.items())
    timing = "emulated" if target == "qemu" else "real"
    return {
        "nodeid": f"kernels/{kernel}.py::{kernel}[{case}-{config_id}]", "kernel": kernel, "case": case,
        "config": config, "config_id": config_id, "target": target,
        "machine": machine or {"isa": "rv64gcv_zvl256b" if target == "qemu" else "host", "board": target},
        "outcome": outcome, "samples_ns": [int(s) for s in samples], "counters": counters or {},
        "timing_source": timing,
        "elf_sha256": hashlib.sha256(f"{kernel}{config_id}{target}".encode()).hexdigest(),
        "golden_sha256": hashlib.sha256(f"{kernel}{case}".encode()).hexdigest(),
        # what decided the verdict (verdict_key.py); a resume matches on it
        "verdict_key": hashlib.sha256(f"{kernel}{case}{config_id}{target}".encode()).hexdigest(), "wall_s": 0.1,
        "checks": [{"name": "c", "ok": outcome == "passed"}], "message": "" if outcome == "passed" else "max_abs=1",
        "time": datetime.now(UTC).isoformat(timespec="seconds"), **extra,
    }


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


#: The config space of the fake "matmul": BLOCK_SIZE_M x BLOCK_SIZE_N x GROUP_SIZE_M.
SPACE = [(bm, bn, g) for bm in (16, 32, 48) for bn in (16, 32, 96) for g in (1, 8)]


def clean_env() -> dict[str, str]:
    """The environment for a nested pytest: without xdist's worker variables, which would make
    pytest-benchmark in the child think it runs under xdist and disable itself."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
