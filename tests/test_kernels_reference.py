"""Every committed golden output agrees with what the real kernel computes under Triton's interpreter.

This ties the three descriptions of a kernel together: its reference (which wrote the expected files), its
launch() (which the ELF harness replays) and the @triton.jit code itself. The interpreter is slow, so each
kernel runs a few configs of its small case: the extremes of its space and one from the middle, and one
config per data variant (every BLOCK_SIZE_M of fused MoE, both IS_CAUSAL of flash attention).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_rvtune.golden import Store, golden_set, read_tensor
from pytest_rvtune.spec import KernelSpec, discover, load_kernel_module, variant_id

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
REPO_GOLDEN = Store(root=Path(__file__).resolve().parent.parent / "golden")


def sample_configs(spec: KernelSpec) -> list[dict]:
    """First, middle and last config, plus the first config of every data variant not yet covered."""
    picked = [spec.configs[0], spec.configs[len(spec.configs) // 2], spec.configs[-1]]
    covered = {variant_id(spec.variant_of(c)) for c in picked}
    for c in spec.configs:
        vid = variant_id(spec.variant_of(c))
        if vid not in covered:
            picked.append(c)
            covered.add(vid)
    return picked


@pytest.mark.parametrize("path", discover(KERNELS), ids=lambda p: p.stem)
def test_interpreter_matches_golden_outputs(path):
    spec = load_kernel_module(path)
    configs = sample_configs(spec)
    sets = [golden_set(spec, "small", c, REPO_GOLDEN) for c in configs]
    runs = []
    for gs, config in zip(sets, configs, strict=True):
        # The kernel reads the golden input files, as the ELF does: fresh buffers for the outputs.
        inputs = spec.make_inputs("small", spec.variant_of(config))
        for f in gs.inputs:
            inputs[f.tensor] = torch.from_numpy(read_tensor(f).copy())
        for f in gs.expected:
            inputs[f.tensor] = torch.full_like(inputs[f.tensor], float("nan"))  # unwritten = caught
        runs.append((config, inputs))
    results = spec.run_interpreter_batch("small", runs)
    for gs, config, out in zip(sets, configs, results, strict=True):
        for f in gs.expected:
            got = out[f.tensor].numpy()
            want = read_tensor(f)
            close = np.isclose(got, want, **spec.tolerance)
            assert close.all(), (
                f"{spec.name} {spec.config_id(config)} {f.tensor}: {np.count_nonzero(~close)} of {close.size} "
                f"values off, first at {np.argwhere(~close)[0].tolist()}: {got[~close][0]} vs {want[~close][0]}"
            )
