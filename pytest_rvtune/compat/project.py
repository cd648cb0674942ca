"""A Triton_RVV checkout as a pytest-rvtune project: the ``[triton_rvv]`` tables of its ``rvtune.toml``.

``rvtune import PATH`` writes these tables (see import_scan.py); the plugin reads them to collect one item per
(harness entry x case x config). Everything the users' own scripts hard-coded lives here as data that points at
their files in place: kernel modules, hand-written harnesses, the support library, the data directory. Nothing is
copied, so their files stay the only copy and cannot drift from ours.

Layout::

    [triton_rvv]
    run_dir = "benchmark/auto-tuner"        # the harnesses' working directory: their data paths are relative to it
    include_dirs = ["env_build/include"]
    support_sources = ["benchmark/src/support/support.cpp"]
    defines = ["TRITON_KERNEL_ENABLE", "CHECK_ACCURACY"]
    output_format = "triton-rvv"            # how their harnesses print times and checks (harness/formats/)

    [triton_rvv.kernels.matmul]             # one entry per harness: one ELF per config
    module = "benchmark/src/triton/matmul.py"
    functions = ["matmul_kernel"]           # every kernel linked into the ELF, each built with the item's config
    config_getter = "get_matmul_kernel_autotune_config"
    harness = "benchmark/src/main/matmul_kernel.cpp"
    argv = ["{M}x{N}x{K}x{RUN_COUNT}"]      # formatted with the case's values
    data = ["matmul/run/test_data/matrix_{M}x{K}_1.txt", ...]   # relative to run_dir, formatted likewise
    num_threads = 1                         # passed to the getter when it takes num_threads

    [triton_rvv.kernels.matmul.signature.matmul_kernel]   # each runtime parameter: a Triton type, or the
    a_ptr = "*fp32"                                        # integer 1 that triton-cpu specialised away
    stride_ak = 1

    [triton_rvv.kernels.matmul.cases.bench]
    params = { M = 1024, N = 1024, K = 1024, RUN_COUNT = 5 }
    sha256 = { "matmul/run/test_data/matrix_1024x1024_1.txt" = "..." }   # pinned at import

Data named by a config value (compat/variants.py), and a space the user chose::

    [triton_rvv.kernels.fused_moe]
    space = { BLOCK_SIZE_M = [4, 8, 16, 32, 64] }   # replaces the getter's values of these keys (--space)
    launch = "benchmark_triton"                   # their Python function whose kernel[grid](...) the generic
                                                  # harness runs: argument binding and grid per config
    [triton_rvv.kernels.fused_moe.cases.default]
    variant_key = "BLOCK_SIZE_M"                  # each value has its own files
    [triton_rvv.kernels.fused_moe.cases.default.variants.4]
    harness = "theirs"                            # their harness, each file at the path it opens
    files = { "fused_moe/run/test_data/matrix_1x2008_4.txt" = "fused_moe/.../matrix_BLOCK_SIZE_M_4_1x2008_4.txt" }
    sha256 = { "fused_moe/run/test_data/matrix_BLOCK_SIZE_M_4_1x2008_4.txt" = "..." }
    [triton_rvv.kernels.fused_moe.cases.default.variants.8]
    harness = "generic"                           # our generic harness runs their kernel; why = the reason
    args = { a = "fused_moe/run/test_data/matrix_1000x128_1.txt", num_tokens_post_padded = 2032 }  # launch params
    expected = { c = "fused_moe/run/test_data/matrix_BLOCK_SIZE_M_8_1000x2x512_3.txt" }

This module only reads and checks; every problem is a ProjectError naming the file, the table and the key.
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_rvtune.compat.int_expr import IntExprError, evaluate, names_in

PROJECT_FILE = "rvtune.toml"
TABLE = "triton_rvv"

#: Triton signature types a runtime parameter may have (pointers are "*" + one of the element types).
_ELEMENT_TYPES = ("fp32", "fp16", "bf16", "fp64", "i1", "i8", "i16", "i32", "i64", "u8", "u32", "u64")
_SCALAR_TYPES = ("i1", "i32", "i64", "u32", "u64", "fp32", "fp64")

CaseValue = int | float | bool | str


class ProjectError(ValueError):
    """A ``[triton_rvv]`` table that cannot be used: names the file, the key and what to do."""


class TemplateError(ValueError):
    """A template field names a value not given, or is not plain integer arithmetic."""


def template_fields(template: str) -> list[str]:
    """The fields of an argv or data template, as written (``{M}``, ``{M * TopK}``)."""
    try:
        return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:  # a single '{' or '}'
        raise TemplateError(f"{template!r} is not a template ({exc}; write a literal brace as {{{{ or }}}})"
                            ) from None


def format_template(template: str, values: Mapping[str, CaseValue]) -> str:
    """``template`` with each field replaced: a name by its value, an expression (``{M * TopK}``, as the harness
    computes a data path) by its integer value (compat/int_expr.py, C arithmetic)."""
    out = []
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(f"{template!r} is not a template ({exc}; write a literal brace as {{{{ or }}}})"
                            ) from None
    for literal, field_name, spec, _ in parts:
        out.append(literal)
        if field_name is None:
            continue
        if field_name.isidentifier():
            if field_name not in values:
                raise TemplateError(f"gives no {field_name}")
            out.append(format(values[field_name], spec or ""))
            continue
        try:
            out.append(format(evaluate(field_name, values), spec or ""))
        except IntExprError as exc:
            missing = sorted(n for n in _names(field_name) if n not in values)
            raise TemplateError(f"gives no {', '.join(missing)}" if missing else str(exc)) from None
    return "".join(out)


def _names(expr: str) -> set[str]:
    try:
        return names_in(expr)
    except IntExprError:
        return set()


HARNESS_KINDS = ("theirs", "generic", "none")


@dataclass(frozen=True)
class RvvVariant:
    """The data of one value of a case's variant key, and which harness runs its items (compat/variants.py)."""

    value: int
    harness: str  # "theirs", "generic" or "none" (no data: its items fail with ``why``)
    why: str = ""
    files: dict[str, str] = field(default_factory=dict)  # theirs: path the harness opens -> data file
    args: dict[str, str | int | float] = field(default_factory=dict)  # generic: launch parameter -> file or number
    expected: dict[str, str] = field(default_factory=dict)  # generic: launch parameter -> expected output file
    sha256: dict[str, str] = field(default_factory=dict)  # data file -> pinned sha256
    #: generic, no expected file: their Python function whose result is the expected value of these parameters
    reference: str = ""
    reference_outputs: tuple[str, ...] = ()
    #: generic, a chain: the kernels their launch function launches, in order, one item running them all
    #: (compat/chain_run.py); ``expected`` then names the chain's final outputs by their local names
    chain: tuple[str, ...] = ()


