"""``rvtune golden generate|verify``: write the golden data of the kernel suite, or check it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.golden import GoldenError, Store, generate_case, golden_dir, verify_kernel
from pytest_rvtune.spec import KernelModuleError, KernelSpec, discover, load_kernel_module


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    golden = subparsers.add_parser("golden", help="generate or verify golden data (golden/, manifest.json)")
    sub = golden.add_subparsers(dest="golden_command", required=True, metavar="ACTION")
    for name, func, help_ in (
        ("generate", _generate, "write golden TXT files and the manifest from the kernels' references"),
        ("verify", _verify, "check every golden file against the manifest and the kernels (exit 1 on a problem)"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--kernel", action="append", metavar="K", help="only kernel K (repeatable)")
        p.add_argument("--case", action="append", metavar="C", help="only case C (repeatable)")
        p.add_argument("--kernels-dir", type=Path, default=_default_kernels_dir(), help="default: %(default)s")
        p.add_argument("--golden-dir", type=Path, default=None, help="committed data (default: golden/ beside it)")
        p.set_defaults(func=func)
    sub.choices["verify"].add_argument(
        "--quick", action="store_true", help="check hashes only; do not regenerate to detect drift"
    )


def _default_kernels_dir() -> Path:
    """./kernels when run in a project that has one, else this checkout's kernel suite."""
    here = Path("kernels")
    return here if here.is_dir() else paths.REPO_ROOT / "kernels"


def _specs(args: argparse.Namespace) -> list[KernelSpec]:
    found = {p.stem: p for p in discover(args.kernels_dir)}
    if not found:
        raise KernelModuleError(f"no kernel modules in {args.kernels_dir}")
    unknown = sorted(set(args.kernel or ()) - set(found))
    if unknown:
        raise KernelModuleError(f"no kernel module {unknown[0]!r} in {args.kernels_dir}; kernels: {sorted(found)}")
    return [load_kernel_module(found[k]) for k in (args.kernel or sorted(found))]


def _store(args: argparse.Namespace) -> Store:
    return Store(root=args.golden_dir or golden_dir(args.kernels_dir.resolve()))


def _cases(spec: KernelSpec, args: argparse.Namespace) -> list[str]:
    if not args.case:
        return list(spec.cases)
    missing = [c for c in args.case if c not in spec.cases]
    if missing and args.kernel:
        raise KernelModuleError(f"kernel {spec.name}: no case {missing[0]!r}; cases: {list(spec.cases)}")
    return [c for c in args.case if c in spec.cases]


def _generate(args: argparse.Namespace) -> int:
    try:
        store = _store(args)
        for spec in _specs(args):
            for case in _cases(spec, args):
                started = time.perf_counter()
                entry = generate_case(spec, case, store)
                nfiles = len({f["file"] for v in entry["variants"].values() for f in v["files"]})
                where = store.case_dir(spec.name, case)
                print(f"{spec.name} {case}: {nfiles} files, {len(entry['variants'])} variant(s) -> {where} "
                      f"({time.perf_counter() - started:.1f} s)")  # fmt: skip
    except (KernelModuleError, GoldenError) as e:
        print(f"rvtune golden generate: {e}", file=sys.stderr)
        return 2
    return 0


def _verify(args: argparse.Namespace) -> int:
    try:
        store = _store(args)
        problems: list[str] = []
        for spec in _specs(args):
            found = verify_kernel(spec, store, _cases(spec, args), regenerate=not args.quick)
            print(f"{spec.name}: {'ok' if not found else f'{len(found)} problem(s)'}")
            problems += found
    except (KernelModuleError, GoldenError) as e:
        print(f"rvtune golden verify: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"PROBLEM {p}", file=sys.stderr)
    return 1 if problems else 0
