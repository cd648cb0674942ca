"""Golden data: TXT format, moe_align_block_size, generation, manifest, verify, golden_set, the CLI."""

from __future__ import annotations

import json
import os
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
    format_txt,
    generate_case,
    golden_set,
    read_tensor,
    read_txt,
    verify_kernel,
    write_txt,
)
from pytest_rvtune.moe_align import moe_align_block_size
from pytest_rvtune.spec import discover, load_kernel_module

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "kernels"


@pytest.fixture(scope="module")
def moe():
    return load_kernel_module(KERNELS / "fused_moe.py")


@pytest.fixture
def store(tmp_path):
    return Store(root=tmp_path / "golden", cache=tmp_path / "cache")


# ---- TXT format ----------------------------------------------------------------------------------
def test_txt_round_trip_is_exact(tmp_path):
    g = torch.Generator().manual_seed(1)
    special = torch.tensor([0.0, -0.0, 1e-45, -3.4028235e38, 1 / 3, 16777217.0, 1.17549435e-38])
    x = torch.cat([torch.randn(61, generator=g) * 1e3, special]).reshape(4, 17)
    write_txt(tmp_path / "x.txt", x)
    back = read_txt(tmp_path / "x.txt", "fp32")
    assert back.dtype == np.float32 and back.tobytes() == x.numpy().tobytes()  # bit-exact, -0.0 included

    ids = torch.tensor([[-(2**31), 0, 2**31 - 1]], dtype=torch.int32)
    write_txt(tmp_path / "i.txt", ids)
    assert (read_txt(tmp_path / "i.txt", "i32") == ids.numpy()).all()


def test_txt_shapes_follow_the_seeds():
    assert format_txt(torch.tensor([1, 2, 3], dtype=torch.int32)) == b"1 3\n1 2 3\n"
    three_d = format_txt(torch.arange(24, dtype=torch.float32).reshape(2, 3, 4))
    lines = three_d.decode().splitlines()
    assert lines[0] == "6 4" and lines[1] == "0 1 2 3" and len(lines) == 7


@pytest.mark.parametrize(
    ("content", "line", "cause"),
    [
        ("", 1, "first line must be `rows cols`"),
        ("2 x\n1 2\n", 1, "first line must be `rows cols`"),
        ("3 2\n1 2\n3 4\n", 4, "short file: 3 rows declared, only 2 present"),
        ("2 2\n1 2\n3\n", 3, "row 1 has 1 values, 2 declared"),
        ("2 2\n1 2\n3 abc\n", 3, "'abc' (column 2) is not a valid fp32 value: fix that value"),
        ("1 2\n1 2\n5 6\n", 3, "extra data after the 1 declared rows"),
    ],
)
def test_txt_reader_names_file_and_line(tmp_path, content, line, cause):
    path = tmp_path / "matrix_2x2_1.txt"
    path.write_text(content)
    with pytest.raises(GoldenFormatError) as info:
        read_txt(path)
    assert info.value.line == line
    assert f"{path}:{line}" in str(info.value) and cause in str(info.value)


def test_txt_reader_missing_file_and_bad_ints(tmp_path):
    with pytest.raises(GoldenFormatError, match=r"nope\.txt: missing"):
        read_txt(tmp_path / "nope.txt")
    (tmp_path / "i.txt").write_text("1 2\n1 2.5\n")
    with pytest.raises(GoldenFormatError, match=r"i\.txt:2: '2\.5' \(column 2\) is not a valid i32 value"):
        read_txt(tmp_path / "i.txt", "i32")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_every_16_bit_value_round_trips_through_txt(tmp_path, dtype):
    bits = np.arange(65536, dtype=np.uint32)
    if dtype == torch.float16:
        x = torch.from_numpy(bits.astype(np.uint16).view(np.float16).copy())
    else:
        x = torch.from_numpy((bits << 16).view(np.float32).copy()).to(torch.bfloat16)
    write_txt(tmp_path / "x.txt", x.reshape(256, 256))
    name = "fp16" if dtype == torch.float16 else "bf16"
    back = torch.from_numpy(read_txt(tmp_path / "x.txt", name)).to(dtype).reshape(-1)
    same = (back.view(torch.int16) == x.view(torch.int16)) | (back.isnan() & x.isnan())
    assert same.all(), torch.nonzero(~same)[:5]


