"""The vtype dataflow (pytest_rvtune/x60/vtype.py) against QEMU's own per-block vtype, over the kernel suite.

    .venv/bin/python benchmarks/x60_vtype_check.py [--case small] [--kernels matmul,softmax] [--all-configs]

For each kernel (all of kernels/ by default), its first, middle and last config (``--all-configs``: every one) is
built and run once under ``qemu-riscv64 -d exec,nochain`` (x60/qemu_vtype.py); every vector instruction of every
executed block must have the (SEW, LMUL) QEMU translated the block under. Prints per config the (block, vector
instruction) pairs that agree, the vtypes seen and any disagreement; the exit status is 1 if any disagrees.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_rvtune import build  # noqa: E402
from pytest_rvtune.spec import load_kernel_module  # noqa: E402
from pytest_rvtune.toolchain import RISCV_ISA  # noqa: E402
from pytest_rvtune.x60.code import elf_code  # noqa: E402
from pytest_rvtune.x60.qemu_vtype import compare, qemu_block_vtypes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="small")
    parser.add_argument("--kernels", default="", help="comma-separated kernel names (default: all of kernels/)")
    parser.add_argument("--all-configs", action="store_true")
    args = parser.parse_args()
    names = args.kernels.split(",") if args.kernels else sorted(p.stem for p in (REPO / "kernels").glob("*.py"))
    total = wrong_total = 0
    for name in names:
        spec = load_kernel_module(REPO / "kernels" / f"{name}.py")
        configs = spec.configs if args.all_configs else list({id(c): c for c in (
            spec.configs[0], spec.configs[len(spec.configs) // 2], spec.configs[-1])}.values())
        for config in configs:
            art = build.build_item(spec, args.case, dict(config), RISCV_ISA)
            argv = ["--warmup", "0", "--runs", "1", *map(str, art.argv)]
            with tempfile.TemporaryDirectory(prefix="x60-vtype-") as tmp:
                seen = qemu_block_vtypes(art.elf, argv, Path(tmp) / "exec.log")
            agree, wrong = compare(elf_code(art.elf, [pc for pc, _ in seen]), seen)
            total += sum(agree.values())
            wrong_total += len(wrong)
            vtypes = " ".join(f"e{sew}{lmul}" for sew, lmul in sorted(agree))
            print(f"{name} {dict(config)}: {sum(agree.values())} agree ({vtypes}), {len(wrong)} disagree"
                  + "".join(f"\n    {w}" for w in wrong[:5]), flush=True)
    print(f"total: {total} agree, {wrong_total} disagree")
    return 1 if wrong_total else 0


if __name__ == "__main__":
    sys.exit(main())
