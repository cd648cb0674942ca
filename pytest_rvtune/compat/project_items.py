"""One item of a Triton_RVV project: entry x case x config -> its data, its ELF, its argv. No pytest here.

The kernels of the entry are compiled with the item's config plus the integer-1 specialisations of the
signature table (so each ``<kernel>_wrap`` takes the arguments their harness passes), then linked with their
harness and support library unchanged (harness/external.py). The harness reads its data from paths relative to
its working directory, so the run places the case's files at those paths (``files`` of the target's run).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_rvtune.compat.project import ProjectError, RvvCase, RvvEntry, RvvProject, RvvVariant
from pytest_rvtune.compat.triton_rvv_module import RvvConfig, jit_kernel, load_configs, load_rvv_module
from pytest_rvtune.hashing import sha256_file


class ProjectDataError(Exception):
    """Data a harness needs is missing or changed since it was pinned: names the file and the fix."""


@dataclass(frozen=True)
class ProjectData:
    files: dict[str, Path]  # path relative to the harness's working directory -> the file
    sha256: str  # one hash over every file's hash: the results' golden_sha256


@dataclass(frozen=True)
class ProjectArtifact:
    elf: Path
    elf_sha256: str
    argv: list[str]
    cache_hit: bool
    kernel_symbol: str  # the first kernel: what the QEMU counter plugin counts
    launches: int | None  # RUN_COUNT when the case gives it: their harnesses launch that many times
    asm: Path | None = None


@functools.lru_cache(maxsize=32)
def _module(path: Path, mtime_ns: int, size: int) -> ModuleType:
    """A kernel module executed once per process and version of its file: collection and every item's build
    would otherwise run the user's module-level code again (150 times for their matmul)."""
    return load_rvv_module(path)


def _loaded(path: Path) -> ModuleType:
    stat = path.stat()
    return _module(path, stat.st_mtime_ns, stat.st_size)


def entry_configs(entry: RvvEntry, case: RvvCase) -> list[RvvConfig]:
    """The entry's configs for a case: its getter called with the case's values (their getters take sizes),
    then its ``space`` applied."""
    if not entry.config_getter:  # fixed block sizes: the values their launch uses (fixed_configs.py)
        return apply_space([RvvConfig(dict(c), None) for c in entry.configs], entry.space, entry.where)
    module = _loaded(entry.module)
    return apply_space(load_configs(module, entry.config_getter, case.params, entry.num_threads), entry.space,
                       entry.where)


def apply_space(configs: list[RvvConfig], space: dict[str, tuple[int, ...]], where: str = "") -> list[RvvConfig]:
    """Each config with the space's keys taking every value of the space instead of the getter's (a space
    narrows or widens the getter's configs); the same config twice is kept once, in first-seen order."""
    if not space:
        return configs
    keys = {k for c in configs for k in c.values}
    unknown = sorted(set(space) - keys)
    if unknown:
        raise ProjectError(f"{where}: space key {', '.join(unknown)} is in no config of the getter (keys: "
                           f"{', '.join(sorted(keys))}): a space sets the values of the getter's own keys")
    out: dict[tuple[Any, ...], RvvConfig] = {}
    for config in configs:
        for combo in itertools.product(*space.values()):
            values = {**config.values, **dict(zip(space, combo, strict=True))}
            out.setdefault((tuple(values.items()), config.num_threads), RvvConfig(values, config.num_threads))
    return list(out.values())


def item_variant(case: RvvCase, config: RvvConfig) -> RvvVariant | None:
    """The config's variant data (None: the case's data is the same for every config)."""
    return case.variant(config.values)


def project_data(project: RvvProject, entry: RvvEntry, case: RvvCase, config: RvvConfig | None = None
                 ) -> ProjectData:
    """The item's data files, checked against the hashes pinned at import (drift is an error, not a pass).
    ``files`` maps the path the harness opens to the file: for a variant their harness runs, the value's own
    file at the path the harness opens; for one our generic harness runs, each file at its own path."""
    variant = item_variant(case, config) if config is not None else None
    if variant is None:
        return _checked(project, entry, case.name, {rel: rel for rel in entry.data_for(case)}, case.sha256)
    what = case.name if case.variant_key is None else f"{case.name}, {case.variant_key}={variant.value}"
    if variant.harness == "none":
        raise ProjectDataError(f"{entry.name} [case {what}]: {variant.why}")
    opened = variant.files if variant.harness == "theirs" else {f: f for f in _variant_files(variant)}
    return _checked(project, entry, what, opened, variant.sha256)