def test_16_bit_txt_uses_the_digits_that_round_trip():
    assert format_txt(torch.tensor([0.1, -2.5, 65504.0], dtype=torch.float16)) == b"1 3\n0.099976 -2.5 65504\n"
    assert format_txt(torch.tensor([0.1, 3.0e38], dtype=torch.bfloat16)) == b"1 2\n0.1001 3.004e+38\n"
    # a float32 array written as bf16 is rounded first, once, to nearest even
    assert format_txt(np.array([1 + 2**-8 + 2**-20], dtype=np.float32), "bf16") == b"1 1\n1.008\n"


def test_16_bit_reader_rounds_once_to_nearest_even(tmp_path):
    # just above a half-way point: torch's float64 -> bf16 rounds through float32, twice, down to 1.0
    value = 1 + 2**-8 + 2**-30
    (tmp_path / "v.txt").write_text(f"1 2\n{value!r} {-value!r}\n")
    assert read_txt(tmp_path / "v.txt", "bf16").tolist() == [[1 + 2**-7, -(1 + 2**-7)]]
    assert torch.tensor(value, dtype=torch.float64).to(torch.bfloat16).item() == 1.0
    value = 1 + 2**-11 + 2**-40  # the same for fp16 (numpy rounds float64 -> fp16 once)
    (tmp_path / "h.txt").write_text(f"1 1\n{value!r}\n")
    assert read_txt(tmp_path / "h.txt", "fp16").tolist() == [[1 + 2**-10]]


@pytest.mark.parametrize(("dtype", "value", "largest"), [
    ("fp16", "65520", "65504"),  # the half-way point to 2**16 rounds to even: infinity
    ("bf16", "3.4e38", "3.38953139e+38"),
    ("fp32", "1e39", "3.40282347e+38"),
])
def test_a_value_beyond_the_dtype_range_is_an_error_naming_line_and_column(tmp_path, dtype, value, largest):
    (tmp_path / "v.txt").write_text(f"2 2\n1 2\n3 {value}\n")
    with pytest.raises(GoldenFormatError) as info:
        read_txt(tmp_path / "v.txt", dtype)
    assert str(info.value) == (f"golden file {tmp_path / 'v.txt'}:3: '{value}' (column 2) is beyond the range of "
                               f"{dtype} (largest {largest}): the file does not hold {dtype} data")
    (tmp_path / "inf.txt").write_text("1 2\ninf -inf\n")  # infinities written as such are values
    assert np.isinf(read_txt(tmp_path / "inf.txt", dtype)).all()


# ---- moe_align_block_size ------------------------------------------------------------------------
def test_moe_align_pads_each_expert_to_the_block():
    # The seeds' example: tokens per expert [7, 5, 2, 2], BLOCK_SIZE_M 4 -> [8, 8, 4, 4].
    topk_ids = torch.tensor([0] * 7 + [1] * 5 + [2] * 2 + [3] * 2)[
        torch.randperm(16, generator=torch.Generator().manual_seed(0))
    ]
    sorted_ids, expert_ids, em = moe_align_block_size(topk_ids.reshape(-1, 1), 4, 4)
    assert em.tolist() == [24] and sorted_ids.shape == (24,)
    assert expert_ids.tolist() == [0, 0, 1, 1, 2, 3]
    pad = topk_ids.numel()
    for e, (start, padded) in enumerate([(0, 8), (8, 8), (16, 4), (20, 4)]):
        block = sorted_ids[start : start + padded]
        real = block[block != pad]
        assert real.tolist() == torch.nonzero(topk_ids == e).reshape(-1).tolist()  # ascending slot ids
        assert (block[len(real) :] == pad).all()
    # Already multiples of the block: no padding.
    _, _, em = moe_align_block_size(torch.arange(4).repeat_interleave(4).reshape(-1, 2), 4, 4)
    assert em.tolist() == [16]


def test_moe_align_expert_without_tokens_gets_no_block():
    topk_ids = torch.tensor([[0, 2], [2, 0], [0, 2]])  # expert 1 idle, top_k 2
    sorted_ids, expert_ids, em = moe_align_block_size(topk_ids, 4, 3)
    assert expert_ids.tolist() == [0, 2] and em.tolist() == [8]
    assert sorted_ids.tolist() == [0, 3, 4, 6, 1, 2, 5, 6]  # flat ids i * top_k + k; pad = 6
    with pytest.raises(ValueError, match=r"expert ids must be in \[0, 2\)"):
        moe_align_block_size(topk_ids, 4, 2)


