"""Golden data: the seeds' TXT format, generation from a kernel's reference, the manifest, ``golden_set``.

Layout (one manifest per kernel, committed)::

    golden/<kernel>/manifest.json             shapes, dtypes, seeds, argument fed, sha256 of every file
    golden/<kernel>/small/matrix_*.txt        committed ("small" cases are KBs)
    <cache>/golden/<kernel>/<case>/matrix_*.txt   emu / bench: generated on demand, checked against the manifest

File names follow the seeds: ``matrix_{shape}_{idx}.txt`` (idx = 1-based position among the kernel's tensor
arguments), and ``matrix_BLOCK_SIZE_M_{BM}_{shape}_{idx}.txt`` for a tensor that differs between data variants
(config keys listed in the kernel's VARIANT_KEYS). Files of output tensors hold the expected values.
Generation is deterministic (seeded inputs, float64 references rounded to fp32), so the manifest's hashes
also catch drift: a kernel module whose inputs or reference changed.

Imported cases (``rvtune golden import``, ``import_files``) hold files someone else wrote (e.g. Triton_RVV's
test_data); their manifest entry says ``"source": "imported"``. They live in golden/<kernel>/<case>/ whatever
the case's name, since nothing could regenerate them, and are never regenerated: a changed file is drift.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock

from pytest_rvtune import paths
from pytest_rvtune.hashing import sha256_file
from pytest_rvtune.spec import KernelArg, KernelSpec, Launch, Scalar, variant_id

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
#: Cases whose data is committed under golden/; every other case lives in the cache.
COMMITTED_CASES = ("small",)

# TXT element types: Triton spelling -> (numpy dtype values are held in, printf format of a value).
# Every float format round-trips: %.9g every fp32, %.17g every fp64, %.5g every fp16 (11-bit significand) and
# %.4g every bf16 (8-bit significand): p significant digits suffice for a b-bit significand when
# 10**(p-1) > 2**b. numpy has no bfloat16, so bf16 values are held as the float32 of the same value (exact).
_DTYPES: dict[str, tuple[Any, str]] = {
    "fp32": (np.float32, "%.9g"),
    "fp64": (np.float64, "%.17g"),
    "fp16": (np.float16, "%.5g"),
    "bf16": (np.float32, "%.4g"),
    "i32": (np.int32, "%d"),
    "i64": (np.int64, "%d"),
    "i8": (np.int8, "%d"),
    "i16": (np.int16, "%d"),
    "u8": (np.uint8, "%d"),
    "i1": (np.uint8, "%d"),
}
_TORCH_NAMES = {
    "float32": "fp32",
    "float64": "fp64",
    "float16": "fp16",
    "bfloat16": "bf16",
    "int32": "i32",
    "int64": "i64",
    "int8": "i8",
    "int16": "i16",
    "uint8": "u8",
    "bool": "i1",
}

class GoldenError(Exception):
    """Missing, corrupt or drifted golden data; the message names the file (and line) and what to do."""


class GoldenFormatError(GoldenError):
    """A TXT file that cannot be read: names the file and the line."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path, self.line = Path(path), line
        where = f"{path}" if line is None else f"{path}:{line}"
        super().__init__(f"golden file {where}: {message}")


# ---- the TXT format ---------------------------------------------------------------------------
def txt_shape(shape: Sequence[int]) -> tuple[int, int]:
    """(rows, cols) a tensor is stored as: 1-D is ``1 n``, rank > 2 is (prod(leading), last)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, shape[0]
    return int(np.prod(shape[:-1])), shape[-1]


def dtype_name(tensor: Any) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in _TORCH_NAMES:
        raise GoldenError(f"tensor dtype {tensor.dtype} has no golden TXT format (supported: {sorted(_TORCH_NAMES)})")
    return _TORCH_NAMES[name]


def round_bf16(values: Any) -> np.ndarray:
    """float64 values -> the nearest bfloat16 (ties to even), held as float32.

    Rounds once, from the float64 value: torch's float64 -> bfloat16 goes through float32 and so rounds twice,
    which for a value just above a half-way point (1 + 2**-8 + 2**-30) gives the lower neighbour.
    """
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        _, exp = np.frexp(x)  # |x| = m * 2**exp with 0.5 <= m < 1: its leading bit is 2**(exp - 1)
        step = np.ldexp(1.0, np.maximum(exp - 1, -126) - 7)  # bf16's spacing at x (subnormals: 2**-133)
        rounded = np.where(np.isfinite(x), np.round(x / step) * step, x)  # np.round: half to even
        return rounded.astype(np.float32)  # exact; 2**128 and beyond become inf


def _to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to a float dtype's nearest (ties to even), held in _DTYPES' numpy type."""
    if dtype == "bf16":
        return round_bf16(values)
    with np.errstate(over="ignore"):
        return values.astype(_DTYPES[dtype][0])  # numpy rounds float64 -> fp16 / fp32 once, to nearest even