def _variant_files(variant: RvvVariant) -> list[str]:
    return sorted({v for v in variant.args.values() if isinstance(v, str)} | set(variant.expected.values()))


def _checked(project: RvvProject, entry: RvvEntry, what: str, opened: dict[str, str],
             pins: dict[str, str]) -> ProjectData:
    files: dict[str, Path] = {}
    digests: dict[str, str] = {}
    for at, rel in opened.items():
        path = project.run_dir / rel
        if not path.is_file():
            raise ProjectDataError(
                f"{entry.name} [case {what}]: the harness reads {path}, which does not exist: write it (e.g. "
                "with your module's save_matrices_to_txt: inputs, then the expected output) and run "
                f"`rvtune import {project.root}` again to pin it")
        digest = sha256_file(path)
        pinned = pins.get(rel)
        if pinned is None:
            raise ProjectDataError(
                f"{entry.name} [case {what}]: {path} is not pinned in {project.file}: run `rvtune import "
                f"{project.root}` to record its sha256 (a result must say which data it was checked against)")
        if pinned != digest:
            raise ProjectDataError(
                f"{entry.name} [case {what}]: {path} changed since it was pinned (sha256 {digest[:12]}, "
                f"pinned {pinned[:12]}): if the new data is right, run `rvtune import {project.root}` again (it "
                f"keeps the cases of {project.file.name} and pins their files anew)")
        files[at] = path
        digests[at] = digest
    combined = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()
    return ProjectData(files, combined)


def build_project_item(project: RvvProject, entry: RvvEntry, case: RvvCase, config: RvvConfig,
                       isa: str) -> ProjectArtifact:
    """Compile every kernel of the entry with ``config`` and link them with the entry's harness."""
    from pytest_rvtune.compiler.api import compile_kernel
    from pytest_rvtune.harness.external import build_external_elf

    module = _loaded(entry.module)
    compiled = []
    for function in entry.functions:
        fn = jit_kernel(module, function)
        constexprs: dict[str, Any] = {**entry.specialised(function), **_own_constexprs(fn, config)}
        compiled.append(compile_kernel(fn, entry.runtime_signature(function), constexprs, isa))
    elf = build_external_elf(isa, compiled, entry.harness, project.support_sources, project.include_dirs,
                             project.defines)
    return ProjectArtifact(elf=elf.elf, elf_sha256=elf.sha256, argv=entry.argv_for(case), cache_hit=elf.cache_hit,
                           kernel_symbol=entry.functions[0], asm=elf.asm, launches=_run_count(case))


def _own_constexprs(fn: Any, config: RvvConfig) -> dict[str, Any]:
    """The config values this kernel declares: one config drives several kernels of a harness (their
    attention), and a kernel without one of the keys simply does not take it."""
    names = {p.name for p in fn.params if p.is_constexpr}
    missing = names - set(config.values)
    if missing:
        raise ValueError(f"kernel {fn.__name__}: config {config.id} gives no {', '.join(sorted(missing))} "
                         "(its tl.constexpr parameters must all come from the config getter)")
    return {k: v for k, v in config.values.items() if k in names}


def _run_count(case: RvvCase) -> int | None:
    value = case.params.get("RUN_COUNT")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


#: Their harness's check when the entry gives no tolerance: support.h's ``check_tensor(..., threshold = 1e-4)``
#: (absolute only) at their July 2025 revision; our generic harness checks the same way (rtol 0).
DEFAULT_TOLERANCE = {"atol": 1e-4, "rtol": 0.0}


@dataclass(frozen=True)
class GenericArtifact:
    """Their kernel built into our generic harness for one config (argv: files as Path, for the target)."""

    elf: Path
    elf_sha256: str
    argv: list[str | Path]
    cache_hit: bool
    kernel_symbol: str