# ---- generation, manifest, golden_set ------------------------------------------------------------
def test_generate_moe_variants_and_golden_set(moe, store):
    entry = generate_case(moe, "small", store)
    assert sorted(entry["variants"]) == [f"BLOCK_SIZE_M={bm}" for bm in (16, 32, 4, 64, 8)]
    case_dir = store.root / "fused_moe" / "small"
    names = {p.name for p in case_dir.iterdir()}
    small = moe.cases["small"]
    # Shared across variants: A, B, expected C, topk weights; per BLOCK_SIZE_M: the aligned routing.
    assert f"matrix_{small['M']}x{small['K']}_1.txt" in names
    assert f"matrix_{small['E']}x{small['N']}x{small['K']}_2.txt" in names
    assert f"matrix_{small['M']}x{small['top_k']}x{small['N']}_3.txt" in names
    assert sum(n.startswith("matrix_BLOCK_SIZE_M_") for n in names) == 5 * 3

    config = {"BLOCK_SIZE_M": 8, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    gs = golden_set(moe, "small", config, store)
    launch = moe.capture_launch("small", config)
    assert [f.arg for f in gs.files] == [a.name for a in launch.tensor_args]
    assert [f.tensor for f in gs.expected] == ["c"]
    assert gs.scalars["EM"] == next(a.value for a in launch.args if a.name == "EM")
    sorted_ids = next(f for f in gs.files if f.tensor == "sorted_token_ids")
    assert sorted_ids.path.name.startswith("matrix_BLOCK_SIZE_M_8_1x") and sorted_ids.dtype == "i32"
    inputs = moe.make_inputs("small", {"BLOCK_SIZE_M": 8})
    assert (read_tensor(sorted_ids) == inputs["sorted_token_ids"].numpy()).all()
    # Expert 2 is idle in the small case and expert counts are ragged (padding present).
    expert_ids = read_tensor(next(f for f in gs.files if f.tensor == "expert_ids"))
    assert 2 not in expert_ids.tolist() and (read_tensor(sorted_ids) == small["M"] * small["top_k"]).any()

    other = golden_set(moe, "small", {**config, "BLOCK_SIZE_M": 16}, store)
    assert other.sha256 != gs.sha256
    assert golden_set(moe, "small", {**config, "BLOCK_SIZE_N": 32}, store).sha256 == gs.sha256


def test_generation_is_deterministic(moe, store, tmp_path):
    generate_case(moe, "small", store)
    first = {p.name: p.read_bytes() for p in (store.root / "fused_moe" / "small").iterdir()}
    again = Store(root=tmp_path / "again", cache=tmp_path / "cache2")
    generate_case(moe, "small", again)
    assert first == {p.name: p.read_bytes() for p in (again.root / "fused_moe" / "small").iterdir()}
    assert store.manifest_path("fused_moe").read_text() == again.manifest_path("fused_moe").read_text()


def test_verify_detects_a_flipped_byte(moe, store):
    generate_case(moe, "small", store)
    assert verify_kernel(moe, store, ["small"]) == []
    victim = store.root / "fused_moe" / "small" / "matrix_BLOCK_SIZE_M_4_1x8_6.txt"
    data = bytearray(victim.read_bytes())
    data[-2] ^= 0x01  # one digit of the last expert id
    victim.write_bytes(bytes(data))
    problems = verify_kernel(moe, store, ["small"], regenerate=False)
    assert len(problems) == 1 and str(victim) in problems[0] and "corrupted" in problems[0]
    config = {"BLOCK_SIZE_M": 4, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    with pytest.raises(GoldenError, match=r"matrix_BLOCK_SIZE_M_4_1x8_6\.txt was corrupted"):
        golden_set(moe, "small", config, store)
    victim.unlink()
    assert "missing (committed data)" in verify_kernel(moe, store, ["small"], regenerate=False)[0]


def test_cache_cases_are_generated_on_demand_and_checked(tmp_path):
    spec = load_kernel_module(KERNELS / "jacobi.py")
    store = Store(root=tmp_path / "golden", cache=tmp_path / "cache")
    generate_case(spec, "emu", store)  # records the hashes; files go to the cache
    cache_dir = tmp_path / "cache" / "jacobi" / "emu"
    assert not (tmp_path / "golden" / "jacobi" / "emu").exists() and any(cache_dir.iterdir())
    shutil.rmtree(cache_dir)
    gs = golden_set(spec, "emu", spec.configs[0], store)  # regenerated, and matching the manifest
    assert all(f.path.parent == cache_dir and f.path.exists() for f in gs.files)
    # A manifest that does not match what the module generates: named as drift, not silently used.
    manifest = json.loads(store.manifest_path("jacobi").read_text())
    manifest["cases"]["emu"]["variants"][""]["files"][0]["sha256"] = "0" * 64
    store.manifest_path("jacobi").write_text(json.dumps(manifest))
    shutil.rmtree(cache_dir)
    with pytest.raises(GoldenError, match="differs from the manifest"):
        golden_set(spec, "emu", spec.configs[0], store)


def test_a_corrupted_cache_file_is_regenerated_not_blamed_on_the_module(tmp_path):
    """Issue 15: a damaged file under the cache (a disk error, a stray edit) failed the item as "differs from
    the manifest ... the kernel module's inputs or reference may have changed". It is a cache: regenerated."""
    spec = load_kernel_module(KERNELS / "jacobi.py")
    store = Store(root=tmp_path / "golden", cache=tmp_path / "cache")
    generate_case(spec, "emu", store)
    victim = next((tmp_path / "cache" / "jacobi" / "emu").glob("matrix_*_1.txt"))
    good = victim.read_bytes()
    for damage in (good.replace(b"0.", b"9.", 1), b"", good[: len(good) // 2]):  # a flipped digit, empty, torn
        victim.write_bytes(damage)
        gs = golden_set(spec, "emu", spec.configs[0], store)
        assert victim.read_bytes() == good and victim in [f.path for f in gs.files]
    assert not list(victim.parent.glob(".*.tmp"))
    # A committed file is not a cache: damage there is still an error naming it (test_verify_detects_...).
    generate_case(spec, "small", store)
    committed = next((tmp_path / "golden" / "jacobi" / "small").glob("matrix_*_1.txt"))
    committed.write_bytes(committed.read_bytes().replace(b"0.", b"9.", 1))
    with pytest.raises(GoldenError, match=rf"{committed.name} was corrupted"):
        golden_set(spec, "small", spec.configs[0], store)


@pytest.mark.parametrize("thing", ["fifo", "dev-zero", "directory"])
def test_a_fifo_or_device_in_place_of_a_golden_file_is_named_not_read_forever(tmp_path, thing):
    """Hostile case: hashing or reading a FIFO (or a link to /dev/zero) where a golden file should be blocked
    the item forever, outside any run timeout; a directory there gave a bare IsADirectoryError."""
    spec = load_kernel_module(KERNELS / "jacobi.py")
    store = Store(root=tmp_path / "golden", cache=tmp_path / "cache")
    generate_case(spec, "small", store)
    generate_case(spec, "emu", store)
    victims = [next((tmp_path / where / "jacobi" / case).glob("matrix_*_1.txt"))
               for where, case in (("golden", "small"), ("cache", "emu"))]
    for victim in victims:
        victim.unlink()
        if thing == "fifo":
            os.mkfifo(victim)
        elif thing == "dev-zero":
            victim.symlink_to("/dev/zero")
        else:
            victim.mkdir()
    committed, cached = victims
    with pytest.raises(GoldenError) as named:
        golden_set(spec, "small", spec.configs[0], store)
    assert str(named.value) == (f"golden file {committed} is not a regular file (a FIFO, a device or a directory): "
                                "remove it, then restore it with git or `rvtune golden generate --kernel jacobi "
                                "--case small`")
    with pytest.raises(GoldenFormatError, match="not a regular file"):
        read_txt(committed)
    manifest = store.manifest_path("jacobi")
    saved = manifest.read_bytes()
    manifest.unlink()
    os.mkfifo(manifest)
    with pytest.raises(GoldenError, match=rf"golden manifest {manifest}: not a regular file"):
        golden_set(spec, "emu", spec.configs[0], store)
    manifest.unlink()
    manifest.write_bytes(saved)
    if thing == "directory":  # a cache file cannot replace a directory: named, with what to do
        with pytest.raises(GoldenError, match=rf"cannot write golden file {cached}: Is a directory; remove the "
                                              "directory in its place"):
            golden_set(spec, "emu", spec.configs[0], store)
    else:  # a cache file: regenerated in its place
        golden_set(spec, "emu", spec.configs[0], store)
        assert cached.is_file() and not cached.is_symlink()


def test_verify_detects_drift_of_the_module(tmp_path):
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    shutil.copy(KERNELS / "jacobi.py", kdir / "jacobi.py")
    store = Store(root=tmp_path / "golden", cache=tmp_path / "cache")
    generate_case(load_kernel_module(kdir / "jacobi.py"), "small", store)
    src = (kdir / "jacobi.py").read_text()
    (kdir / "jacobi.py").write_text(src.replace("torch.rand(shape, generator=g)", "torch.rand(shape, generator=g) + 1"))
    problems = verify_kernel(load_kernel_module(kdir / "jacobi.py"), store, ["small"])
    assert len(problems) == 1 and "drift" in problems[0] and "matrix_23x37_1.txt" in problems[0]
    (kdir / "jacobi.py").write_text(src.replace('"small": dict(M=23', '"small": dict(M=24'))
    assert "drift: the manifest records params" in verify_kernel(load_kernel_module(kdir / "jacobi.py"), store)[0]


def test_cli_generate_and_verify(tmp_path, capsys):
    golden = tmp_path / "golden"
    args = ["--kernel", "softmax", "--case", "small", "--golden-dir", str(golden)]
    assert cli.main(["golden", "generate", *args]) == 0
    assert cli.main(["golden", "verify", *args]) == 0
    victim = next((golden / "softmax" / "small").glob("matrix_*_1.txt"))
    victim.write_bytes(victim.read_bytes().replace(b"1", b"2", 1))
    assert cli.main(["golden", "verify", *args]) == 1
    err = capsys.readouterr().err
    assert f"PROBLEM golden file {victim}: corrupted" in err
    assert cli.main(["golden", "verify", "--kernel", "nosuch", "--golden-dir", str(golden)]) == 2
    assert "no kernel module 'nosuch'" in capsys.readouterr().err


def test_committed_golden_data_matches_the_kernel_modules():
    """The small cases in golden/ are intact and are what the modules generate today (no drift)."""
    store = Store(root=REPO / "golden")
    for path in discover(KERNELS):
        spec = load_kernel_module(path)
        assert verify_kernel(spec, store, ["small"]) == [], spec.name


def test_unrecorded_case_is_generated_once_into_the_cache(tmp_path):
    """A new kernel without `rvtune golden generate`: items still get data, and the repo is not written."""
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    shutil.copy(KERNELS / "softmax.py", kdir / "softmax.py")
    store = Store(root=tmp_path / "golden", cache=tmp_path / "cache")
    spec = load_kernel_module(kdir / "softmax.py")
    gs = golden_set(spec, "small", spec.configs[0], store)
    assert not store.manifest_path("softmax").exists()
    assert all(f.path.is_relative_to(tmp_path / "cache") and f.path.exists() for f in gs.files)
    stamp = gs.files[0].path.stat().st_mtime_ns
    assert golden_set(spec, "small", spec.configs[1], store).sha256 == gs.sha256
    assert gs.files[0].path.stat().st_mtime_ns == stamp  # reused, not regenerated
    entry_file = tmp_path / "cache" / "softmax" / "small" / ".entry.json"
    for damaged in (b"[]", b'{"module_sha256": "x"}', b'{"module_sha256": "%s"}' % json.loads(
            entry_file.read_text())["module_sha256"].encode(), b"\0"):  # cache state: rebuilt, never a crash
        entry_file.write_bytes(damaged)
        assert golden_set(spec, "small", spec.configs[0], store).sha256 == gs.sha256
    entry_file.unlink()
    os.mkfifo(entry_file)  # reading it would block for ever
    assert golden_set(spec, "small", spec.configs[0], store).sha256 == gs.sha256 and entry_file.is_file()
    # The module changes: its data is rebuilt from the new source.
    (kdir / "softmax.py").write_text((kdir / "softmax.py").read_text().replace("generator=g) * 4", "generator=g) * 3"))
    changed = golden_set(load_kernel_module(kdir / "softmax.py"), "small", spec.configs[0], store)
    assert changed.sha256 != gs.sha256


def test_an_output_the_kernel_never_gets_is_an_error(tmp_path):
    src = (KERNELS / "jacobi.py").read_text()
    src = src.replace('"b": torch.empty(shape)}', '"b": torch.empty(shape), "extra": torch.empty(3)}')
    src = src.replace('return {"b": b.float()}', 'return {"b": b.float(), "extra": torch.zeros(3)}')
    (tmp_path / "jacobi.py").write_text(src)
    spec = load_kernel_module(tmp_path / "jacobi.py")
    with pytest.raises(GoldenError, match="reference output 'extra' is not passed to the kernel"):
        generate_case(spec, "small", Store(root=tmp_path / "golden", cache=tmp_path / "cache"))


@pytest.mark.parametrize("header", ["100000000 100000000", "2 100000000000"])
def test_a_header_declaring_more_values_than_the_file_holds_is_refused_before_allocating(tmp_path, header):
    path = tmp_path / "bomb.txt"
    path.write_text(f"{header}\n1 2 3\n4 5 6\n")
    with pytest.raises(GoldenFormatError, match="the header does not match the data") as info:
        read_txt(path)
    assert f"{path}:1" in str(info.value)