@dataclass(frozen=True)
class RvvCase:
    name: str
    params: dict[str, CaseValue]  # the getter's parameters and every name argv / data templates use
    sha256: dict[str, str] = field(default_factory=dict)  # data path (relative to run_dir) -> pinned sha256
    variant_key: str | None = None  # a config key whose values have their own data files
    variants: dict[int, RvvVariant] = field(default_factory=dict)
    generic: RvvVariant | None = None  # no variant key, their harness cannot build or serve it: ours runs it

    def variant(self, config: Mapping[str, Any]) -> RvvVariant | None:
        """The variant data of a config (None: the case has no variant key and their harness runs it; without a
        variant key, ``generic`` is the plan of a case their harness cannot run: our generic harness)."""
        if self.variant_key is None:
            return self.generic
        value = config.get(self.variant_key)
        found = self.variants.get(value) if isinstance(value, int) else None
        if found is None:
            return RvvVariant(value if isinstance(value, int) else -1, "none",
                              why=f"no data pinned for {self.variant_key}={value}: write its files (their "
                                  f"save_matrices_to_txt with prefix matrix_{self.variant_key}_{value}) and run "
                                  "`rvtune import` again")
        return found


@dataclass(frozen=True)
class RvvEntry:
    """One hand-written harness and the kernels it links."""

    name: str
    module: Path
    functions: tuple[str, ...]
    config_getter: str  # "" for a kernel without one: ``configs`` then lists its fixed block values
    harness: Path
    argv: tuple[str, ...]
    data: tuple[str, ...]
    signatures: dict[str, dict[str, str | int]]  # function -> parameter -> Triton type, or 1 (specialised)
    cases: dict[str, RvvCase]
    num_threads: int | None
    tolerance: dict[str, float] = field(default_factory=dict)  # their harness checks itself; ours uses these
    space: dict[str, tuple[int, ...]] = field(default_factory=dict)  # key -> the values to tune (replaces the getter's)
    launch: str | None = None  # their Python launch function (the generic harness runs its kernel[grid] call)
    configs: tuple[dict[str, int], ...] = ()  # fixed block values of a kernel without a config getter
    where: str = ""  # "<file> [triton_rvv.kernels.<name>]", for messages

    def _format(self, template: str, case: RvvCase, key: str) -> str:
        try:
            return format_template(template, case.params)
        except TemplateError as exc:
            raise ProjectError(f"{self.where} {key} {template!r}: case {case.name}: {exc}; add it to "
                               f"[triton_rvv.kernels.{self.name}.cases.{case.name}.params]") from None

    def argv_for(self, case: RvvCase) -> list[str]:
        """The harness's command line for a case (their `MxNxKxRUN_COUNT` style)."""
        return [self._format(t, case, "argv") for t in self.argv]

    def data_for(self, case: RvvCase) -> list[str]:
        """The data files the harness reads for a case, relative to run_dir (as its getDB() builds them)."""
        return [self._format(t, case, "data") for t in self.data]

    def specialised(self, function: str) -> dict[str, int]:
        """The integer parameters triton-cpu turned into constants (value 1): constexprs of the build."""
        return {p: v for p, v in self.signatures[function].items() if isinstance(v, int)}

    def runtime_signature(self, function: str) -> dict[str, str]:
        return {p: v for p, v in self.signatures[function].items() if isinstance(v, str)}


