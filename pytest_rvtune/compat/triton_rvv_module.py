"""Triton_RVV (triton-cpu) kernel modules, loaded as their authors wrote them.

Their format (see docs and ``shared/reference/triton-rvv-format.md``) differs from ``kernels/<name>.py``:

- kernels are plain functions ``<x>_kernel`` (their script calls ``triton.jit(fn)``), several per file;
- configs come from ``get_<x>_kernel_autotune_config(...)``, which may take problem sizes (``N_CTX``,
  ``D_HEAD``) and triton-cpu's ``num_threads``, and returns ``triton.Config({...}, num_threads=n)``;
- module-level code may call triton-cpu-only functions (``triton.runtime.driver.set_active_to_cpu()``) and
  import helpers their repository does not contain (``from utils import save_matrices_to_txt``).

``load_rvv_module`` executes such a file unchanged on disk, with tolerances applied to its syntax tree (so
every line number is the file's own): a top-level import that fails binds placeholders that raise only when
used, import-time triton-cpu calls do nothing, and ``__main__`` blocks never run (the module has another name).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import sys
import traceback
import types
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvtune.compat.triton_config import accepting_num_threads
from pytest_rvtune.spec import (
    BlockConfig,
    KernelModuleError,
    block_config,
    config_id,
    only_this_process,
)

#: Module-level calls that exist only in triton-cpu and only select its driver: no-ops here.
TRITON_CPU_ONLY_CALLS = ("set_active_to_cpu",)
#: Name of the module package the loaded files live under (``rvtune_rvv.matmul``): never ``__main__``.
MODULE_PACKAGE = "rvtune_rvv"

_MISSING_HOOK = "__rvtune_missing_import__"  # bound only while the module executes
_IMPORT_ERROR = "__rvtune_import_error__"


class RvvModuleError(KernelModuleError):
    """A Triton_RVV module that cannot be used; the message names the file, the line and the fix."""


class MissingGetterParameter(RvvModuleError):
    """The config getter takes a parameter the case does not give (their attention getter's DMODEL)."""

    def __init__(self, message: str, parameter: str) -> None:
        super().__init__(message)
        self.parameter = parameter


@dataclass(frozen=True)
class GetterConfigs:
    """What a getter returned: its configs once each, and the ids it listed more than once (dropped)."""

    configs: list[RvvConfig]
    duplicates: list[str]


@dataclass(frozen=True)
class RvvConfig:
    """One config of a getter: its constexpr values and triton-cpu's thread count (None: not given)."""

    values: dict[str, int | bool]
    num_threads: int | None

    def block_config(self) -> BlockConfig:
        """The same config in our kernel-module form (what items, builds and results take)."""
        return BlockConfig(self.values, num_threads=self.num_threads)

    @property
    def id(self) -> str:
        """``BLOCK_SIZE_M=4-BLOCK_SIZE_N=8[-num_threads=1]``, as our config ids."""
        return config_id(self.block_config())


# ------------------------------------------------------------------------------------------ loading
class MissingImport:
    """Stands for a name a failed top-level import would have bound: any use raises RvvModuleError.

    Dunder lookups answer AttributeError, as for any object without them, so introspection (``hasattr``,
    ``inspect``, ``copy``) of the module keeps working; only real uses fail.
    """

    def __init__(self, path: Path, line: int, statement: str, name: str, cause: ImportError) -> None:
        self._message = _missing_import_message(path, line, statement, name, cause)

    def _fail(self) -> Any:
        raise RvvModuleError(self._message)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fail()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return self._fail()

    def __getitem__(self, key: Any) -> Any:
        return self._fail()

    def __iter__(self) -> Any:
        return self._fail()

    def __repr__(self) -> str:
        return f"<missing import: {self._message}>"


def _missing_import_message(path: Path, line: int, statement: str, name: str, cause: ImportError) -> str:
    missing = cause.name if isinstance(cause, ModuleNotFoundError) and cause.name else None
    if missing:
        fix = (f"add {missing.replace('.', '/')}.py beside {path.name} (in {path.parent}) or remove the import")
        why = f"module {missing!r} does not exist"
    else:
        fix = "make the imported module provide it, or remove the import"
        why = str(cause)
    return f"{path}:{line}: {name} is used, but `{statement}` failed ({why}): {fix}"


class _Tolerances(ast.NodeTransformer):
    """Rewrites the import-time code of a module; functions' bodies are left exactly as written."""

    def __init__(self, source: str) -> None:
        self.source = source

    def rewrite(self, tree: ast.Module) -> ast.Module:
        body: list[ast.stmt] = []
        for stmt in tree.body:
            if isinstance(stmt, ast.Import | ast.ImportFrom) and _bound_names(stmt) is not None:
                body.append(self._guarded(stmt))
            else:
                body.append(self.visit(stmt))
        tree.body = body
        return ast.fix_missing_locations(tree)  # new nodes take the line of the statement they replace

    # Import-time code only: what runs inside functions and classes is the user's business at call time.
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr in TRITON_CPU_ONLY_CALLS:
            return ast.copy_location(ast.Pass(), node)
        return node

    def _guarded(self, stmt: ast.Import | ast.ImportFrom) -> ast.Try:
        """``try: <import> except ImportError: <each bound name> = placeholder``."""
        statement = ast.get_source_segment(self.source, stmt) or ast.unparse(stmt)
        assigns: list[ast.stmt] = [
            ast.Assign(
                targets=[ast.Name(id=name, ctx=ast.Store())],
                value=ast.Call(
                    func=ast.Name(id=_MISSING_HOOK, ctx=ast.Load()),
                    args=[ast.Constant(stmt.lineno), ast.Constant(statement), ast.Constant(name),
                          ast.Name(id=_IMPORT_ERROR, ctx=ast.Load())],
                    keywords=[],
                ),
            )
            for name in _bound_names(stmt) or ()
        ]
        handler = ast.ExceptHandler(type=ast.Name(id="ImportError", ctx=ast.Load()), name=_IMPORT_ERROR,
                                    body=assigns)
        guarded = ast.Try(body=[stmt], handlers=[handler], orelse=[], finalbody=[])
        for node in (guarded, *ast.walk(handler)):  # the import's own nodes keep their positions
            ast.copy_location(node, stmt)
        return guarded


def _bound_names(stmt: ast.Import | ast.ImportFrom) -> list[str] | None:
    """The names an import statement binds (None for ``from x import *`` and ``__future__``: not guarded)."""
    if isinstance(stmt, ast.ImportFrom):
        if stmt.module == "__future__" or any(a.name == "*" for a in stmt.names):
            return None
        return [a.asname or a.name for a in stmt.names]
    return [a.asname or a.name.partition(".")[0] for a in stmt.names]


def _line_in(path: Path, exc: BaseException) -> int | None:
    """The innermost line of ``path`` in the traceback of ``exc`` (where the module's code failed)."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return lines[-1] if lines else None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit: {exc.code} (sys.exit() was called)"
    return f"{type(exc).__name__}: {exc}"


def load_rvv_module(path: Path) -> types.ModuleType:
    """Execute a Triton_RVV kernel file (unchanged on disk) as module ``rvtune_rvv.<stem>``.

    The file's directory is on ``sys.path`` while it executes, as when its script runs from there.
    Raises RvvModuleError naming the file and line when its import-time code fails.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise RvvModuleError(f"{path}: no such file: give the path of a Triton_RVV kernel module (<name>.py)")
    source = importlib.util.decode_source(path.read_bytes())
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise RvvModuleError(f"{path}:{e.lineno}: syntax error: {e.msg}: fix the file") from e
    code = compile(_Tolerances(source).rewrite(tree), str(path), "exec")

    name = f"{MODULE_PACKAGE}.{path.stem}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__dict__[_MISSING_HOOK] = lambda line, statement, bound, cause: MissingImport(
        path, line, statement, bound, cause)
    sys.modules[name] = module  # triton and inspect look functions' modules up by name
    entry = str(path.parent)
    sys.path.insert(0, entry)
    launches: list[ImportLaunch] = []
    try:
        with only_this_process(), _recording_launches(launches):
            exec(code, module.__dict__)
    except KeyboardInterrupt:
        sys.modules.pop(name, None)
        raise
    except BaseException as e:  # sys.exit() at import is the module's error, not the caller's end
        sys.modules.pop(name, None)
        line = _line_in(path, e)
        where = f"{path}:{line}" if line else str(path)
        raise RvvModuleError(f"{where}: executing the module failed: {_describe(e)}; fix the module-level code"
                             f"{' at that line' if line else ''}") from e
    finally:
        with contextlib.suppress(ValueError):  # the module may have taken it out itself
            sys.path.remove(entry)  # the first occurrence: the one inserted above
        module.__dict__.pop(_MISSING_HOOK, None)
    module.__dict__[IMPORT_LAUNCHES] = launches
    return module


