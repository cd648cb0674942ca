"""`rvtune golden import` and golden.import_files: existing TXT files adopted as a case's data, byte for byte.

The files here are written by our own code in the formats Triton_RVV's writers produce: its Python
save_matrices_to_txt (`%.9f`, values joined by one space) and its C++ writeMatrix (`%.6f ` after every value,
so each row ends in a space).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_rvtune import cli
from pytest_rvtune.golden import (
    GoldenError,
    GoldenFormatError,
    Store,
    build_case,
    golden_set,
    import_files,
    read_txt,
    verify_kernel,
)
from pytest_rvtune.spec import load_kernel_module

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def write_python_format(path: Path, array: np.ndarray) -> Path:
    """Triton_RVV's save_matrices_to_txt with its defaults: `rows cols`, then `%.9f` values joined by spaces."""
    rows = array.reshape(-1, array.shape[-1])
    lines = [f"{rows.shape[0]} {rows.shape[1]}"] + [" ".join(f"{v:.9f}" for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_cpp_format(path: Path, array: np.ndarray) -> Path:
    """Triton_RVV's writeMatrix: `rows cols`, then `%.6f ` per value and a newline per row."""
    rows = array.reshape(-1, array.shape[-1])
    text = f"{rows.shape[0]} {rows.shape[1]}\n" + "".join("".join(f"{v:.6f} " for v in row) + "\n" for row in rows)
    path.write_text(text)
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def matmul():
    return load_kernel_module(KERNELS / "matmul.py")


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    return tmp_path / "golden"


def matmul_files(d: Path, m: int, n: int, k: int) -> dict[str, Path]:
    """A from the Python writer, B from the C++ writer, C = A @ B from the Python writer."""
    g = np.random.default_rng(7)
    a = g.uniform(-1, 1, (m, k)).astype(np.float32)
    b = g.uniform(-1, 1, (k, n)).astype(np.float32)
    d.mkdir(parents=True, exist_ok=True)
    return {
        "a": write_python_format(d / f"matrix_{m}x{k}_1.txt", a),
        "b": write_cpp_format(d / f"matrix_{k}x{n}_2.txt", b),
        "c": write_python_format(d / f"matrix_{m}x{n}_3.txt", a.astype(np.float64) @ b.astype(np.float64)),
    }


def import_cli(golden: Path, case: str, files: dict[str, Path], *extra: str, kernel: str = "matmul",
               kernels: Path = KERNELS) -> int:
    args = ["golden", "import", "--kernel", kernel, "--case", case, "--kernels-dir", str(kernels),
            "--golden-dir", str(golden), *extra]
    for tensor, path in files.items():
        args += ["--expected" if tensor == "c" else "--input", f"{tensor}={path}"]
    return cli.main(args)


def test_import_records_sha256_and_source_and_copies_both_writers_files(matmul, golden, tmp_path, capsys):
    files = matmul_files(tmp_path / "theirs", 67, 45, 33)  # the small case: M=67, N=45, K=33
    assert import_cli(golden, "small", files) == 0
    assert f"matmul small: imported 3 files -> {golden / 'matmul' / 'small'}" in capsys.readouterr().out
    entry = json.loads((golden / "matmul" / "manifest.json").read_text())["cases"]["small"]
    assert entry["source"] == "imported" and entry["params"] == {"M": 67, "N": 45, "K": 33}
    recorded = entry["variants"][""]["files"]
    assert [(f["arg"], f["tensor"], f["role"], f["shape"], f["dtype"]) for f in recorded] == [
        ("a_ptr", "a", "input", [67, 33], "fp32"),
        ("b_ptr", "b", "input", [33, 45], "fp32"),
        ("c_ptr", "c", "expected", [67, 45], "fp32"),
    ]
    for f in recorded:
        original = files[f["tensor"]]
        copy = golden / "matmul" / "small" / f["file"]
        assert f["imported_from"] == original.name and f["sha256"] == sha(original)
        assert copy.read_bytes() == original.read_bytes()
    assert (golden / "matmul" / "small" / recorded[1]["file"]).read_text().splitlines()[1].endswith(" ")


def test_golden_set_uses_imported_files_byte_for_byte_and_never_regenerates(matmul, golden, tmp_path):
    files = matmul_files(tmp_path / "theirs", 160, 160, 160)  # the emu case: a cache case when generated
    assert import_cli(golden, "emu", files) == 0
    store = Store(root=golden, cache=tmp_path / "cache")
    gs = golden_set(matmul, "emu", matmul.configs[0], store)
    assert [(f.tensor, f.path.parent) for f in gs.files] == [(t, golden / "matmul" / "emu") for t in "abc"]
    assert all(f.path.read_bytes() == files[f.tensor].read_bytes() for f in gs.files)
    assert not (tmp_path / "cache").exists()  # nothing generated
    assert verify_kernel(matmul, store, ["emu"]) == []
    # values the writer rounded (%.6f) are what the harness gets: the reference is not recomputed
    b = read_txt(gs.files[1].path)
    assert not np.array_equal(b, np.random.default_rng(7).uniform(-1, 1, (160, 160)).astype(np.float32))


def test_a_changed_imported_file_is_drift(matmul, golden, tmp_path, capsys):
    files = matmul_files(tmp_path / "theirs", 67, 45, 33)
    assert import_cli(golden, "small", files) == 0
    store = Store(root=golden, cache=tmp_path / "cache")
    victim = golden_set(matmul, "small", matmul.configs[0], store).files[2].path
    victim.write_bytes(victim.read_bytes().replace(b"0", b"1", 1))
    with pytest.raises(GoldenError, match=f"imported golden file {victim} changed since it was imported"):
        golden_set(matmul, "small", matmul.configs[0], store)
    (problem,) = verify_kernel(matmul, store, ["small"])
    assert problem.startswith(f"imported golden file {victim}: changed since it was imported")
    # generate keeps imported cases as they are: the changed file is not silently replaced by generated data
    changed = victim.read_bytes()
    args = ["--kernel", "matmul", "--case", "small", "--kernels-dir", str(KERNELS), "--golden-dir", str(golden)]
    assert cli.main(["golden", "generate", *args]) == 0
    assert "matmul small: imported data, kept" in capsys.readouterr().out
    assert victim.read_bytes() == changed
    victim.unlink()
    with pytest.raises(GoldenError, match=f"imported golden file {victim} is missing: restore it with git"):
        golden_set(matmul, "small", matmul.configs[0], store)


def test_verify_names_a_case_whose_parameters_changed_since_the_import(golden, tmp_path):
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    shutil.copy(KERNELS / "matmul.py", kdir / "matmul.py")
    assert import_cli(golden, "small", matmul_files(tmp_path / "theirs", 67, 45, 33), kernels=kdir) == 0
    (kdir / "matmul.py").write_text((kdir / "matmul.py").read_text().replace("dict(M=67,", "dict(M=68,"))
    (problem,) = verify_kernel(load_kernel_module(kdir / "matmul.py"), Store(root=golden), ["small"])
    assert "the imported files were for params {'M': 67, 'N': 45, 'K': 33}, the module now has" in problem


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f, d: {**f, "x": f["a"]}, "kernel matmul: no tensor 'x' is passed to the kernel (its tensors, by "
                                          "their names in make_inputs: a, b, c)"),
        (lambda f, d: {"a": f["a"], "c": f["c"]}, "tensor 'b' (argument b_ptr) has no file: give --input b=PATH"),
        (lambda f, d: {**f, "a": f["b"]}, "holds 33 x 45 values, but tensor 'a' of kernel matmul case small has "
                                          "shape (67, 33) (67 x 33 in TXT): import the file written for this case"),
        (lambda f, d: {**f, "b": write_bad(d)}, ":3: 'nan7' (column 2) is not a valid fp32 value: fix that value"),
    ],
    ids=["unknown tensor", "missing tensor", "shape mismatch", "bad value"],
)
def test_cli_errors_name_the_thing_and_write_nothing(golden, tmp_path, capsys, change, message):
    files = change(matmul_files(tmp_path / "theirs", 67, 45, 33), tmp_path)
    assert import_cli(golden, "small", files) == 2
    err = capsys.readouterr().err
    assert err.startswith("rvtune golden import: ") and message in err
    assert not golden.exists()


