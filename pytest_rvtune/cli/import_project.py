"""``rvtune import PATH``: configure a Triton_RVV-style checkout as a pytest-rvtune project, in place.

Writes the ``[triton_rvv]`` tables of ``PATH/rvtune.toml`` (other tables of an existing file, e.g. your boards'
``[targets]``, are kept with their comments: tomlkit edits the document rather than rewriting it), pointing at
the checkout's own files, and prints what it found and what it cannot use, each with why and the fix. Then
``cd PATH && pytest --rvtune-target qemu -k matmul`` runs every config.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from pytest_rvtune.compat.import_scan import CaseSpec, Scan, Spaces, scan
from pytest_rvtune.compat.project import PROJECT_FILE, TABLE, ProjectError, read_project


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("import", help="configure a Triton_RVV-style checkout as a pytest-rvtune project")
    p.add_argument("path", type=Path, help="the root of the checkout (e.g. with benchmark/src/triton/, or src/triton/)")
    p.add_argument("--case", action="append", default=[], metavar="[KERNEL/]NAME:K=V,...",
                   help="a problem case with the harness's argv fields and the config getter's parameters, e.g. "
                        "small:M=128,N=128,K=128,RUN_COUNT=2 (repeatable; without KERNEL/ it applies to every kernel "
                        "that takes all these names; a kernel without one gets the case 'default' with its "
                        "harness's built-in sizes)")
    p.add_argument("--space", action="append", default=[], metavar="KERNEL:KEY=V,...;KEY=V,...",
                   help="the values to tune for config keys of a kernel, instead of its getter's, e.g. "
                        "'fused_moe:BLOCK_SIZE_M=4,8,16,32,64' (widens or narrows; written into rvtune.toml as "
                        "the kernel's space, kept by later imports until given again)")
    p.add_argument("--dry-run", action="store_true", help="print what would be written; write nothing")
    p.set_defaults(func=run)


def parse_case(text: str) -> CaseSpec:
    """``[matmul/]small:M=64,N=64`` -> CaseSpec("small", {"M": 64, "N": 64}, "matmul"); ValueError naming the
    bad part."""
    head, sep, rest = text.partition(":")
    kernel, slash, name = head.rpartition("/")
    if not sep or not name.isidentifier() or (slash and not kernel.isidentifier()):
        raise ValueError(f"--case {text!r}: expected [KERNEL/]NAME:K=V,... (e.g. small:M=64,N=64,K=64,RUN_COUNT=3)")
    values: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip().isidentifier():
            raise ValueError(f"--case {text!r}: {part!r} is not K=V")
        try:
            values[key.strip()] = int(value)
        except ValueError:
            raise ValueError(f"--case {text!r}: {key.strip()}={value!r} is not an integer") from None
    return CaseSpec(name, values, kernel or None)


def parse_space(text: str) -> tuple[str, dict[str, list[int]]]:
    """``fused_moe:BLOCK_SIZE_M=4,8;BLOCK_SIZE_N=16`` -> ("fused_moe", {"BLOCK_SIZE_M": [4, 8], ...});
    ValueError naming the bad part."""
    kernel, sep, rest = text.partition(":")
    if not sep or not kernel.strip().isidentifier():
        raise ValueError(f"--space {text!r}: expected KERNEL:KEY=V,...;KEY=V,... (e.g. "
                         "fused_moe:BLOCK_SIZE_M=4,8,16,32,64)")
    space: dict[str, list[int]] = {}
    for clause in filter(None, (c.strip() for c in rest.split(";"))):
        key, eq, values = clause.partition("=")
        if not eq or not key.strip().isidentifier():
            raise ValueError(f"--space {text!r}: {clause!r} is not KEY=V1,V2,...")
        try:
            numbers = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"--space {text!r}: the values of {key.strip()} must be integers, got "
                             f"{values!r}") from None
        if not numbers:
            raise ValueError(f"--space {text!r}: {key.strip()} has no values")
        space[key.strip()] = list(dict.fromkeys(numbers))
    if not space:
        raise ValueError(f"--space {text!r}: no KEY=V,... after {kernel}:")
    return kernel.strip(), space


def existing_spaces(path: Path) -> Spaces:
    """The spaces an earlier import (or the user) wrote into ``path``: kept until --space gives one again."""
    try:
        doc = tomlkit.parse(path.read_text()).unwrap() if path.is_file() else {}
    except (OSError, tomlkit.exceptions.ParseError, UnicodeDecodeError):
        return {}  # _document() names an unreadable file
    kernels = doc.get(TABLE, {}).get("kernels", {}) if isinstance(doc.get(TABLE), dict) else {}
    out: Spaces = {}
    for name, entry in kernels.items() if isinstance(kernels, dict) else ():
        space = entry.get("space") if isinstance(entry, dict) else None
        if isinstance(space, dict) and all(isinstance(v, list) for v in space.values()):
            out[name] = {k: [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
                         for k, v in space.items()}
    return out


def existing_references(path: Path) -> dict[str, str]:
    """``reference = "<function>"`` of each entry of ``path`` (the user's choice of their Python reference where
    the import found none or several): kept by re-imports."""
    try:
        doc = tomlkit.parse(path.read_text()).unwrap() if path.is_file() else {}
    except (OSError, tomlkit.exceptions.ParseError, UnicodeDecodeError):
        return {}
    kernels = doc.get(TABLE, {}).get("kernels", {}) if isinstance(doc.get(TABLE), dict) else {}
    return {name: entry["reference"] for name, entry in (kernels.items() if isinstance(kernels, dict) else ())
            if isinstance(entry, dict) and isinstance(entry.get("reference"), str) and entry["reference"]}


def _per_harness(case: dict[str, Any], configs: list[Any]) -> str:
    """``: 2 on their harness (BLOCK_SIZE_M=4); 8 on our generic harness (BLOCK_SIZE_M=8,16,32,64)``."""
    key, variants = case.get("variant_key"), case.get("variants", {})
    chain = case.get("generic", {}).get("chain")
    if chain and case["generic"].get("harness") == "generic":  # compat/chain_plan.py
        return (f": one item each on our chain harness ({' -> '.join(chain)} in one ELF, every launch with the "
                "item's config)")
    if not key:
        return ""
    per: dict[str, list[int]] = {}
    for config in configs:
        value = config.values.get(key)
        per.setdefault(variants.get(str(value), {}).get("harness", "none"), []).append(value)
    shown = {"theirs": "their harness", "generic": "our generic harness", "none": "no data"}
    return ": " + "; ".join(f"{len(values)} on {shown[h]} ({key}={','.join(map(str, dict.fromkeys(values)))})"
                            for h, values in per.items())


def _fixed_configs(result: Scan, name: str, entry: dict[str, Any]) -> str:
    """A kernel without a config getter: its one config, from its launch's text or (computed values) from the
    launch its import-time code makes."""
    from pytest_rvtune.compat.fixed_configs import recorded_block_values
    from pytest_rvtune.compat.module_reader import read_module
    from pytest_rvtune.compat.triton_rvv_module import load_rvv_module

    if not entry["configs"]:
        function = entry["functions"][0]
        names = [p for p, constexpr in read_module(result.root / entry["module"]).kernels[function] if constexpr]
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # their import-time code prints its results
                module = load_rvv_module(result.root / entry["module"])
        except Exception as exc:  # the module's own error: shown as a finding, the import goes on
            result.problem(name, f"configs: {exc}")
            return ""
        values = recorded_block_values(module, function, names)
        space = entry.get("space", {})
        if values is None and names and all(n in space for n in names):
            values = {n: space[n][0] for n in names}  # the space gives them (and widens them at collection)
        if values is None:
            result.problem(name, f"{entry['module']}: {function}'s block values ({', '.join(names)}) are computed "
                                 "when its launch runs, and its module launches nothing on import: give them with "
                                 f"--space '{name}:{';'.join(n + '=<value>' for n in names)}'")
            return ""
        entry["configs"] = [values]
    shown = ", ".join(f"{k}={v}" for k, v in entry["configs"][0].items())
    return f"1 config: {shown}, the block values its launch uses"


def config_counts(result: Scan) -> dict[str, str]:
    """Per entry: how many configs its getter (and space) give for its first case, per harness when the data has
    variants (or why the getter cannot be called)."""
    from pytest_rvtune.compat.project_items import apply_space
    from pytest_rvtune.compat.triton_rvv_module import MissingGetterParameter, load_rvv_module, read_configs

    counts: dict[str, str] = {}
    for name, entry in list(result.table.get("kernels", {}).items()):
        case_name, case = next(iter(entry["cases"].items()))
        if not entry["config_getter"]:
            counts[name] = _fixed_configs(result, name, entry)
            if not entry["configs"]:  # no config to run: not written (the finding says what to give)
                del result.table["kernels"][name]
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # their getters print every config they make
                module = load_rvv_module(result.root / entry["module"])
                got = read_configs(module, entry["config_getter"], case["params"], entry.get("num_threads"))
        except MissingGetterParameter as exc:
            given = ",".join(f"{k}={v}" for k, v in case["params"].items())
            result.problem(name, f"configs: {exc.args[0].split(': give ')[0]}: give it in the case, e.g. `rvtune "
                                 f"import {result.root} --case {name}/{case_name}:{given},{exc.parameter}=<value>`")
            continue
        except Exception as exc:  # the module's own error: shown as a finding, the import goes on
            result.problem(name, f"configs: {exc}")
            continue
        try:
            configs = apply_space(got.configs, {k: tuple(v) for k, v in entry.get("space", {}).items()},
                                  f"[{TABLE}.kernels.{name}]")
        except ProjectError as exc:
            result.problem(name, f"space: {exc}")
            continue
        counts[name] = f"{len(configs)} configs" + _per_harness(case, configs)
        if got.duplicates:
            counts[name] += (f"; {entry['config_getter']}() listed {len(set(got.duplicates))} config(s) more than "
                             f"once (first {got.duplicates[0]}): each runs once")
    return counts


def _existing_cases(path: Path) -> list[CaseSpec]:
    """The cases an earlier import (or the user) wrote into rvtune.toml: a re-import without --case keeps them and
    pins their files anew, so "changed since it was pinned: run `rvtune import` again" loses nothing."""
    try:
        doc = tomlkit.parse(path.read_text()).unwrap() if path.is_file() else {}
    except (OSError, tomlkit.exceptions.ParseError, UnicodeDecodeError):
        return []  # _document() names an unreadable file
    kernels = doc.get(TABLE, {}).get("kernels", {}) if isinstance(doc.get(TABLE), dict) else {}
    out = []
    for kernel, entry in kernels.items() if isinstance(kernels, dict) else ():
        cases = entry.get("cases", {}) if isinstance(entry, dict) else {}
        for name, case in cases.items() if isinstance(cases, dict) else ():
            params = case.get("params") if isinstance(case, dict) else None
            if isinstance(params, dict):
                out.append(CaseSpec(name, dict(params), kernel))
    return out


class _UnreadableProjectFile(Exception):
    pass


def _document(path: Path, table: dict[str, Any]) -> tomlkit.TOMLDocument:
    try:
        doc = tomlkit.parse(path.read_text()) if path.is_file() else tomlkit.document()
    except (tomlkit.exceptions.ParseError, UnicodeDecodeError) as exc:
        # Never overwrite a file we cannot read: it may hold the user's boards.
        raise _UnreadableProjectFile(f"{path} is not valid TOML ({exc}): fix it (or move it away) and run "
                                     "`rvtune import` again; nothing was written") from None
    if TABLE not in doc:
        doc.add(tomlkit.comment("Written by `rvtune import`: this checkout as a pytest-rvtune project (the "
                                "[triton_rvv] tables point at its files in place; edit freely, re-import to refresh)."))
    doc[TABLE] = table
    return doc


def run(args: argparse.Namespace) -> int:
    try:
        root = args.path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: Python 3.11's "Symlink loop" (was a traceback)
        print(f"rvtune import: {args.path}: cannot be resolved ({exc}); give the checkout's directory",
              file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"rvtune import: {args.path}: no such directory", file=sys.stderr)
        return 2
    try:
        cases = [parse_case(c) for c in args.case]
        given = dict(parse_space(s) for s in args.space)
    except ValueError as exc:
        print(f"rvtune import: {exc}", file=sys.stderr)
        return 2
    if not cases:
        cases = _existing_cases(root / PROJECT_FILE)
    result = scan(root, cases, existing_spaces(root / PROJECT_FILE) | given, existing_references(root / PROJECT_FILE))
    for name in sorted(set(given) - set(result.table.get("kernels", {}))):
        result.problem(name, f"--space {name}:...: no kernel {name} was imported (kernels: "
                             f"{', '.join(result.table.get('kernels', {})) or 'none'})")
    counts = config_counts(result) if result.table.get("kernels") else {}
    print(f"rvtune import: {root}")
    for f in result.findings:
        extra = f" ({counts[f.subject]})" if f.ok and counts.get(f.subject) else ""
        print(f"  {'ok ' if f.ok else 'FIX'}  {f.subject}: {f.message}{extra}")
    if not result.table.get("kernels"):
        print("nothing to import: no kernel module with a config getter and a harness", file=sys.stderr)
        return 1
    target = root / PROJECT_FILE
    try:
        doc = _document(target, result.table)
    except _UnreadableProjectFile as exc:
        print(f"rvtune import: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(tomlkit.dumps(doc))
        return 0
    try:
        target.write_text(tomlkit.dumps(doc))
    except OSError as exc:
        print(f"rvtune import: cannot write {target}: {exc.strerror or exc}; fix its permissions (nothing was "
              "written)", file=sys.stderr)
        return 2
    try:
        read_project(target)  # what we wrote must load: a bug here is ours, say so now rather than at pytest time
    except ProjectError as exc:
        print(f"rvtune import: wrote {target}, but it does not load: {exc}", file=sys.stderr)
        return 1
    names = list(result.table["kernels"])
    print(f"wrote {target} ({', '.join(names)}). Run: cd {root} && pytest --rvtune-target qemu -k {names[0]}")
    return 0 if all(f.ok for f in result.findings) else 1