def build_generic_item(project: RvvProject, entry: RvvEntry, config: RvvConfig, variant: RvvVariant,
                       isa: str) -> GenericArtifact:
    """Record their launch for ``config`` on the variant's data, compile their kernel with the same signature
    their harness's build uses, and link it with our generic harness."""
    from pytest_rvtune.build import harness_object, link_elf
    from pytest_rvtune.compat.generic_run import record_launch, with_reference_expected
    from pytest_rvtune.compiler.api import compile_kernel
    from pytest_rvtune.harness import generate as generic
    from pytest_rvtune.toolchain import Toolchain

    module = _loaded(entry.module)
    function = entry.functions[0]
    if variant.reference_outputs:  # no expected file of theirs: their Python reference computes it
        key = hashlib.sha256(json.dumps([variant.reference, variant.args, variant.sha256],
                                        sort_keys=True).encode()).hexdigest()[:16]
        variant = with_reference_expected(module, entry, variant, project.run_dir,
                                          project.root / ".rvtune" / "reference" / entry.name / key)
    launch = record_launch(module, entry, function, variant, config, project.run_dir)
    fn = jit_kernel(module, function)
    constexprs: dict[str, Any] = {**entry.specialised(function), **_own_constexprs(fn, config)}
    compiled = compile_kernel(fn, entry.runtime_signature(function), constexprs, isa, consts_object=False)
    tc = Toolchain.for_isa(isa)
    harness_obj, _ = harness_object(tc, function, Path(compiled.header), None, launch.args)
    elf, _, hit = link_elf(tc, [*compiled.objects, harness_obj], function, cxx=False)
    tolerance = {**DEFAULT_TOLERANCE, **entry.tolerance}
    argv = generic.argv(launch.args, launch.grid, launch.scalars, launch.inputs, launch.expected,
                        tolerance["atol"], tolerance["rtol"])
    return GenericArtifact(elf, sha256_file(elf), argv, hit and bool(getattr(compiled, "cache_hit", True)), function)


def build_chain_item(project: RvvProject, entry: RvvEntry, config: RvvConfig, variant: RvvVariant,
                     isa: str) -> GenericArtifact:
    """A chain of their kernels (variant.chain, in their launch order) for one config: their Python reference
    computes the final output(s) where no expected file exists, their launch function is recorded on the
    variant's data, every kernel is compiled with the config and linked with one generated chain harness."""
    from pytest_rvtune.build import BUILD_VERSION, compile_object, link_elf
    from pytest_rvtune.compat.chain_run import bind_chain, record_chain
    from pytest_rvtune.compat.generic_run import with_reference_expected
    from pytest_rvtune.compiler.api import compile_kernel
    from pytest_rvtune.compiler.cache import cache_key
    from pytest_rvtune.harness import HEADER, HEADER_DIR
    from pytest_rvtune.harness import chain as chain_c
    from pytest_rvtune.toolchain import Toolchain

    module = _loaded(entry.module)
    if variant.reference_outputs:
        key = hashlib.sha256(json.dumps([variant.reference, variant.args, variant.sha256],
                                        sort_keys=True).encode()).hexdigest()[:16]
        variant = with_reference_expected(module, entry, variant, project.run_dir,
                                          project.root / ".rvtune" / "reference" / entry.name / key)
    log, tensors = record_chain(module, entry, variant, config, project.run_dir)
    chain = bind_chain(module, entry, variant, config, log, tensors, project.run_dir)
    tc = Toolchain.for_isa(isa)
    objects: list[Path] = []
    shown: list[tuple[str, Path]] = []
    headers: list[Path] = []
    hits: list[bool] = []
    for function in chain.kernels:
        fn = jit_kernel(module, function)
        constexprs: dict[str, Any] = {**entry.specialised(function), **_own_constexprs(fn, config)}
        compiled = compile_kernel(fn, entry.runtime_signature(function), constexprs, isa, consts_object=False)
        objects += compiled.objects
        shown.append((function, compiled.kernel_obj))
        headers.append(Path(compiled.header).parent)
        hits.append(bool(getattr(compiled, "cache_hit", True)))
    source = chain_c.generate(chain)
    key = cache_key(kind="chain-harness", version=BUILD_VERSION, source=source, support=HEADER.read_text(),
                    launchers=[(h / f"{k}_launcher.h").read_text() for h, k in zip(headers, chain.kernels,
                                                                                   strict=True)],
                    toolchain=tc.fingerprint(), driver=tc.cc)
    harness_obj, _ = compile_object(tc, "harness", key, f"{chain.name}_harness.c", source,
                                    [HEADER_DIR, *dict.fromkeys(headers)], ())
    elf, _, hit = link_elf(tc, [*dict.fromkeys(objects), harness_obj], chain.name, cxx=False, kernels=shown)
    tolerance = {**DEFAULT_TOLERANCE, **entry.tolerance}
    return GenericArtifact(elf, sha256_file(elf), chain_c.argv(chain, tolerance["atol"], tolerance["rtol"]),
                           hit and all(hits), chain.name)
