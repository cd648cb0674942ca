"""What the QEMU instruction-count plugin costs in QEMU time, before and after per-thread counting.

    .venv/bin/python benchmarks/icount_cost.py                     # softmax and matmul emu configs, 7 repeats
    .venv/bin/python benchmarks/icount_cost.py --repeats 11 --launches 20

Real items (built with build_item, emu case) run under qemu-riscv64 as QemuTarget runs them, with:
- ``none``: no plugin (QEMU alone);
- ``before``: the plugin of ``--before`` (a git revision; default: the last one with per-instruction inline adds),
  built here with the same flags as ``rvtune setup``;
- ``after 1``: today's plugin with ``threads=1`` (what QemuTarget passes for our harness at --threads 1: inline
  adds per block);
- ``after``: today's plugin without it (a callback per executed block, exact with any number of threads), with
  the harness at --threads 1 and at --threads 2.
Each item runs with its golden data as binary images (what sessions run) and as text (the harness parses it: a
long stretch of scalar code, like a project's own harness reading its text files). The figure is QEMU's CPU
time (user + sys of the child, every host thread), median and minimum over the interleaved repeats, with the
load average before and after. Counts are printed once per variant: they must agree wherever the plugins count
the same thing. Nothing is asserted: the machine may be shared.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tabulate import tabulate  # noqa: E402

from pytest_rvtune import paths  # noqa: E402
from pytest_rvtune.build import build_item  # noqa: E402
from pytest_rvtune.harness.data_image import data_image  # noqa: E402
from pytest_rvtune.spec import load_kernel_module  # noqa: E402
from pytest_rvtune.targets.local import plugin_argument  # noqa: E402
from pytest_rvtune.toolchain import RISCV_ISA, qemu_command  # noqa: E402
from pytest_rvtune.tools import PLUGIN_CFLAGS  # noqa: E402

#: main before per-thread counting: its icount.c counts with an inline add per instruction.
BEFORE = "3e2fbd7514cbb0187d12d599251ad6878a75b308"
ICOUNT_C = "pytest_rvtune/targets/qemu_plugin/icount.c"
ITEMS = ("softmax:BLOCK_SIZE_M=4-BLOCK_SIZE_N=128",
         "matmul:BLOCK_SIZE_M=16-BLOCK_SIZE_N=16-BLOCK_SIZE_K=32-GROUP_SIZE_M=8")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def build_before(rev: str, out: Path) -> Path:
    source = out / "icount_before.c"
    source.write_text(subprocess.run(["git", "show", f"{rev}:{ICOUNT_C}"], cwd=REPO, capture_output=True, text=True,
                                     check=True).stdout)
    plugin = out / "libicount_before.so"
    subprocess.run(["gcc", *PLUGIN_CFLAGS, f"-I{paths.qemu_plugin_header().parent}", "-o", str(plugin), str(source)],
                   check=True)
    return plugin


def item_argv(item: str) -> tuple[Path, str, list[str], list[str]]:
    """(ELF, kernel symbol, argv with binary images, argv with text files) of ``kernel:config_id`` (emu case)."""
    kernel, _, config_id = item.partition(":")
    spec = load_kernel_module(REPO / "kernels" / f"{kernel}.py")
    config = next((dict(getattr(c, "kwargs", c)) for c in spec.configs
                   if spec.config_id(dict(getattr(c, "kwargs", c))) == config_id), None)
    if config is None:
        sys.exit(f"{item}: no config {config_id!r} in kernels/{kernel}.py")
    art = build_item(spec, "emu", config, isa=RISCV_ISA)
    images = [str(data_image(a)) if isinstance(a, Path) else a for a in art.argv]
    text = [str(a) for a in art.argv]
    return art.elf, art.kernel_symbol, images, text


def run_once(elf: Path, argv: list[str], plugin: str | None) -> float:
    """QEMU's CPU seconds (user + sys, all its threads)."""
    cmd = [*qemu_command(), *(["-plugin", plugin] if plugin else []), str(elf), *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", default=",".join(ITEMS), help="kernel:config_id,... (emu case)")
    parser.add_argument("--before", default=BEFORE, help="git revision of the plugin to compare with")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--launches", type=int, default=1, help="timed launches per run (sessions: 1)")
    args = parser.parse_args()
    after = paths.icount_plugin()
    if not after.is_file():
        sys.exit(f"{after} is missing: run `rvtune setup`")
    print(f"load before: {loadavg()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rvtune-icount-cost-") as tmp_name:
        tmp = Path(tmp_name)
        before = build_before(args.before, tmp)
        for item in args.items.split(","):
            elf, symbol, images, text = item_argv(item)
            for data, data_argv in (("images", images), ("text", text)):
                out = tmp / "icount.txt"

                def harness(threads: int, data_argv: list[str] = data_argv) -> list[str]:
                    return ["--warmup", "0", "--runs", str(args.launches), "--threads", str(threads), *data_argv]

                variants: dict[str, tuple[str | None, list[str]]] = {
                    "none": (None, harness(1)),
                    "before": (plugin_argument(before, out, symbol, tmp / "b"), harness(1)),
                    "after 1": (plugin_argument(after, out, symbol, tmp / "b", one_thread=True), harness(1)),
                    "after": (plugin_argument(after, out, symbol, tmp / "b"), harness(1)),
                    "after, --threads 2": (plugin_argument(after, out, symbol, tmp / "b"), harness(2)),
                }
                seconds: dict[str, list[float]] = {name: [] for name in variants}
                lines: dict[str, str] = {}
                for _ in range(args.repeats):  # interleaved: drift of the machine hits every variant alike
                    for name, (plugin, argv) in variants.items():
                        out.unlink(missing_ok=True)
                        seconds[name].append(run_once(elf, argv, plugin))
                        if plugin:
                            lines[name] = out.read_text().strip()
                base = statistics.median(seconds["none"])
                for name, values in seconds.items():
                    median = statistics.median(values)
                    rows.append([item.split(":")[0], data, name, f"{median:.3f}", f"{min(values):.3f}",
                                 f"{median / base:.2f}x", lines.get(name, "")])
                print(f"{item} ({data}) done; load {loadavg()}", file=sys.stderr, flush=True)
    print(tabulate(rows, headers=["kernel", "data", "plugin", "CPU s (median)", "CPU s (min)", "vs none",
                                  "the plugin's line"]))
    print(f"\n{args.repeats} repeats, {args.launches} launch(es) per run; load after: {loadavg()}")


if __name__ == "__main__":
    main()