def format_txt(array: Any, dtype: str | None = None) -> bytes:
    """A tensor / array as golden TXT bytes (deterministic: same values, same bytes).

    Float values are first rounded to ``dtype`` (a no-op for a tensor of that dtype), then written with the
    digits that read back to exactly that value (see _DTYPES).
    """
    if hasattr(array, "detach"):
        dtype = dtype or dtype_name(array)
        array = array.detach().cpu()
        if dtype_name(array) == "bf16":
            array = array.float()  # numpy has no bfloat16; float32 holds every bf16 value exactly
        array = array.numpy()
    arr = np.asarray(array)
    dtype = dtype or _TORCH_NAMES.get(str(arr.dtype), "")
    if dtype not in _DTYPES:
        raise GoldenError(f"array dtype {arr.dtype} has no golden TXT format")
    np_dtype, fmt = _DTYPES[dtype]
    rows, cols = txt_shape(arr.shape)
    arr = arr.reshape(rows, cols)
    if np.issubdtype(np_dtype, np.floating):
        # via a lossless widening: the format prints the exact value of the rounded element
        arr = _to_dtype(arr.astype(np.float64), dtype).astype(np.float64)
    else:
        arr = arr.astype(np_dtype)
    lines = [f"{rows} {cols}"]
    lines += [" ".join([fmt % v for v in row.tolist()]) for row in arr]
    return ("\n".join(lines) + "\n").encode()


def write_txt(path: Path | str, array: Any, dtype: str | None = None) -> str:
    """Write atomically (readers never see half a file); return the file's sha256."""
    data = format_txt(array, dtype)
    _atomic_write(Path(path), data)
    return hashlib.sha256(data).hexdigest()


def read_txt(path: Path | str, dtype: str = "fp32") -> np.ndarray:
    """Read a golden TXT file as a 2-D array; GoldenFormatError names the file and line of any defect.

    Float text is rounded to ``dtype`` to nearest, ties to even (decimal -> float64 -> dtype, as the C harness
    reads it); a finite value beyond the dtype's range is an error, not an infinity. bf16 comes back as
    float32 (numpy has no bfloat16), each element exactly a bf16 value.
    """
    path = Path(path)
    if dtype not in _DTYPES:
        raise GoldenError(f"golden file {path}: unknown dtype {dtype!r} (known: {sorted(_DTYPES)})")
    np_dtype = _DTYPES[dtype][0]
    if path.exists() and not path.is_file():  # a FIFO or /dev/zero: reading would never end
        raise GoldenFormatError(path, None, "not a regular file (a FIFO, a device or a directory)")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise GoldenFormatError(path, None, "missing (run `rvtune golden generate`)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GoldenFormatError(path, None, f"cannot be read: {e}") from None
    lines = text.split("\n")
    header = lines[0].split() if lines else []
    if len(header) != 2 or not all(h.isdigit() for h in header):
        raise GoldenFormatError(path, 1, f"the first line must be `rows cols`, got {lines[0][:60]!r}")
    rows, cols = int(header[0]), int(header[1])
    # Check the header against the text before allocating: `100000000 100000000` must be a clear error, not an
    # attempt at 35 PiB. Every value takes at least one character and one separator.
    room = len(text) // 2 + 1
    if rows > len(lines) - 1 or rows * cols > room:
        raise GoldenFormatError(path, 1, f"`{rows} {cols}` declares {rows * cols} values in {rows} rows, but the "
                                         f"file has {len(lines) - 1} more lines and room for at most {room} values: "
                                         "the header does not match the data")
    out = np.empty((rows, cols), dtype=np_dtype)
    is_float = np.issubdtype(np_dtype, np.floating)
    parse = float if is_float else int
    for r in range(rows):
        lineno = r + 2
        if r + 1 >= len(lines) or not any(line.strip() for line in lines[r + 1 :]):
            raise GoldenFormatError(path, lineno, f"short file: {rows} rows declared, only {r} present")
        words = lines[r + 1].split()
        if len(words) != cols:
            raise GoldenFormatError(path, lineno, f"row {r} has {len(words)} values, {cols} declared")
        try:
            values = [parse(w) for w in words]
            if is_float:
                wide = np.array(values, dtype=np.float64)
                out[r] = _to_dtype(wide, dtype)
                overflow = np.flatnonzero(np.isfinite(wide) & ~np.isfinite(out[r]))
                if overflow.size:
                    raise GoldenFormatError(
                        path, lineno, f"{words[overflow[0]]!r} (column {overflow[0] + 1}) is beyond the range "
                        f"of {dtype} (largest {float(_largest(dtype)):.9g}): the file does not hold {dtype} data"
                    )
            else:
                out[r] = values
        except (ValueError, OverflowError):
            col, bad = next((i, w) for i, w in enumerate(words) if not _parses(parse, w, np_dtype))
            raise GoldenFormatError(
                path, lineno, f"{bad!r} (column {col + 1}) is not a valid {dtype} value: fix that value, or "
                f"write the file again"
            ) from None
    if any(line.strip() for line in lines[rows + 1 :]):
        raise GoldenFormatError(path, rows + 2, f"extra data after the {rows} declared rows")
    return out


def _largest(dtype: str) -> float:
    """The dtype's largest finite value (bf16: 0x7f7f)."""
    return (2 - 2**-7) * 2.0**127 if dtype == "bf16" else float(np.finfo(_DTYPES[dtype][0]).max)


def _parses(parse: Any, word: str, np_dtype: Any) -> bool:
    try:
        np.array([parse(word)], dtype=np_dtype)  # an int too large for the dtype does not parse either
        return True
    except (ValueError, OverflowError):
        return False


def read_tensor(file: GoldenFile) -> np.ndarray:
    """A golden file's values in the tensor's own shape."""
    return read_txt(file.path, file.dtype).reshape(file.shape)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary beside it; GoldenError names the path when it cannot be written (a
    full disk: write() errors name no file), and the temporary is removed, whatever went wrong."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        fixes: dict[int | None, str] = {errno.ENOSPC: "make room there",
                                        errno.EISDIR: "remove the directory in its place"}
        fix = fixes.get(exc.errno, "check the directory's permissions")
        if path.is_relative_to(paths.cache_dir()):
            fix += " or set RVTUNE_CACHE_DIR to another disk (the golden data there is a cache)"
        raise GoldenError(f"cannot write golden file {path}: {exc.strerror or exc}; {fix}") from None


