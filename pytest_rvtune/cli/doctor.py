"""`rvtune doctor`: is everything pytest-rvtune needs here, and does it work?

Lists every tool with its version and path, then proves the pieces work together: QEMU runs a real
rv64gcv VLEN-256 vector program (cross-built with toolchain.py) and gets the right answer, the instruction-count
plugin counts it, and every configured target runs the same probe program. Every missing piece is named with
the command that fixes it (`apt-get install ...` for a Debian tool, `rvtune setup` for the plugin); the exit code
is 1 if anything is missing or broken.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from pytest_rvtune import paths
from pytest_rvtune.targets.base import RunResult, Target
from pytest_rvtune.toolchain import DEBIAN_PACKAGES, RISCV_ISA, RISCV_VLEN, Toolchain, ToolchainError
from pytest_rvtune.tools import plugin_state

#: The fix for the helper tools pytest-rvtune builds itself (the QEMU plugin).
FIX = "rvtune setup"
#: The fix of a check that failed because a tool listed above is missing.
FIX_TOOLS_ABOVE = "install the missing tools above"
#: Python packages that only one feature needs: their absence is reported, not counted as a problem.
OPTIONAL_PACKAGES = {"asyncssh": "boards", "labgrid": "labgrid", "matplotlib": "plots"}  # distribution -> its extra
#: Seconds `rvtune doctor` waits for a labgrid place others hold (a session waits the target's reserve_timeout).
DOCTOR_RESERVE_S = 10.0
PROBE_SYMBOL = "rvtune_doctor_kernel"
PROBE_N = 100
PROBE_TIMEOUT_S = 60.0

# Real RVV code via intrinsics (not left to the vectorizer), checking both the sum and that the hardware or
# emulator VLEN is what the build assumes; on the host the same source runs a scalar loop.
PROBE_SOURCE = f"""
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#ifdef __riscv_vector
#include <riscv_vector.h>
#endif

__attribute__((noinline)) void {PROBE_SYMBOL}(const int32_t *a, const int32_t *b, int32_t *c, size_t n) {{
#ifdef __riscv_vector
    for (size_t i = 0; i < n;) {{
        size_t vl = __riscv_vsetvl_e32m1(n - i);
        vint32m1_t va = __riscv_vle32_v_i32m1(a + i, vl);
        vint32m1_t vb = __riscv_vle32_v_i32m1(b + i, vl);
        __riscv_vse32_v_i32m1(c + i, __riscv_vadd_vv_i32m1(va, vb, vl), vl);
        i += vl;
    }}
#else
    for (size_t i = 0; i < n; i++) c[i] = a[i] + b[i];
#endif
}}