#: Module attribute: the kernel launches its import-time code made (recorded, not run).
IMPORT_LAUNCHES = "__rvtune_import_launches__"


@dataclass(frozen=True)
class ImportLaunch:
    """A ``kernel[grid](...)`` a module's import-time code made (their softmax.py runs its kernel at import)."""

    kernel: str
    grid: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@contextlib.contextmanager
def _recording_launches(launches: list[ImportLaunch]) -> Any:
    """While a module executes, its kernel launches are recorded instead of run: with triton-cpu they ran on the
    host, here there is no host driver (Triton would refuse with "0 active drivers"); the recorded call says
    which block values a kernel without a config getter is launched with."""
    from triton.runtime.jit import JITFunction

    original = JITFunction.run

    def record(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> None:
        launches.append(ImportLaunch(getattr(self.fn, "__name__", "?"), grid, args, kwargs))

    JITFunction.run = record
    try:
        yield
    finally:
        JITFunction.run = original


def import_launches(module: types.ModuleType) -> list[ImportLaunch]:
    """The launches ``module``'s import-time code made (see load_rvv_module)."""
    return list(vars(module).get(IMPORT_LAUNCHES, []))


# ------------------------------------------------------------------------------------------ kernels
def _kernel_function(value: Any) -> types.FunctionType | None:
    """The Python function of a plain or jitted kernel (None for anything else)."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    if inspect.isfunction(value):
        return value
    if isinstance(value, JITFunction | InterpretedFunction) and inspect.isfunction(value.fn):
        return value.fn
    return None


def _path_of(module: types.ModuleType) -> str:
    return getattr(module, "__file__", None) or module.__name__


def _uses_triton_language(fn: types.FunctionType) -> bool:
    """Whether ``fn`` names a global bound to ``triton.language`` (``tl.load``...): what a kernel does, and a
    host-side helper such as ``run_and_verify_triton_kernel`` does not."""
    import triton.language

    def names(code: types.CodeType) -> set[str]:
        nested = (names(c) for c in code.co_consts if isinstance(c, types.CodeType))
        return set(code.co_names).union(*nested)

    return any(fn.__globals__.get(n) is triton.language for n in names(fn.__code__))


def kernel_names(module: types.ModuleType) -> list[str]:
    """Functions (plain or jitted) named ``*_kernel`` defined in ``module``, in file order.

    A plain function counts when it uses ``triton.language``: ``run_and_verify_triton_kernel`` (host code that
    launches a kernel) is no kernel. An alias (``rvv_kernel = triton.jit(matmul_kernel)``) is not listed:
    Triton names the compiled kernel after the function, so ``matmul_kernel`` is listed instead.
    """
    found = []
    for attr, value in vars(module).items():
        fn = _kernel_function(value) if attr.endswith("_kernel") else None
        if fn is None or fn.__name__ != attr or fn.__module__ != module.__name__:
            continue
        if fn is value and not _uses_triton_language(fn):
            continue
        found.append((fn.__code__.co_firstlineno, attr))
    return [attr for _, attr in sorted(found)]


_jitted: weakref.WeakKeyDictionary[types.ModuleType, dict[str, Any]] = weakref.WeakKeyDictionary()


def jit_kernel(module: types.ModuleType, name: str) -> Any:
    """The kernel ``name`` as a JITFunction (``triton.jit`` of the plain function, once per module, or the
    module's own JITFunction); its ``__name__`` is ``name``."""
    value = vars(module).get(name)
    fn = _kernel_function(value)
    if fn is None:
        raise RvvModuleError(f"{_path_of(module)}: no kernel function {name}; its kernels are "
                             f"{', '.join(kernel_names(module)) or 'none (functions named <x>_kernel)'}")
    if fn.__name__ != name:
        raise RvvModuleError(
            f"{_path_of(module)}:{fn.__code__.co_firstlineno}: {name} is triton.jit({fn.__name__}): Triton names "
            f"the compiled kernel and its C symbols after {fn.__name__}; use the kernel {fn.__name__}")
    if not inspect.isfunction(value):
        return value  # already jitted by the module (fn is its .fn)
    if not _uses_triton_language(fn):
        raise RvvModuleError(
            f"{_path_of(module)}:{fn.__code__.co_firstlineno}: {name} uses no triton.language (tl.*): it is host "
            f"code, not a Triton kernel; its kernels are {', '.join(kernel_names(module)) or 'none'}")
    jitted = _jitted.setdefault(module, {})
    if name not in jitted:
        import triton

        jitted[name] = triton.jit(fn)
    return jitted[name]


# ------------------------------------------------------------------------------------------ configs
def _getter(module: types.ModuleType, getter: str) -> Any:
    fn = vars(module).get(getter)
    if not inspect.isfunction(fn):
        known = [n for n, v in vars(module).items() if n.startswith("get_") and n.endswith("_autotune_config")
                 and inspect.isfunction(v)]
        raise RvvModuleError(f"{_path_of(module)}: no config getter {getter}(); its getters are "
                             f"{', '.join(known) or 'none (functions get_<x>_kernel_autotune_config)'}")
    return fn


def _problem_params(fn: Any) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values()
            if p.name != "num_threads" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def getter_params(module: types.ModuleType, getter: str) -> list[str]:
    """Parameter names of a config getter, in order, without ``num_threads`` (e.g. ``["N_CTX", "D_HEAD"]``)."""
    return [p.name for p in _problem_params(_getter(module, getter))]


def load_configs(module: types.ModuleType, getter: str, params: Mapping[str, Any],
                 num_threads: int | None = None) -> list[RvvConfig]:
    """Call a config getter and check what it returns.

    Its parameters are bound by name from ``params`` (a parameter with a default may be left out);
    ``num_threads`` is passed only when the getter takes it and it is not None. ``triton.Config(...,
    num_threads=n)`` is accepted during the call only. Values must be ints or bools; a config listed twice is
    kept once (their flash-attention getter appends every config twice; triton-cpu's Autotuner ran each once
    per distinct key): ``rvtune import`` says so, see :func:`read_configs`.
    """
    return read_configs(module, getter, params, num_threads).configs


def read_configs(module: types.ModuleType, getter: str, params: Mapping[str, Any],
                 num_threads: int | None = None) -> GetterConfigs:
    """:func:`load_configs`, with the ids of the configs the getter listed more than once."""
    fn = _getter(module, getter)
    where = f"{_path_of(module)}:{fn.__code__.co_firstlineno}: {getter}()"
    kwargs: dict[str, Any] = {}
    for p in _problem_params(fn):
        if p.name in params:
            kwargs[p.name] = params[p.name]
        elif p.default is p.empty:
            raise MissingGetterParameter(
                f"{where} takes the parameter {p.name}, which is not given (given: {', '.join(params) or 'none'}): "
                f"give {p.name} in the problem parameters (the case's dict), or a default in the getter", p.name)
    if num_threads is not None and "num_threads" in inspect.signature(fn).parameters:
        kwargs["num_threads"] = num_threads
    try:
        with accepting_num_threads(module.__dict__):
            raw = fn(**kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        line = _line_in(Path(_path_of(module)), e)
        at = f" (line {line})" if line else ""
        raise RvvModuleError(f"{where} failed{at}: {_describe(e)}; fix the getter") from e
    if not isinstance(raw, list | tuple) or not raw:
        raise RvvModuleError(f"{where} returned {type(raw).__name__} {raw!r:.80}: it must return a non-empty "
                             "list of triton.Config")
    try:
        listed = [block_config(cfg, f"{where} config {i}") for i, cfg in enumerate(raw)]
    except RvvModuleError:
        raise
    except KernelModuleError as e:
        raise RvvModuleError(f"{e}; fix the getter") from e
    firsts: dict[str, BlockConfig] = {}
    duplicates: list[str] = []
    for config in listed:
        cid = config_id(config)
        if cid in firsts:
            duplicates.append(cid)
        else:
            firsts[cid] = config
    return GetterConfigs([RvvConfig(values=dict(c), num_threads=c.num_threads) for c in firsts.values()],
                         duplicates)
