"""What the X60 model costs a QEMU item: the plugin's per-block counts (``blocks=``, always on with a kernel) and the
model's own Python time.

    .venv/bin/python benchmarks/x60_overhead.py [--kernel matmul] [--case emu] [--repeats 3]

For one config of a kernel (its first config), builds the item and runs its ELF under qemu-riscv64 with our plugin
counting the launch window (a) without ``blocks=`` (what every item did before the model) and (b) with it, each
``--repeats`` times (the minimum wall time is kept: QEMU's run is deterministic, the rest is the machine's noise),
then times ``x60_counters`` on (b)'s blocks file with the ELF's code record cold (disassembly and vtype dataflow)
and warm (the per-ELF record cached). Prints the figures, the ratios and the load average; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_rvtune import build, paths  # noqa: E402
from pytest_rvtune.compiler.runtime_object import KERNEL_HELPER_PREFIX  # noqa: E402
from pytest_rvtune.harness.data_image import data_image  # noqa: E402
from pytest_rvtune.spec import load_kernel_module  # noqa: E402
from pytest_rvtune.targets.local import launcher_symbol  # noqa: E402
from pytest_rvtune.toolchain import RISCV_ISA, qemu_command  # noqa: E402
from pytest_rvtune.x60 import code as x60_code  # noqa: E402
from pytest_rvtune.x60.blocks import read_blocks  # noqa: E402
from pytest_rvtune.x60.model import x60_counters  # noqa: E402


def run(cmd: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed: {proc.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", default="matmul")
    parser.add_argument("--case", default="emu")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spec = load_kernel_module(REPO / "kernels" / f"{args.kernel}.py")
    config = dict(spec.configs[0])
    art = build.build_item(spec, args.case, config, RISCV_ISA)
    argv = ["--warmup", "0", "--runs", "1", *(str(data_image(a)) if isinstance(a, Path) else a for a in art.argv)]
    symbol = art.kernel_symbol
    plugin = paths.icount_plugin()
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="x60-overhead-") as tmp:
        work = Path(tmp)
        # as QemuTarget runs our harness at --threads 1: one guest thread, inline counts (threads=1)
        base = (f"{plugin},out={work / 'icount.txt'},threads=1,symbol={symbol},launch={launcher_symbol(symbol)}"
                f",helpers={KERNEL_HELPER_PREFIX}")
        blocks = work / "blocks.txt"
        for name, plugin_arg in (("counts", base), ("counts + blocks=", f"{base},blocks={blocks}")):
            times[name] = min(run([*qemu_command(), "-plugin", plugin_arg, str(art.elf), *argv], work)
                              for _ in range(args.repeats))
        lines = len(blocks.read_text().splitlines())
        executed = [b.vaddr for b in read_blocks(blocks)]
        with tempfile.TemporaryDirectory(prefix="x60-code-") as cache:
            os.environ["RVTUNE_CACHE_DIR"] = cache
            started = time.perf_counter()
            counters = x60_counters(blocks, art.elf)
            times["x60 model, cold (disassembly + vtype dataflow)"] = time.perf_counter() - started
            started = time.perf_counter()
            x60_code.elf_code(art.elf, executed, reuse=False)
            times["x60 model: the ELF's cached code record read"] = time.perf_counter() - started
            started = time.perf_counter()
            x60_counters(blocks, art.elf)
            times["x60 model: pricing alone (code in memory)"] = time.perf_counter() - started
    print(f"X60 model overhead: {args.kernel} [{args.case}, {config}], {lines} executed blocks; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    base_time = times["counts"]
    for name, seconds in times.items():
        print(f"  {name:<50} {seconds:8.2f} s   {seconds / base_time:5.2f}x of counts alone")
    print(f"  x60_cycles {counters['x60_cycles']:,.0f} (whole window), "
          f"stand-in share {counters['x60_standin_share']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