@dataclass(frozen=True)
class RvvProject:
    root: Path
    file: Path
    run_dir: Path
    include_dirs: tuple[Path, ...]
    support_sources: tuple[Path, ...]
    defines: tuple[str, ...]
    output_format: str
    entries: dict[str, RvvEntry]


def _where(path: Path, *keys: str) -> str:
    return f"{path} [{'.'.join((TABLE, *keys))}]"


def _str(table: Mapping[str, Any], key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise ProjectError(f"{where}: {key} must be a non-empty string, got {value!r}")
    return value


def _str_list(table: Mapping[str, Any], key: str, where: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
    value = table.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProjectError(f"{where}: {key} must be a list of strings, got {value!r}")
    return tuple(value)


def _existing(root: Path, rel: str, where: str, key: str, *, directory: bool = False) -> Path:
    path = (root / rel).resolve()
    ok = path.is_dir() if directory else path.is_file()
    if not ok:
        kind = "directory" if directory else "file"
        raise ProjectError(f"{where}: {key} = {rel!r}: no such {kind} under {root}; fix the path or re-run "
                           "`rvtune import`")
    return path


def _relative_data(template: str, where: str) -> str:
    pure = PurePosixPath(template)
    if pure.is_absolute() or ".." in pure.parts:
        raise ProjectError(f"{where}: data path {template!r} must be relative to run_dir, without '..'")
    return template


def _signature(table: Any, where: str) -> dict[str, str | int]:
    if not isinstance(table, dict) or not table:
        raise ProjectError(f"{where}: expected a table of parameter = \"<Triton type>\" or 1")
    out: dict[str, str | int] = {}
    for param, value in table.items():
        if isinstance(value, bool) or (isinstance(value, int) and value != 1):
            raise ProjectError(f"{where}: {param} = {value!r}: only the integer 1 can be specialised "
                               "(as triton-cpu does); give a Triton type otherwise")
        if isinstance(value, str):
            element = value.removeprefix("*")
            if element not in (_ELEMENT_TYPES if value.startswith("*") else _SCALAR_TYPES):
                raise ProjectError(f"{where}: {param} = {value!r} is not a Triton type (e.g. \"*fp32\", \"i32\")")
        elif not isinstance(value, int):
            raise ProjectError(f"{where}: {param} = {value!r}: give a Triton type string or 1")
        out[param] = value
    return out


def _sha_table(table: Mapping[str, Any], where: str) -> dict[str, str]:
    sha = table.get("sha256", {})
    if not isinstance(sha, dict) or not all(isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v)
                                            for v in sha.values()):
        raise ProjectError(f"{where}: sha256 must map data paths to 64 hex digits")
    return dict(sha)


def _str_table(table: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ProjectError(f"{where}: {key} must map names to data paths (strings), got {value!r}")
    for v in value.values():
        _relative_data(v, where)
    return dict(value)


def _variant(value: str, table: Any, where: str) -> RvvVariant:
    if not isinstance(table, dict) or not re.fullmatch(r"-?\d+", value):
        raise ProjectError(f"{where}: expected a table per integer value of the variant key, got {value!r}")
    harness = table.get("harness")
    if harness not in HARNESS_KINDS:
        raise ProjectError(f"{where}: harness must be one of {', '.join(HARNESS_KINDS)}, got {harness!r}")
    args = table.get("args", {})
    if not isinstance(args, dict) or not all(isinstance(v, str | int | float) and not isinstance(v, bool)
                                             for v in args.values()):
        raise ProjectError(f"{where}: args must map launch parameters to a data path or a number, got {args!r}")
    why = table.get("why", "")
    reference, outputs = table.get("reference", ""), table.get("reference_outputs", [])
    if not isinstance(reference, str) or not isinstance(outputs, list) or not all(isinstance(o, str)
                                                                                for o in outputs):
        raise ProjectError(f"{where}: reference must name a function of the module and reference_outputs list "
                           f"launch parameters, got {reference!r}, {outputs!r}")
    if outputs and not reference:
        raise ProjectError(f"{where}: reference_outputs needs reference = \"<their Python reference function>\"")
    chain = table.get("chain", [])
    if not isinstance(chain, list) or not all(isinstance(k, str) and k.isidentifier() for k in chain):
        raise ProjectError(f"{where}: chain must list the kernels their launch function launches, in order, "
                           f"got {chain!r}")
    return RvvVariant(int(value), harness, why if isinstance(why, str) else str(why),
                      _str_table(table, "files", where), dict(args), _str_table(table, "expected", where),
                      _sha_table(table, where), reference, tuple(outputs), tuple(chain))


def _case(name: str, table: Any, where: str) -> RvvCase:
    if not isinstance(table, dict):
        raise ProjectError(f"{where}: expected a table with params = {{...}}")
    params = table.get("params", {})
    if not isinstance(params, dict) or not all(isinstance(v, int | float | bool | str) for v in params.values()):
        raise ProjectError(f"{where}: params must be a table of names to numbers or strings, got {params!r}")
    key = table.get("variant_key")
    if key is not None and (not isinstance(key, str) or not key.isidentifier()):
        raise ProjectError(f"{where}: variant_key must be a config key name, got {key!r}")
    variants_table = table.get("variants", {})
    if not isinstance(variants_table, dict) or (variants_table and key is None):
        raise ProjectError(f"{where}: variants needs variant_key and one table per value")
    variants = {int(v): _variant(v, t, f"{where}.variants.{v}") for v, t in variants_table.items()}
    generic = table.get("generic")
    if generic is not None and key is not None:
        raise ProjectError(f"{where}: generic is for a case without variant_key (each variant has its harness)")
    plan = _variant("0", generic, f"{where}.generic") if generic is not None else None
    return RvvCase(name, dict(params), _sha_table(table, where), key, variants, plan)


def _getter_or_configs(table: Mapping[str, Any], where: str) -> tuple[str, tuple[dict[str, int], ...]]:
    """A config getter's name, or (a kernel with fixed block sizes) ``configs = [{ BLOCK_SIZE = 64 }]``."""
    getter = table.get("config_getter", "")
    configs = table.get("configs", [])
    if not isinstance(configs, list) or not all(
            isinstance(c, dict) and c and all(type(v) is int for v in c.values()) for c in configs):
        raise ProjectError(f"{where}: configs must be a list of tables of integer block values, e.g. "
                           f"[{{ BLOCK_SIZE = 64 }}], got {configs!r}")
    if not isinstance(getter, str) or (not getter and not configs):
        raise ProjectError(f"{where}: give config_getter (the module's get_<x>_kernel_autotune_config) or, for a "
                           "kernel with fixed block sizes, configs = [{ BLOCK_SIZE = 64 }]")
    return getter, tuple(dict(c) for c in configs)


def _space(table: Mapping[str, Any], where: str) -> dict[str, tuple[int, ...]]:
    space = table.get("space", {})
    if not isinstance(space, dict):
        raise ProjectError(f"{where}: space must be a table like {{ BLOCK_SIZE_M = [4, 8, 16] }}")
    out: dict[str, tuple[int, ...]] = {}
    for key, values in space.items():
        if not isinstance(values, list) or not values or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ProjectError(f"{where}: space.{key} must be a non-empty list of integers, got {values!r}")
        out[key] = tuple(dict.fromkeys(values))
    return out


def _entry(project_root: Path, path: Path, name: str, table: Any) -> RvvEntry:
    where = _where(path, "kernels", name)
    if not isinstance(table, dict):
        raise ProjectError(f"{where}: expected a table")
    functions = _str_list(table, "functions", where)
    if not functions:
        raise ProjectError(f"{where}: functions must name at least one kernel function")
    signatures_table = table.get("signature", {})
    if not isinstance(signatures_table, dict):
        raise ProjectError(f"{where}.signature: expected one table per function")
    signatures = {}
    for fn in functions:
        if fn not in signatures_table:
            raise ProjectError(f"{where}: function {fn} has no [triton_rvv.kernels.{name}.signature.{fn}] table")
        signatures[fn] = _signature(signatures_table[fn], f"{where}.signature.{fn}")
    cases_table = table.get("cases", {})
    if not isinstance(cases_table, dict) or not cases_table:
        raise ProjectError(f"{where}: no cases: add [triton_rvv.kernels.{name}.cases.<case>] with params")
    num_threads = table.get("num_threads")
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                    or num_threads < 0):
        raise ProjectError(f"{where}: num_threads must be an integer >= 0 (0 = all harts), got {num_threads!r}")
    tolerance = table.get("tolerance", {})
    if not isinstance(tolerance, dict):
        raise ProjectError(f"{where}: tolerance must be a table like {{ atol = 1e-5 }}")
    return RvvEntry(
        name=name,
        module=_existing(project_root, _str(table, "module", where), where, "module"),
        functions=functions,
        config_getter=_getter_or_configs(table, where)[0],
        configs=_getter_or_configs(table, where)[1],
        harness=_existing(project_root, _str(table, "harness", where), where, "harness"),
        argv=_str_list(table, "argv", where),
        data=tuple(_relative_data(t, where) for t in _str_list(table, "data", where)),
        signatures=signatures,
        cases={c: _case(c, t, f"{where}.cases.{c}") for c, t in cases_table.items()},
        num_threads=num_threads,
        tolerance={k: float(v) for k, v in tolerance.items()},
        space=_space(table, where),
        launch=table.get("launch") if isinstance(table.get("launch"), str) else None,
        where=where,
    )


def _output_format(root: Path, value: Any, where: str) -> str:
    """A built-in format's name, or a format file's path made absolute (relative to the project's root)."""
    if not isinstance(value, str) or not value:
        raise ProjectError(f"{where}: output_format must be a format name (e.g. \"triton-rvv\") or a .toml path")
    if "/" in value or value.endswith(".toml"):
        return str(_existing(root, value, where, "output_format"))
    return value


def read_project(path: Path) -> RvvProject | None:
    """The project described by ``path`` (an rvtune.toml), or None when it has no ``[triton_rvv]`` table."""
    path = Path(path).resolve()
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"{path}: not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ProjectError(f"{path}: cannot read: {exc.strerror}") from exc
    table = data.get(TABLE)
    if table is None:
        return None
    where = _where(path)
    if not isinstance(table, dict):
        raise ProjectError(f"{where}: expected a table")
    root = path.parent
    kernels = table.get("kernels", {})
    if not isinstance(kernels, dict):
        raise ProjectError(f"{where}: kernels must be tables [triton_rvv.kernels.<name>]")
    return RvvProject(
        root=root,
        file=path,
        run_dir=_existing(root, _str(table, "run_dir", where), where, "run_dir", directory=True),
        include_dirs=tuple(_existing(root, d, where, "include_dirs", directory=True)
                           for d in _str_list(table, "include_dirs", where)),
        support_sources=tuple(_existing(root, s, where, "support_sources")
                              for s in _str_list(table, "support_sources", where)),
        defines=_str_list(table, "defines", where, ("TRITON_KERNEL_ENABLE", "CHECK_ACCURACY")),
        output_format=_output_format(root, table.get("output_format", "triton-rvv"), where),
        entries={name: _entry(root, path, name, t) for name, t in kernels.items()},
    )