# ---- the public API for build / plugin ----------------------------------------------------------
@dataclass(frozen=True)
class GoldenFile:
    """One golden file: the tensor argument it feeds and whether it is an input or an expected output."""

    arg: str  # kernel parameter, e.g. "a_ptr"
    tensor: str  # the kernel module's tensor name, e.g. "a"
    role: str  # "input" (read into the argument) or "expected" (what the kernel must write there)
    path: Path
    shape: tuple[int, ...]
    dtype: str  # "fp32", "i32", ...
    sha256: str


@dataclass(frozen=True)
class GoldenSet:
    """The golden data of one item (kernel x case x config), tensor files in kernel-argument order."""

    kernel: str
    case: str
    variant: dict[str, Any]
    files: tuple[GoldenFile, ...]
    scalars: dict[str, Scalar]  # non-tensor kernel arguments by parameter name
    tolerance: dict[str, float]
    sha256: str  # combined hash: every file's hash, role and argument + the scalars

    @property
    def inputs(self) -> tuple[GoldenFile, ...]:
        return tuple(f for f in self.files if f.role == "input")

    @property
    def expected(self) -> tuple[GoldenFile, ...]:
        return tuple(f for f in self.files if f.role == "expected")


def golden_dir(kernels_dir: Path | None = None) -> Path:
    """Committed golden data: ``golden/`` beside the kernels directory (override with RVTUNE_GOLDEN_DIR)."""
    default = (kernels_dir.parent if kernels_dir else paths.project_root()) / "golden"
    return Path(os.environ.get("RVTUNE_GOLDEN_DIR", default))


def cache_golden_dir() -> Path:
    return paths.cache_dir() / "golden"


@dataclass
class Store:
    """Where one kernel's golden data lives: the committed tree and the cache."""

    root: Path = field(default_factory=golden_dir)
    cache: Path = field(default_factory=cache_golden_dir)

    def manifest_path(self, kernel: str) -> Path:
        return self.root / kernel / MANIFEST

    def case_dir(self, kernel: str, case: str, imported: bool = False) -> Path:
        """Committed cases and imported ones (which nothing could regenerate) in the tree, others in the cache."""
        return (self.root if case in COMMITTED_CASES or imported else self.cache) / kernel / case

    def load_manifest(self, kernel: str, writing: bool = False) -> dict[str, Any]:
        """The kernel's manifest; an empty one for a kernel with no golden data yet. A manifest missing beside
        golden files is an error (unless ``writing``: generate and import make it again): the data would otherwise
        be generated afresh into the cache and used unchecked, hiding the loss."""
        p = self.manifest_path(kernel)
        if not p.exists():
            orphans = [] if writing else sorted(self.root.joinpath(kernel).glob("*/matrix_*.txt"))
            if orphans:
                raise GoldenError(
                    f"golden manifest {p} is missing, but {p.parent} holds {len(orphans)} golden file(s) (e.g. "
                    f"{orphans[0].relative_to(p.parent)}): restore it from git (`git checkout -- {p}`), or "
                    f"regenerate it with `rvtune golden generate --kernel {kernel}`")
            return {"kernel": kernel, "format": FORMAT_VERSION, "cases": {}}
        if not p.is_file():  # a FIFO would block the read forever
            raise GoldenError(f"golden manifest {p}: not a regular file (a FIFO, a device or a directory); "
                              "remove it and restore it from git")
        try:
            m = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise GoldenError(f"golden manifest {p}: unreadable ({e}); restore it from git or regenerate") from e
        if m.get("format") != FORMAT_VERSION or not isinstance(m.get("cases"), dict):
            raise GoldenError(f"golden manifest {p}: format {m.get('format')!r}, expected {FORMAT_VERSION}")
        return m

    def save_manifest(self, kernel: str, manifest: dict[str, Any]) -> None:
        _atomic_write(self.manifest_path(kernel), _dump_manifest(manifest).encode())


def _dump_manifest(manifest: dict[str, Any]) -> str:
    """Indented JSON with one line per file entry: readable, and diffs show which file changed."""
    lines: dict[str, str] = {}

    def tag(f: dict[str, Any]) -> str:
        key = f"@@{len(lines)}@@"
        lines[key] = json.dumps(f)
        return key

    doc = json.loads(json.dumps(manifest))
    for case in doc["cases"].values():
        for v in case["variants"].values():
            v["files"] = [tag(f) for f in v["files"]]
    text = json.dumps(doc, indent=1)
    for key, line in lines.items():
        text = text.replace(f'"{key}"', line)
    return text + "\n"


