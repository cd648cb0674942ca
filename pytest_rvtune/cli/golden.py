"""``rvtune golden generate|verify|import``: write the golden data of the kernel suite, check it, or adopt
existing TXT files (e.g. Triton_RVV's test_data) as a case's data."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.golden import (
    GoldenError,
    Store,
    generate_case,
    golden_dir,
    import_for_kernel,
    is_imported,
    verify_kernel,
)
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
    imp = sub.add_parser(
        "import",
        help="adopt existing TXT files as one case's inputs and expected outputs: copied into golden/<kernel>/"
        "<case>/, pinned by sha256, never regenerated",
    )
    imp.add_argument("--kernel", required=True, metavar="K", help="the kernel module's name")
    imp.add_argument("--case", required=True, metavar="C", help="a case of its CASES (gives scalars and grid)")
    imp.add_argument("--variant", default="", metavar="KEY=V,...",
                     help="the data variant the files are for, when the kernel has VARIANT_KEYS")  # fmt: skip
    imp.add_argument("--input", action="append", default=[], metavar="TENSOR=PATH",
                     help="a file the kernel reads; TENSOR is its name in make_inputs' dict (repeatable)")  # fmt: skip
    imp.add_argument("--expected", action="append", default=[], metavar="TENSOR=PATH",
                     help="what the kernel must write into TENSOR (repeatable)")  # fmt: skip
    imp.add_argument("--kernels-dir", type=Path, default=_default_kernels_dir(), help="default: %(default)s")
    imp.add_argument("--golden-dir", type=Path, default=None, help="committed data (default: golden/ beside it)")
    imp.set_defaults(func=_import)


def _default_kernels_dir() -> Path:
    """./kernels when run in a project that has one, else the project root's."""
    here = Path("kernels")
    return here if here.is_dir() else paths.project_root() / "kernels"


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
            recorded = store.load_manifest(spec.name, writing=True)["cases"]
            for case in _cases(spec, args):
                if is_imported(recorded.get(case)):
                    print(f"{spec.name} {case}: imported data, kept (`rvtune golden import` replaces it)")
                    continue
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


def _pairs(option: str, values: list[str]) -> dict[str, Path]:
    """``TENSOR=PATH`` options as a dict; a malformed or repeated one is a usage error naming it."""
    out: dict[str, Path] = {}
    for value in values:
        tensor, sep, path = value.partition("=")
        if not sep or not tensor or not path:
            raise GoldenError(f"{option} {value!r}: expected TENSOR=PATH, e.g. {option} a=matrix_1024x1024_1.txt")
        if tensor in out:
            raise GoldenError(f"{option} {value!r}: tensor {tensor!r} is given twice")
        out[tensor] = Path(path)
    return out


def _variant(text: str) -> dict[str, str]:
    variant: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise GoldenError(f"--variant {text!r}: expected KEY=V,..., e.g. --variant BLOCK_SIZE_M=16")
        variant[key] = value
    return variant


def _import(args: argparse.Namespace) -> int:
    try:
        inputs, expected = _pairs("--input", args.input), _pairs("--expected", args.expected)
        both = sorted(set(inputs) & set(expected))
        if both:
            raise GoldenError(f"tensor {both[0]!r} is given as --input and as --expected: a tensor has one file")
        if not expected:
            raise GoldenError("no --expected TENSOR=PATH: nothing would check the kernel's output")
        store = _store(args)
        (spec,) = _specs(argparse.Namespace(kernels_dir=args.kernels_dir, kernel=[args.kernel]))
        roles = {t: "input" for t in inputs} | {t: "expected" for t in expected}
        entry = import_for_kernel(spec, store, args.case, _variant(args.variant), inputs | expected, roles)
    except (KernelModuleError, GoldenError) as e:
        print(f"rvtune golden import: {e}", file=sys.stderr)
        return 2
    where = store.case_dir(spec.name, args.case, imported=True)
    print(f"{spec.name} {args.case}: imported {len(roles)} files -> {where}")
    for vid, v in entry["variants"].items():  # the whole case: variants imported before are kept
        for f in v["files"]:
            shape = "x".join(map(str, f["shape"]))
            print(f"  {vid or '-'} {f['tensor']} ({f['role']}, {f['dtype']} {shape}): {f['file']} "
                  f"<- {f['imported_from']} sha256 {f['sha256'][:16]}")  # fmt: skip
    return 0
