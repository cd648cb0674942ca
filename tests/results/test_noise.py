"""rvtune noise and compare --noise on REAL host A/A runs.

data/host_aa_{1,2,3}.jsonl: three back-to-back runs of ``pytest kernels/matmul.py --rvtune-case emu
--rvtune-target host`` on the team's VM (the same 40 items of each: BLOCK_SIZE_M=32..128), i.e. the same ELFs
measured in three sessions. Compared pairwise, Mann-Whitney calls some of them regressions: the medians drift
between sessions more than samples vary within one.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from results_data import make_record, write_jsonl

from pytest_rvtune.cli import main
from pytest_rvtune.results.compare import NO_NOISE_WARNING
from pytest_rvtune.results.runs import load_run

DATA = Path(__file__).parent / "data"
H1, H2, H3 = (DATA / f"host_aa_{i}.jsonl" for i in (1, 2, 3))


@pytest.fixture
def noise12(tmp_path: Path) -> Path:
    out = tmp_path / "noise.json"
    assert main(["noise", str(H1), str(H2), "-o", str(out)]) == 0
    return out


def test_noise_file_holds_per_item_changes_and_kernel_floor(tmp_path: Path, capsys) -> None:
    out = tmp_path / "aa.json"
    assert main(["noise", str(H1), str(H2), "-o", str(out)]) == 0
    assert "floor (p95)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    a, b = load_run(H1), load_run(H2)
    [entry] = doc["targets"]
    assert entry["machine"] == a.records[0].machine  # keyed by the target's identity, not just its name
    matmul = entry["kernels"]["matmul"]
    changes = {r.config_id: (b.find(r).min_ns / r.min_ns - 1) * 100 for r in a.records}  # compare gates on min
    assert matmul["items"]["emu"] == pytest.approx(changes, abs=1e-3)
    assert matmul["floor_pct"] == pytest.approx(np.percentile(np.abs(list(changes.values())), 95), abs=1e-3)


def test_aa_rerun_passes_with_noise_floor_but_not_without(noise12: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["compare", str(H2), str(H3)]) == 1  # session drift taken for regressions
    err = capsys.readouterr().err
    assert err.count(NO_NOISE_WARNING.format(rounds=3)) == 1 and "REGRESSION" in err
    assert main(["compare", str(H2), str(H3), "--noise", str(noise12)]) == 0
    out = capsys.readouterr()
    assert "REGRESSION" not in out.err and "no noise floor" not in out.err
    assert out.out.startswith("no item changed (40 unchanged")  # unchanged rows only with --all
    assert main(["compare", str(H2), str(H3), "--noise", str(noise12), "--all"]) == 0
    assert "below the A/A noise floor (+-" in capsys.readouterr().out


def test_injected_slowdown_above_floor_is_flagged(tmp_path: Path, noise12: Path, capsys) -> None:
    base, new = load_run(H2), load_run(H3)
    floor = json.loads(noise12.read_text())["targets"][0]["kernels"]["matmul"]["floor_pct"]
    assert floor < 30  # so +40 % is a change well above this VM's A/A drift
    # the item that moved least between h2 and h3 gets 40 % slower: a real regression
    victim = min(new.records, key=lambda r: abs(r.min_ns / base.find(r).min_ns - 1)).config_id
    lines = []
    for line in H3.read_text().splitlines():
        obj = json.loads(line)
        if obj["config_id"] == victim:
            obj["samples_ns"] = [s * 1.4 for s in obj["samples_ns"]]
        lines.append(json.dumps(obj))
    slow = tmp_path / "slow.jsonl"
    slow.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["compare", str(H2), str(slow), "--noise", str(noise12)]) == 1
    err = capsys.readouterr().err
    assert err.count("REGRESSION") == 1 and f"matmul[emu-{victim}] on host: regression" in err
    assert "A/A noise floor (+-" in err


def test_noise_file_of_another_target_is_refused(tmp_path: Path, noise12: Path, capsys) -> None:
    doc = json.loads(noise12.read_text())
    doc["targets"][0]["machine"] = {**doc["targets"][0]["machine"], "target": "k1", "board": "bananapi-f3",
                                    "isa": "rv64gcv_zvl256b"}
    other = tmp_path / "k1-noise.json"
    other.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["compare", str(H2), str(H3), "--noise", str(other)]) == 2
    err = capsys.readouterr().err
    assert str(other) in err and "measured on k1 (" in err and "bananapi-f3" in err
    assert "ran on host (" in err and "rvtune noise" in err
    # the same board after a toolchain upgrade is another target too
    doc["targets"][0]["machine"] = {**json.loads(noise12.read_text())["targets"][0]["machine"], "toolchain": "x"}
    other.write_text(json.dumps(doc))
    assert main(["compare", str(H2), str(H3), "--noise", str(other)]) == 2


def test_noise_refuses_emulated_runs_and_non_aa_pairs(tmp_path: Path, capsys) -> None:
    config = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32}
    qemu = write_jsonl(tmp_path / "q.jsonl", [make_record("matmul", "M96", config, [1e6] * 5, target="qemu")])
    assert main(["noise", str(qemu), str(qemu), "-o", str(tmp_path / "n.json")]) == 2
    assert "no item passed with real timings in both runs" in capsys.readouterr().err
    a = make_record("matmul", "M96", config, [1e6] * 5)
    b = {**a, "elf_sha256": "0" * 64}
    pa, pb = write_jsonl(tmp_path / "a.jsonl", [a]), write_jsonl(tmp_path / "b.jsonl", [b])
    assert main(["noise", str(pa), str(pb), "-o", str(tmp_path / "n.json")]) == 2
    assert "different ELFs" in capsys.readouterr().err
    assert main(["compare", str(pa), str(pa), "--noise", str(tmp_path / "missing.json")]) == 2
    assert "no such noise file" in capsys.readouterr().err