def _combined_sha(files: Sequence[GoldenFile], scalars: Mapping[str, Scalar]) -> str:
    doc = {
        "files": [[f.arg, f.tensor, f.role, f.sha256] for f in files],
        "scalars": {k: repr(v) for k, v in scalars.items()},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


#: _file_sha's answer for a FIFO, a device or a directory where a golden file should be: reading one would
#: block forever (a FIFO, /dev/zero) or fail, and it never has the recorded hash.
NOT_A_FILE = "(not a regular file)"


def _file_sha(path: Path) -> str | None:
    """sha256 of a golden file (memoised by path, size and mtime in hashing.py), None when it is missing,
    NOT_A_FILE when something else is in its place."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return NOT_A_FILE
        return sha256_file(path)
    except FileNotFoundError:
        return None


def golden_set(spec: KernelSpec, case_name: str, config: Mapping[str, Any], store: Store | None = None) -> GoldenSet:
    """The golden files of one item, generated on demand (emu/bench into the cache) and hash-checked.

    Raises GoldenError naming the file when data is missing from the committed tree, corrupted, or when
    regenerating it gives other bytes than the manifest records (the kernel module drifted).
    """
    store = store or Store(root=golden_dir(spec.path.parent))
    variant = spec.variant_of(config)
    vid = variant_id(variant)
    entry = store.load_manifest(spec.name)["cases"].get(case_name)
    if entry is None:
        entry, base = _unrecorded_case(spec, case_name, store)
    else:
        base = store.case_dir(spec.name, case_name, is_imported(entry))
        _ensure_case_files(spec, case_name, entry, base, store)
    if vid not in entry["variants"]:
        fix = (
            f"import its files with `rvtune golden import --kernel {spec.name} --case {case_name} --variant {vid}`"
            if is_imported(entry)
            else f"run `rvtune golden generate --kernel {spec.name} --case {case_name}`"
        )
        raise GoldenError(
            f"golden manifest {store.manifest_path(spec.name)}: case {case_name} has no variant {vid!r}; {fix}"
        )
    files = tuple(
        GoldenFile(
            arg=f["arg"],
            tensor=f["tensor"],
            role=f["role"],
            path=base / f["file"],
            shape=tuple(f["shape"]),
            dtype=f["dtype"],
            sha256=f["sha256"],
        )
        for f in entry["variants"][vid]["files"]
    )
    launch = spec.capture_launch(case_name, config)
    scalars = {a.name: a.value for a in launch.scalar_args if a.value is not None}  # every scalar has a value
    return GoldenSet(
        kernel=spec.name,
        case=case_name,
        variant=variant,
        files=files,
        scalars=scalars,
        tolerance=dict(spec.tolerance),
        sha256=_combined_sha(files, scalars),
    )


def _unrecorded_case(spec: KernelSpec, case_name: str, store: Store) -> tuple[dict[str, Any], Path]:
    """A case the manifest does not record yet (a new kernel or case): generated into the cache, unverified.

    Its entry is kept beside the files with a fingerprint of the module source, so it is built once per
    change of the module, not once per item; the committed manifest is only written by `rvtune golden generate`.
    """
    base = store.cache / spec.name / case_name
    entry_file = base / ".entry.json"
    fingerprint = hashlib.sha256(spec.path.read_bytes()).hexdigest()

    def cached() -> dict[str, Any] | None:
        try:
            if not entry_file.is_file():  # never a FIFO's read
                return None
            saved = json.loads(entry_file.read_text())
            if saved.get("module_sha256") != fingerprint:
                return None
            files = {f["file"]: f["sha256"] for v in saved["entry"]["variants"].values() for f in v["files"]}
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            return None  # missing or damaged: it is a cache, built again
        return saved["entry"] if all(_file_sha(base / n) == sha for n, sha in files.items()) else None

    entry = cached()
    if entry is None:
        base.mkdir(parents=True, exist_ok=True)
        with FileLock(str(base) + ".lock"):
            entry = cached()
            if entry is None:
                entry = generate_case(spec, case_name, store, location=base, record=False)
                doc = {"module_sha256": fingerprint, "entry": entry}
                _atomic_write(entry_file, json.dumps(doc).encode())
    return entry, base


def _ensure_case_files(spec: KernelSpec, case_name: str, entry: dict, base: Path, store: Store) -> None:
    """Every file of the case present with its recorded hash; cache files are (re)generated when absent or
    damaged (they are a cache: a disk error or a stray edit there is no reason to fail an item)."""
    expected = {f["file"]: f["sha256"] for v in entry["variants"].values() for f in v["files"]}
    missing = [name for name in expected if _file_sha(base / name) is None]
    imported = is_imported(entry)
    cached = not imported and case_name not in COMMITTED_CASES
    if cached and not missing and any(_file_sha(base / n) != sha for n, sha in expected.items()):
        missing = [n for n, sha in expected.items() if _file_sha(base / n) != sha]
    again = f"`rvtune golden import --kernel {spec.name} --case {case_name} ...`"
    if missing and imported:
        raise GoldenError(
            f"imported golden file {base / missing[0]} is missing: restore it with git, or import it again with {again}"
        )
    if missing:
        if case_name in COMMITTED_CASES:
            raise GoldenError(
                f"golden file {base / missing[0]} is missing (committed data): restore it with git, or run "
                f"`rvtune golden generate --kernel {spec.name} --case {case_name}`"
            )
        base.mkdir(parents=True, exist_ok=True)
        with FileLock(str(base) + ".lock"):  # xdist workers: one generates, the others wait and reuse
            if any(_file_sha(base / n) != sha for n, sha in expected.items()):
                generate_case(spec, case_name, store, location=base, record=False)
    for name, sha in expected.items():
        got = _file_sha(base / name)
        if got == NOT_A_FILE:
            fix = f"import it again with {again}" if imported else \
                f"`rvtune golden generate --kernel {spec.name} --case {case_name}`"
            raise GoldenError(f"golden file {base / name} is not a regular file (a FIFO, a device or a directory): "
                              f"remove it, then restore it with git or {fix}")
        if got != sha and imported:
            raise GoldenError(
                f"imported golden file {base / name} changed since it was imported (sha256 {got}, manifest {sha}): "
                f"restore it with git, or, if the new contents are right, import it again with {again}"
            )
        if got != sha:
            # A cache file was just regenerated: other bytes now can only come from the module.
            what = "was corrupted" if case_name in COMMITTED_CASES else \
                "differs from the manifest after regenerating it"
            raise GoldenError(
                f"golden file {base / name} {what} (sha256 {got}, manifest {sha}); the kernel module's inputs or "
                f"reference may have changed: run `rvtune golden verify`, then "
                f"`rvtune golden generate --kernel {spec.name} --case {case_name}` if the change is intended"
            )


# ---- generation ---------------------------------------------------------------------------------
@dataclass
class _Tensor:
    arg: str
    tensor: str
    role: str
    shape: tuple[int, ...]
    dtype: str
    data: Any  # torch tensor (contents formatted lazily)
    index: int  # 1-based position among the kernel's tensor arguments (the file name's idx)


def _tensor_args(launch: Launch) -> list[tuple[int, str, KernelArg]]:
    """The launch's tensor arguments, each with its 1-based position among them and the inputs-dict name of the
    tensor it is passed; a tensor passed twice (updated in place through a second argument) only the first time."""
    seen: set[str] = set()
    out = []
    for index, a in enumerate(launch.tensor_args, start=1):
        if a.tensor is not None and a.tensor not in seen:  # a tensor argument has its name
            seen.add(a.tensor)
            out.append((index, a.tensor, a))
    return out


def read_tensors(spec: KernelSpec, launch: Launch) -> set[str]:
    """The make_inputs tensors whose initial data the kernel reads (loaded or updated atomically before it
    stores there), from its TTIR (compiler/reads.py).

    A kernel our frontend refuses reads nothing here: its build fails anyway, naming the reason."""
    from pytest_rvtune.compiler.frontend import kernel_to_ttir
    from pytest_rvtune.compiler.reads import read_before_written

    try:
        params = read_before_written(kernel_to_ttir(spec.kernel, dict(launch.signature), dict(launch.constexprs)))
    except Exception:
        return set()
    return {a.tensor for a in launch.tensor_args if a.name in params and a.tensor is not None}


def _variant_tensors(spec: KernelSpec, case_name: str, variant: dict,
                     inout: frozenset[str] = frozenset()) -> list[_Tensor]:
    """The kernel's tensor arguments of one variant, in argument order, with the data each file holds.

    An output whose initial data the kernel reads (inferred from its TTIR; or exactly the tensors the module's
    INOUT names, when it has one) is updated in place: it gets an input file (make_inputs' data) and an expected
    file, and the harness restores it from the input before every run."""
    inputs = spec.make_inputs(case_name, variant)
    # on copies: a reference that updates a tensor in place (as the kernel does) must not change its input data
    expected = spec.reference({k: (v.clone() if hasattr(v, "clone") else v) for k, v in inputs.items()},
                              case_name, variant)
    config = next(c for c in spec.configs if spec.variant_of(c) == variant)
    launch = spec.capture_launch(case_name, config, inputs)
    fed = {a.tensor for a in launch.tensor_args}
    unfed = sorted(set(expected) - fed)
    if unfed:
        raise GoldenError(
            f"kernel module {spec.path}: reference output {unfed[0]!r} is not passed to the kernel by launch(): "
            "nothing would check it"
        )
    stray = sorted((spec.inout or frozenset()) - set(expected))
    if stray:
        raise GoldenError(f"kernel module {spec.path}: INOUT names {stray[0]!r}, which reference() does not return: "
                          "an in-place tensor is an output (return its expected value from reference())")
    inout = inout | (read_tensors(spec, launch) & set(expected)) if spec.inout is None else spec.inout
    out = []
    for index, tensor, a in _tensor_args(launch):
        roles = ("input", "expected") if tensor in inout else ("expected",) if tensor in expected else ("input",)
        for role in roles:
            data = expected[tensor] if role == "expected" else inputs[tensor]
            if role == "expected" and tuple(data.shape) != tuple(inputs[tensor].shape):
                raise GoldenError(
                    f"kernel module {spec.path}: reference output {tensor!r} has shape {tuple(data.shape)}, its "
                    f"buffer {tuple(inputs[tensor].shape)}"
                )
            if role == "expected" and not spec.expect_nan:
                _refuse_nan(spec, case_name, tensor, data)
            out.append(_Tensor(a.name, tensor, role, tuple(data.shape), dtype_name(data), data, index))
    return out


def _refuse_nan(spec: KernelSpec, case_name: str, tensor: str, data: Any) -> None:
    """A NaN in reference()'s output is nearly always its own bug (a log or sqrt of a negative input, 0/0); the
    harness then fails every kernel that computes a number there with "max abs error inf"."""
    import torch

    if not (torch.is_tensor(data) and data.is_floating_point()):
        return
    nans = torch.isnan(data.reshape(-1))
    count = int(nans.sum())
    if count:
        first = int(nans.nonzero()[0, 0])
        raise GoldenError(
            f"kernel module {spec.path}: reference() output {tensor!r} of case {case_name} holds {count} NaN "
            f"value(s) of {data.numel()}, the first at flat index {first}: check reference() (a log or sqrt of a "
            "negative input, 0/0); if the kernel must make NaN there, set EXPECT_NAN = True in the module (a NaN "
            "then matches only a NaN)")


def _prefix(variant: Mapping[str, Any]) -> str:
    return "".join(f"{k}_{v}_" for k, v in variant.items())


def build_case(spec: KernelSpec, case_name: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest entry, file name -> bytes) of one case, all variants; nothing is written."""
    import torch

    variants = spec.variants()
    per_variant = [_variant_tensors(spec, case_name, v) for v in variants]
    inout = frozenset(t.tensor for tensors in per_variant for t in tensors if t.role == "input") & \
        frozenset(t.tensor for tensors in per_variant for t in tensors if t.role == "expected")
    if len({len(tensors) for tensors in per_variant}) > 1:  # one variant's config reads a tensor another's not
        per_variant = [_variant_tensors(spec, case_name, v, inout) for v in variants]
    n_args = len(per_variant[0])
    contents: dict[str, bytes] = {}
    entry_variants: dict[str, Any] = {}
    names: list[list[str]] = [[] for _ in variants]
    for i in range(n_args):
        column = [tensors[i] for tensors in per_variant]
        shared = all(t.shape == column[0].shape and torch.equal(t.data, column[0].data) for t in column)
        first_bytes = format_txt(column[0].data) if shared else b""
        for vi, (v, t) in enumerate(zip(variants, column, strict=True)):
            # The seeds' spelling: the tensor's own shape, 1-D as its TXT shape (1x2064).
            shape = "x".join(str(s) for s in (t.shape if len(t.shape) >= 2 else txt_shape(t.shape)))
            # an in-place tensor's expected file beside its input file: matrix_..._{idx}_expected.txt
            tail = "_expected" if t.role == "expected" and any(
                o.index == t.index and o.role == "input" for o in per_variant[vi]) else ""
            name = f"matrix_{'' if shared else _prefix(v)}{shape}_{t.index}{tail}.txt"
            if name not in contents:
                contents[name] = first_bytes if shared else format_txt(t.data)
            names[vi].append(name)
    for vi, v in enumerate(variants):
        entry_variants[variant_id(v)] = {
            "variant": v,
            "files": [
                {
                    "file": name,
                    "arg": t.arg,
                    "tensor": t.tensor,
                    "role": t.role,
                    "shape": list(t.shape),
                    "dtype": t.dtype,
                    "sha256": hashlib.sha256(contents[name]).hexdigest(),
                }
                for name, t in zip(names[vi], per_variant[vi], strict=True)
            ],
        }
    entry = {
        "seed": spec.seed,
        "params": _jsonable(spec.cases[case_name]),
        "committed": case_name in COMMITTED_CASES,
        "variants": entry_variants,
    }
    return entry, contents


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=list))