def write_bad(d: Path) -> Path:
    """A 33 x 45 file (b of the small case) with one bad value, on line 3, column 2."""
    path = write_cpp_format(d / "bad.txt", np.zeros((33, 45), dtype=np.float32))
    lines = path.read_text().splitlines()
    words = lines[2].split()
    words[1] = "nan7"
    lines[2] = " ".join(words)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case", "huge"], "kernel matmul has no case 'huge' (cases: small, emu, bench): add it to CASES"),
        (["--case", "small", "--input", "a"], "--input 'a': expected TENSOR=PATH"),
        (["--case", "small", "--input", "c=x.txt", "--expected", "c=y.txt"], "tensor 'c' is given as --input and"),
        (["--case", "small", "--input", "a=x.txt"], "no --expected TENSOR=PATH: nothing would check"),
        (["--case", "small", "--variant", "BLOCK_SIZE_M=16", "--expected", "c=y.txt"],
         "kernel matmul: no data variant 'BLOCK_SIZE_M=16'; it has no VARIANT_KEYS"),
        (["--case", "small", "--kernel", "nosuch", "--expected", "c=y.txt"], "no kernel module 'nosuch'"),
    ],
)
def test_cli_usage_errors(golden, capsys, args, message):
    base = ["golden", "import", "--kernel", "matmul", "--kernels-dir", str(KERNELS), "--golden-dir", str(golden)]
    if "--expected" not in args and "--input" not in args:
        args = [*args, "--expected", "c=y.txt"]
    assert cli.main([*base, *args]) == 2
    assert message in capsys.readouterr().err
    assert not golden.exists()


