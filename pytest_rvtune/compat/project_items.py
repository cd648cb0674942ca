"""One item of a Triton_RVV project: entry x case x config -> its data, its ELF, its argv. No pytest here.

The kernels of the entry are compiled with the item's config plus the integer-1 specialisations of the
signature table (so each ``<kernel>_wrap`` takes the arguments their harness passes), then linked with their
harness and support library unchanged (harness/external.py). The harness reads its data from paths relative to
its working directory, so the run places the case's files at those paths (``files`` of the target's run).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_rvtune.compat.project import RvvCase, RvvEntry, RvvProject
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
    """The entry's configs for a case: its getter called with the case's values (their getters take sizes)."""
    module = _loaded(entry.module)
    return load_configs(module, entry.config_getter, case.params, entry.num_threads)


def project_data(project: RvvProject, entry: RvvEntry, case: RvvCase) -> ProjectData:
    """The case's data files, checked against the hashes pinned at import (drift is an error, not a pass)."""
    files: dict[str, Path] = {}
    digests: dict[str, str] = {}
    for rel in entry.data_for(case):
        path = project.run_dir / rel
        if not path.is_file():
            raise ProjectDataError(
                f"{entry.name} [case {case.name}]: the harness reads {path}, which does not exist: write it (e.g. "
                "with your module's save_matrices_to_txt: inputs, then the expected output) and run "
                f"`rvtune import {project.root}` again to pin it")
        digest = sha256_file(path)
        pinned = case.sha256.get(rel)
        if pinned is None:
            raise ProjectDataError(
                f"{entry.name} [case {case.name}]: {path} is not pinned in {project.file}: run `rvtune import "
                f"{project.root}` to record its sha256 (a result must say which data it was checked against)")
        if pinned != digest:
            raise ProjectDataError(
                f"{entry.name} [case {case.name}]: {path} changed since it was pinned (sha256 {digest[:12]}, "
                f"pinned {pinned[:12]}): if the new data is right, run `rvtune import {project.root}` again (it "
                f"keeps the cases of {project.file.name} and pins their files anew)")
        files[rel] = path
        digests[rel] = digest
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