def generate_case(
    spec: KernelSpec, case_name: str, store: Store, location: Path | None = None, record: bool = True
) -> dict[str, Any]:
    """Write one case's files (unchanged files are not rewritten) and, with ``record``, its manifest entry."""
    if record and is_imported(store.load_manifest(spec.name, writing=True)["cases"].get(case_name)):
        raise GoldenError(
            f"kernel {spec.name} case {case_name} holds imported golden data, which is never regenerated; to "
            f"generate it instead, delete the case's entry from {store.manifest_path(spec.name)}"
        )
    entry, contents = build_case(spec, case_name)
    base = location or store.case_dir(spec.name, case_name)
    for name, data in contents.items():
        if _file_sha(base / name) != hashlib.sha256(data).hexdigest():
            _atomic_write(base / name, data)
    if record:
        manifest = store.load_manifest(spec.name, writing=True)
        manifest["cases"][case_name] = entry
        manifest["cases"] = {c: manifest["cases"][c] for c in sorted(manifest["cases"], key=_case_order(spec))}
        store.save_manifest(spec.name, manifest)
        # Files of this case that no variant lists any more (e.g. a changed shape) would linger: drop them.
        for stale in base.glob("matrix_*.txt"):
            if stale.name not in contents:
                stale.unlink()
    return entry