int main(void) {{
    int32_t a[{PROBE_N}], b[{PROBE_N}], c[{PROBE_N}];
    for (int i = 0; i < {PROBE_N}; i++) {{ a[i] = i; b[i] = 2 * i; c[i] = -1; }}
    {PROBE_SYMBOL}(a, b, c, {PROBE_N});
    long sum = 0;
    for (int i = 0; i < {PROBE_N}; i++) sum += c[i];
    int ok = sum == {3 * PROBE_N * (PROBE_N - 1) // 2};
#ifdef __riscv_vector
    size_t vlmax = __riscv_vsetvlmax_e32m1();
    printf("vlmax_e32m1=%zu\\n", vlmax);
    ok = ok && vlmax == {RISCV_VLEN // 32};
#endif
    printf("sum=%ld\\nRVTUNE sample 1\\n", sum);
    printf("RVTUNE check probe %s max_abs=0 max_rel=0 first_bad=%d count={PROBE_N}\\n", ok ? "ok" : "bad",
           ok ? -1 : 0);
    return ok ? 0 : 1;
}}
"""


@dataclass
class Row:
    what: str
    ok: bool
    detail: str
    path: str = ""
    fix: str = f"run `{FIX}`"  # what the headline tells the user to do when this row failed
    apt: str = ""  # the Debian package that fixes it (the headline gathers them into one apt-get command)


def _apt_row(what: str, detail_prefix: str, package: str) -> Row:
    return Row(what, False, f"{detail_prefix}: `apt-get install {package}`", apt=package)


def _first_line(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
    except OSError as exc:
        return f"cannot run: {exc}"
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def _which(name: str, extra_dirs: tuple[str, ...] = ()) -> str | None:
    # sshd lives in /usr/sbin, which a non-root PATH may lack.
    path = os.environ.get("PATH", "")
    return shutil.which(name, path=os.pathsep.join([path, *extra_dirs]) if extra_dirs else path)


def tool_rows() -> list[Row]:
    rows: list[Row] = []
    tools: list[tuple[str, list[str], tuple[str, ...]]] = [
        ("clang-19", ["--version"], ()),
        ("ld.lld-19", ["--version"], ()),
        ("llvm-objdump-19", ["--version"], ()),
        ("qemu-riscv64", ["--version"], ()),
        ("riscv64-linux-gnu-gcc", ["--version"], ()),
        ("sshd", ["-V"], ("/usr/sbin",)),
        ("perf", ["--version"], ()),
    ]
    for name, version_args, extra in tools:
        path = _which(name, extra)
        if path is None:
            rows.append(_apt_row(name, "missing", DEBIAN_PACKAGES[name]))
        else:
            rows.append(Row(name, True, _first_line([path, *version_args]), path))
    # Static rv64 links need the cross C library, not just the compiler driver.
    libc = Path("/usr/riscv64-linux-gnu/lib/libc.a")
    gcc_cross = sorted(Path("/usr/lib/gcc-cross/riscv64-linux-gnu").glob("*"))
    if libc.is_file() and gcc_cross:
        rows.append(Row("riscv64 sysroot", True, f"gcc-cross {gcc_cross[-1].name}", str(libc.parent.parent)))
    else:
        rows.append(_apt_row("riscv64 sysroot", "missing", "g++-riscv64-linux-gnu"))
    for dist, module in (("triton", "triton"), ("torch", "torch"), ("pytest-benchmark", "pytest_benchmark"),
                         ("asyncssh", "asyncssh"), ("labgrid", "labgrid"), ("matplotlib", "matplotlib")):
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            if dist in OPTIONAL_PACKAGES:
                feature = OPTIONAL_PACKAGES[dist]
                rows.append(Row(dist, True, f"not installed: needed only for the [{feature}] extra's features "
                                            f"(pip install 'pytest-rvtune[{feature}]')"))
            else:
                rows.append(Row(dist, False, "python package missing", fix="run `pip install pytest-rvtune` (it "
                                "requires every such package)"))
            continue
        spec = importlib.util.find_spec(module)
        rows.append(Row(dist, True, version, str(Path(spec.origin).parent) if spec and spec.origin else ""))
    plugin, state = paths.icount_plugin(), plugin_state()
    detail = {"ok": "built", "missing": f"missing: run `{FIX}`",
              "stale": f"out of date (icount.c, qemu-plugin.h or the flags changed): run `{FIX}`"}[state]
    rows.append(Row("QEMU icount plugin", state == "ok", detail, str(plugin)))
    return rows


class ProbeBuilder:
    """Builds the probe program once per ISA; a build failure is remembered as its message."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.elves: dict[str, Path | str] = {}

    def elf(self, isa: str) -> Path | str:
        if isa not in self.elves:
            self.elves[isa] = self._build(isa)
        return self.elves[isa]

    def _build(self, isa: str) -> Path | str:
        src = self.workdir / "probe.c"
        src.write_text(PROBE_SOURCE)
        obj, elf = self.workdir / f"probe-{isa}.o", self.workdir / f"probe-{isa}.elf"
        try:
            tc = Toolchain.for_isa(isa)
            tc.compile(src, obj)
            tc.link([obj], elf)
        except ToolchainError as exc:
            return f"cannot build the {isa} probe: {exc}"
        return elf


def _verdict(result: RunResult) -> tuple[bool, str]:
    if result.timed_out:
        return False, f"timed out after {PROBE_TIMEOUT_S:.0f} s"
    if result.returncode == 0 and result.all_checks_ok:
        return True, "right answer"
    detail = f"exit {result.returncode}" if result.signal is None else f"killed by signal {result.signal}"
    output = (result.stdout + result.stderr).strip().splitlines()
    return False, f"wrong answer or failure ({detail}): {' | '.join(output[-3:])}"


def qemu_rows(builder: ProbeBuilder) -> list[Row]:
    from pytest_rvtune.targets.local import QemuTarget, TargetSetupError

    elf = builder.elf(RISCV_ISA)
    if isinstance(elf, str):
        return [Row("QEMU rv64gcv VLEN 256", False, elf, fix=FIX_TOOLS_ABOVE)]
    rows: list[Row] = []
    try:
        plain = QemuTarget(counters=False).run(elf, [], PROBE_TIMEOUT_S)
    except ToolchainError as exc:
        return [Row("QEMU rv64gcv VLEN 256", False, str(exc), fix=FIX_TOOLS_ABOVE)]
    ok, detail = _verdict(plain)
    rows.append(Row("QEMU rv64gcv VLEN 256", ok, detail))
    try:
        counted = QemuTarget().run(elf, [], PROBE_TIMEOUT_S, kernel_symbol=PROBE_SYMBOL)
    except TargetSetupError as exc:
        return [*rows, Row("QEMU icount plugin counts", False, str(exc))]
    c = counted.counters
    counts_ok = c.get("vector_insns", 0) > 0 and c.get("kernel_insns", 0) > 0
    detail = ", ".join(f"{k}={int(v)}" for k, v in c.items()) or "no counts written"
    rows.append(Row("QEMU icount plugin counts", counts_ok,
                    detail if counts_ok else f"{detail}: expected nonzero vector and kernel counts; run `{FIX}`"))
    return rows


def _configured_targets(rootdir: Path) -> dict[str, tuple[Callable[[], Target], str]]:
    """name -> (factory, fix): the built-ins, fixed by the tools above, and the configured boards, fixed in their
    own entry of the configuration file."""
    from pytest_rvtune.targets import config
    from pytest_rvtune.targets.factory import make_target

    targets: dict[str, tuple[Callable[[], Target], str]] = {}
    for name, cfg in config.load_targets(rootdir).items():
        fix = (f"install any tool missing above, then run `{FIX}`" if cfg.kind == "builtin" else
               f"check {cfg.where()} (host, port, user, key, known_hosts) and that the board answers ssh")
        if cfg.kind == "labgrid":  # a place others hold is a finding, not an hour's wait
            cfg = dataclasses.replace(cfg, reserve_timeout=min(cfg.reserve_timeout, DOCTOR_RESERVE_S))
            fix = (f"check {cfg.where()} (coordinator, place or tags, key, known_hosts), the place's NetworkService "
                   "(labgrid-client -p PLACE show) and who holds it (labgrid-client who)")
        targets[name] = (functools.partial(make_target, cfg, worker_id="doctor"), fix)
    return targets


def target_rows(builder: ProbeBuilder, rootdir: Path) -> list[Row]:
    try:
        targets = _configured_targets(rootdir)
    except Exception as exc:  # a broken config file: name it, keep checking the rest
        return [Row("target configuration", False, str(exc), fix="correct the configuration file it names")]
    rows: list[Row] = []
    for name, (factory, fix) in targets.items():
        try:
            target = factory()
        except Exception as exc:
            rows.append(Row(f"target {name}", False, f"cannot open: {exc}", fix=fix))
            continue
        try:
            elf = builder.elf(target.isa)
            if isinstance(elf, str):
                rows.append(Row(f"target {name}", False, elf, fix=FIX_TOOLS_ABOVE))
                continue
            target.prepare([])
            ok, detail = _verdict(target.run(elf, [], PROBE_TIMEOUT_S, kernel_symbol=PROBE_SYMBOL))
            rows.append(Row(f"target {name}", ok, f"{target.isa}: {detail}", fix=fix))
        except Exception as exc:  # an unreachable board: report it, check the others
            rows.append(Row(f"target {name}", False, f"{type(exc).__name__}: {exc}", fix=fix))
        finally:
            target.close()
    return rows


def cache_rows() -> list[Row]:
    """The cache, every entry checked against what it held when made (a damaged ELF was served as a hit and its
    crash blamed on the kernel while doctor said everything was in place)."""
    from pytest_rvtune.cache_check import check_cache
    root = paths.cache_dir()
    if not root.is_dir():
        return [Row("cache", True, f"{root}: empty (made at first use)")]
    found = check_cache(root)
    bad = len(found.damaged) + len(found.counts_damaged)
    detail = (f"{root}: {found.intact} build entries and {found.counts_intact} count records intact, {bad} damaged"
              + (f" (first: {(found.damaged or found.counts_damaged)[0][0]})" if bad else ""))
    return [Row("cache", bad == 0, detail,
                fix="run `rvtune cache verify` (removes them; they are made again at their next use)")]


def run_doctor(rootdir: Path) -> int:
    rows = tool_rows()
    with tempfile.TemporaryDirectory(prefix="rvtune-doctor-") as tmp:
        builder = ProbeBuilder(Path(tmp))
        checks = qemu_rows(builder) + target_rows(builder, rootdir) + cache_rows()
    print(tabulate([(r.what, "ok" if r.ok else "MISSING", r.detail, r.path) for r in rows],
                   headers=["tool", "status", "version", "path"]))
    print()
    print(tabulate([(r.what, "ok" if r.ok else "FAILED", r.detail) for r in checks],
                   headers=["check", "status", "detail"]))
    bad = [r for r in rows + checks if not r.ok]
    print()
    if bad:
        print(f"rvtune doctor: {len(bad)} problem(s). Fix: {_fixes(bad)}; then rerun `rvtune doctor`")
        return 1
    print("rvtune doctor: everything is in place")
    return 0


def _fixes(bad: list[Row]) -> str:
    """One clause per fix naming what it fixes; every missing Debian package in one apt-get command."""
    by_fix: dict[str, list[str]] = {}
    packages = list(dict.fromkeys(r.apt for r in bad if r.apt))
    if packages:
        by_fix[f"run `apt-get install {' '.join(packages)}` (a pytest-rvtune checkout's `make setup` does this)"] = [
            r.what for r in bad if r.apt]
    for r in bad:
        if not r.apt:
            by_fix.setdefault(r.fix, []).append(r.what)
    return "; ".join(f"{', '.join(whats)}: {fix}" for fix, whats in by_fix.items())


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("doctor", help="check tools, QEMU, the instruction-count plugin and every target")
    p.add_argument("--rootdir", type=Path, default=Path.cwd(),
                   help="project directory whose target configuration is checked (default: current directory)")
    p.set_defaults(func=lambda args: run_doctor(args.rootdir))