def test_import_per_data_variant(tmp_path, golden):
    # fused_moe's data differs per BLOCK_SIZE_M: import two variants' files (written here by our generator)
    moe = load_kernel_module(KERNELS / "fused_moe.py")
    entry, contents = build_case(moe, "small")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    for name, data in contents.items():
        (theirs / name).write_bytes(data)
    for vid in ("BLOCK_SIZE_M=16", "BLOCK_SIZE_M=4"):
        args = ["golden", "import", "--kernel", "fused_moe", "--case", "small", "--variant", vid,
                "--kernels-dir", str(KERNELS), "--golden-dir", str(golden)]
        for f in entry["variants"][vid]["files"]:
            args += [f"--{'expected' if f['role'] == 'expected' else 'input'}", f"{f['tensor']}={theirs / f['file']}"]
        assert cli.main(args) == 0
    store = Store(root=golden, cache=tmp_path / "cache")
    imported = store.load_manifest("fused_moe")["cases"]["small"]
    assert sorted(imported["variants"]) == ["BLOCK_SIZE_M=16", "BLOCK_SIZE_M=4"]  # the first one is kept
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    gs = golden_set(moe, "small", config, store)
    by_tensor = {f["tensor"]: f["file"] for f in entry["variants"]["BLOCK_SIZE_M=16"]["files"]}
    assert all(f.path.read_bytes() == contents[by_tensor[f.tensor]] for f in gs.files)
    with pytest.raises(GoldenError, match=r"no variant 'BLOCK_SIZE_M=32'; import its files with `rvtune golden "
                                          r"import --kernel fused_moe --case small --variant BLOCK_SIZE_M=32`"):
        golden_set(moe, "small", {**config, "BLOCK_SIZE_M": 32}, store)


def test_import_files_without_a_kernel_module(tmp_path):
    # the project importer's entry point: names, roles and dtypes from the caller, shapes from the files
    d = tmp_path / "theirs"
    d.mkdir()
    x = write_python_format(d / "matrix_1x4_1.txt", np.array([[0.1, -2.5, 65504.0, 1e-7]]))
    y = write_cpp_format(d / "matrix_2x2_2.txt", np.array([[1.0, 2.0], [3.0, 4.0]]))
    store = Store(root=tmp_path / "golden", cache=tmp_path / "cache")
    entry = import_files(store, "their_kernel", "seeds", {}, {"x": x, "y": y}, {"x": "input", "y": "expected"},
                         dtypes={"x": "fp16"}, shapes={"x": (4,)})
    assert entry["source"] == "imported" and entry["params"] is None
    assert [(f["tensor"], f["arg"], f["shape"], f["dtype"], f["file"]) for f in entry["variants"][""]["files"]] == [
        ("x", "x", [4], "fp16", "matrix_1x4_1.txt"), ("y", "y", [2, 2], "fp32", "matrix_2x2_2.txt")]
    assert store.load_manifest("their_kernel")["cases"]["seeds"] == entry
    assert (tmp_path / "golden" / "their_kernel" / "seeds" / "matrix_2x2_2.txt").read_bytes() == y.read_bytes()
    assert read_txt(tmp_path / "golden" / "their_kernel" / "seeds" / "matrix_1x4_1.txt", "fp16").tolist() == [
        [np.float16(0.1), -2.5, 65504.0, np.float16(1e-7)]]

    big = write_python_format(d / "big.txt", np.array([[1.0, 70000.0]]))
    with pytest.raises(GoldenFormatError, match=r"big\.txt:2: '70000\.000000000' \(column 2\) is beyond the range "
                                                r"of fp16"):
        import_files(store, "their_kernel", "big", {}, {"x": big}, {"x": "expected"}, dtypes={"x": "fp16"})
    with pytest.raises(GoldenError, match="tensor 'x' needs the role 'input' or 'expected', not 'output'"):
        import_files(store, "their_kernel", "seeds", {}, {"x": x}, {"x": "output"})
    with pytest.raises(GoldenError, match="no file has role 'expected'"):
        import_files(store, "their_kernel", "seeds", {}, {"x": x}, {"x": "input"})
    with pytest.raises(GoldenError, match=r"tensor 'x' of kernel their_kernel case seeds has shape \(3,\)"):
        import_files(store, "their_kernel", "seeds", {}, {"x": x}, {"x": "expected"}, shapes={"x": (3,)})


def test_imported_bf16_text_reads_as_exact_bf16_values_held_in_float32(tmp_path):
    # rounded to nearest even like torch for these values; numpy has no bfloat16
    x = write_python_format(tmp_path / "x.txt", np.array([[0.1, 3.0]]))
    got = read_txt(x, "bf16")
    assert got.dtype == np.float32
    assert got.tolist() == torch.tensor([[0.1, 3.0]], dtype=torch.bfloat16).float().tolist()