def _case_order(spec: KernelSpec):
    order = list(spec.cases)
    return lambda c: (order.index(c) if c in order else len(order), c)


def verify_kernel(
    spec: KernelSpec, store: Store, cases: Sequence[str] | None = None, regenerate: bool = True
) -> list[str]:
    """Problems with one kernel's golden data (empty = all good), each naming the file or case and the fix.

    Checks that every case of the module is recorded with its current parameters and seed, that every present
    file has its recorded hash (committed files must be present), and, with ``regenerate``, that generating
    afresh gives the recorded bytes (drift of make_inputs / reference).
    """
    problems: list[str] = []
    fix = f"`rvtune golden generate --kernel {spec.name}`"
    try:
        manifest = store.load_manifest(spec.name)
    except GoldenError as e:
        return [str(e)]
    recorded = manifest["cases"]
    for case_name in cases or list(spec.cases):
        if case_name not in spec.cases:
            problems.append(f"{spec.name}: no case {case_name!r} in {spec.path}")
            continue
        entry = recorded.get(case_name)
        if entry is None:
            problems.append(f"{spec.name} case {case_name}: no golden data recorded; run {fix} --case {case_name}")
            continue
        if is_imported(entry):
            problems += _verify_imported(spec, store, case_name, entry)
            continue
        if entry.get("params") != _jsonable(spec.cases[case_name]) or entry.get("seed") != spec.seed:
            problems.append(
                f"{spec.name} case {case_name}: drift: the manifest records params {entry.get('params')} seed "
                f"{entry.get('seed')}, the module has {spec.cases[case_name]} seed {spec.seed}; "
                f"run {fix} --case {case_name}"
            )
            continue
        base = store.case_dir(spec.name, case_name)
        files = {f["file"]: f["sha256"] for v in entry["variants"].values() for f in v["files"]}
        for name, sha in files.items():
            got = _file_sha(base / name)
            if got is None:
                if case_name in COMMITTED_CASES:
                    problems.append(f"golden file {base / name}: missing (committed data); restore it from git")
            elif got != sha:
                problems.append(f"golden file {base / name}: corrupted (sha256 {got}, manifest {sha})")
        if regenerate:
            try:
                fresh, contents = build_case(spec, case_name)
            except Exception as e:
                problems.append(f"{spec.name} case {case_name}: regenerating failed: {e}")
                continue
            if fresh["variants"] != entry["variants"]:
                changed = sorted(
                    n for n, data in contents.items() if files.get(n) != hashlib.sha256(data).hexdigest()
                ) + sorted(set(files) - set(contents))
                problems.append(
                    f"{spec.name} case {case_name}: drift: regenerating from {spec.path.name} gives other data "
                    f"({', '.join(changed) or 'file list'}); run {fix} --case {case_name} if intended"
                )
    for case_name in recorded:
        if case_name not in spec.cases and not cases:
            problems.append(
                f"{spec.name}: the manifest records case {case_name!r}, which {spec.path.name} no longer has"
            )
    return problems


def _verify_imported(spec: KernelSpec, store: Store, case_name: str, entry: dict[str, Any]) -> list[str]:
    """Problems with an imported case: its files must be present with their recorded hashes, and the module's
    case must still have the parameters the files were imported for (they give the scalars and grid)."""
    problems = []
    again = f"`rvtune golden import --kernel {spec.name} --case {case_name} ...`"
    params = entry.get("params")
    if params is not None and params != _jsonable(spec.cases[case_name]):
        problems.append(
            f"{spec.name} case {case_name}: the imported files were for params {params}, the module now has "
            f"{spec.cases[case_name]}; restore the case's parameters in {spec.path.name} or import files for them "
            f"with {again}"
        )
    base = store.case_dir(spec.name, case_name, imported=True)
    for v in entry["variants"].values():
        for f in v["files"]:
            got = _file_sha(base / f["file"])
            if got is None:
                problems.append(f"imported golden file {base / f['file']}: missing; restore it from git or {again}")
            elif got != f["sha256"]:
                problems.append(
                    f"imported golden file {base / f['file']}: changed since it was imported (sha256 {got}, "
                    f"manifest {f['sha256']}); restore it from git, or import it again with {again}"
                )
    return problems


# ---- import -------------------------------------------------------------------------------------
IMPORTED = "imported"
ROLES = ("input", "expected")


def is_imported(entry: Mapping[str, Any] | None) -> bool:
    """Whether a manifest case entry holds imported files (never regenerated)."""
    return entry is not None and entry.get("source") == IMPORTED


def import_files(
    store: Store,
    kernel: str,
    case: str,
    variant: Mapping[str, Any],
    files: Mapping[str, Path | str],
    roles: Mapping[str, str],
    *,
    dtypes: Mapping[str, str] | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    args: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Adopt existing golden TXT files as one variant of a case, without computing anything; the case's entry.

    ``files``: tensor name -> TXT file, in kernel-argument order; ``roles``: tensor name -> "input" or
    "expected" (what the kernel must write there). Optional per tensor: ``dtypes`` (default fp32), ``shapes``
    (the tensor's shape; checked against the file's `rows cols`, default that TXT shape) and ``args`` (the
    kernel parameter, default the tensor name); ``params``: the case's parameters the files are for (recorded,
    so `rvtune golden verify` notices when the module's case changes).

    Every file is read (GoldenFormatError names the file and line of a bad value), then copied byte for byte
    into golden/<kernel>/<case>/ and recorded with its sha256 under ``"source": "imported"``; other variants
    imported before are kept. A case generated before is replaced.
    """
    dtypes, shapes, args = dict(dtypes or {}), dict(shapes or {}), dict(args or {})
    what = f"import into kernel {kernel} case {case}"
    if not files:
        raise GoldenError(f"{what}: no files given")
    for extra, known in ((roles, "roles"), (dtypes, "dtypes"), (shapes, "shapes"), (args, "args")):
        stray = sorted(set(extra) - set(files))
        if stray:
            raise GoldenError(f"{what}: {known} names tensor {stray[0]!r}, which has no file (files: {list(files)})")
    for tensor in files:
        if roles.get(tensor) not in ROLES:
            role = roles.get(tensor)
            raise GoldenError(f"{what}: tensor {tensor!r} needs the role 'input' or 'expected', not {role!r}")
        if dtypes.get(tensor, "fp32") not in _DTYPES:
            raise GoldenError(f"{what}: tensor {tensor!r}: unknown dtype {dtypes[tensor]!r} (known: {sorted(_DTYPES)})")
    if "expected" not in roles.values():
        raise GoldenError(f"{what}: no file has role 'expected': nothing would check the kernel's output")

    base = store.case_dir(kernel, case, imported=True)
    vid = variant_id(dict(variant))
    records, contents = [], {}
    for i, (tensor, path) in enumerate(files.items()):
        path, dtype = Path(path), dtypes.get(tensor, "fp32")
        rows, cols = read_txt(path, dtype).shape  # every value parses into the dtype, else file:line
        shape = tuple(int(n) for n in shapes.get(tensor, (rows, cols)))
        if txt_shape(shape) != (rows, cols):
            raise GoldenError(
                f"golden file {path}: holds {rows} x {cols} values, but tensor {tensor!r} of kernel {kernel} case "
                f"{case} has shape {shape} ({' x '.join(map(str, txt_shape(shape)))} in TXT): import the file "
                f"written for this case, or give the case the parameters the file was written for"
            )
        name = "x".join(str(n) for n in (shape if len(shape) >= 2 else txt_shape(shape)))
        name = f"matrix_{_prefix(variant)}{name}_{i + 1}.txt"
        contents[name] = path.read_bytes()
        records.append({
            "file": name,
            "arg": args.get(tensor, tensor),
            "tensor": tensor,
            "role": roles[tensor],
            "shape": list(shape),
            "dtype": dtype,
            "sha256": hashlib.sha256(contents[name]).hexdigest(),
            "imported_from": path.name,
        })

    manifest = store.load_manifest(kernel, writing=True)
    entry = manifest["cases"].get(case)
    if not is_imported(entry):
        entry = {"source": IMPORTED, "params": None, "committed": True, "variants": {}}
    if params is not None:
        entry["params"] = _jsonable(dict(params))
    entry["variants"][vid] = {"variant": _jsonable(dict(variant)), "files": records}
    for name, data in contents.items():
        _atomic_write(base / name, data)
    manifest["cases"][case] = entry
    store.save_manifest(kernel, manifest)
    listed = {f["file"] for v in entry["variants"].values() for f in v["files"]}
    for stale in base.glob("matrix_*.txt"):  # e.g. a generated case's files, or a shape imported before
        if stale.name not in listed:
            stale.unlink()
    return entry


def import_for_kernel(
    spec: KernelSpec,
    store: Store,
    case_name: str,
    variant: Mapping[str, Any],
    files: Mapping[str, Path | str],
    roles: Mapping[str, str],
) -> dict[str, Any]:
    """``import_files`` for a kernel module's case: the tensors must be exactly the ones launch() passes, each
    file must have the shape the case gives its tensor, and dtypes come from the module's tensors.

    ``variant`` may spell values as text (``{"BLOCK_SIZE_M": "16"}``): it is matched against the module's.
    """
    what = f"kernel {spec.name}"
    if case_name not in spec.cases:
        raise GoldenError(
            f"{what} has no case {case_name!r} (cases: {', '.join(spec.cases)}): add it to CASES in "
            f"{spec.path.name} first; its parameters give the kernel's scalar arguments and grid"
        )
    wanted = {k: str(v) for k, v in variant.items()}
    match = [v for v in spec.variants() if {k: str(x) for k, x in v.items()} == wanted]
    if not match:
        known = ", ".join(variant_id(v) for v in spec.variants())
        keys = ",".join(f"{k}=V" for k in spec.variant_keys)
        raise GoldenError(
            f"{what}: no data variant {variant_id(variant) or '(none)'!r}; "
            + (f"give --variant {keys}, one of: {known}" if spec.variant_keys else "it has no VARIANT_KEYS")
        )
    variant = match[0]
    config = next(c for c in spec.configs if spec.variant_of(c) == variant)
    inputs = spec.make_inputs(case_name, variant)
    tensors = {tensor: a for _, tensor, a in _tensor_args(spec.capture_launch(case_name, config, inputs))}
    unknown = [t for t in files if t not in tensors]
    if unknown:
        raise GoldenError(
            f"{what}: no tensor {unknown[0]!r} is passed to the kernel (its tensors, by their names in "
            f"make_inputs: {', '.join(tensors)})"
        )
    missing = [t for t in tensors if t not in files]
    if missing:
        t = missing[0]
        raise GoldenError(
            f"{what}: tensor {t!r} (argument {tensors[t].name}) has no file: give --input {t}=PATH, or "
            f"--expected {t}=PATH if it holds what the kernel writes"
        )
    return import_files(
        store, spec.name, case_name, variant,
        {t: files[t] for t in tensors},  # kernel-argument order
        roles,
        dtypes={t: dtype_name(inputs[t]) for t in tensors},
        shapes={t: tuple(inputs[t].shape) for t in tensors},
        args={t: a.name for t, a in tensors.items()},
        params=spec.cases[case_name],
    )  # fmt: skip
