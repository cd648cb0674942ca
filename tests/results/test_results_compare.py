"""rvtune compare and compare_record: significance on real samples, thresholds, counters, warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from results_data import exact_counts, make_record, measure, write_jsonl

from pytest_rvtune.cli import main
from pytest_rvtune.results.compare import Thresholds, compare_record, compare_runs
from pytest_rvtune.results.records import record_from_dict
from pytest_rvtune.results.runs import load_run

CONFIGS = [(16, 32), (32, 96)]


@pytest.fixture(scope="module")
def interleaved() -> dict[str, list[list[float]]]:
    """Two sets of samples of the same configs: alternate samples of one stream, an A/A pair by construction
    (load on the machine hits both alike)."""
    streams = measure(CONFIGS, rounds=120, inner=3)
    a, b = [s[0::2] for s in streams], [s[1::2] for s in streams]
    # "injected": b, except that the config the tests slow down (index 1) carries a's own samples in another
    # order. compare gates on the minimum, and under load one lucky sample on a's side can sit 5 % below all of
    # b's, so a 10 % injected into b would show as 4.5 %; on a's samples the change is exactly the one injected.
    # Config 0 stays a real A/A pair.
    return {"a": a, "b": b, "injected": [b[0], a[1][::-1]]}


def _run(path: Path, samples: list[list[float]], scale: dict[int, float] | None = None,
         kernel: str = "matmul") -> Path:
    records = []
    for index, ((bm, bn), s) in enumerate(zip(CONFIGS, samples, strict=True)):
        factor = (scale or {}).get(index, 1.0)
        records.append(make_record(kernel, "M96", {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn},
                                   [x * factor for x in s]))
    return write_jsonl(path, records)


def test_aa_rerun_is_not_flagged(tmp_path: Path, interleaved, capsys) -> None:
    a = _run(tmp_path / "a.jsonl", interleaved["a"])
    b = _run(tmp_path / "b.jsonl", interleaved["b"])
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr()
    assert "regressed" not in out.out
    assert "2 items" in out.err


def test_injected_ten_percent_slowdown_is_flagged(tmp_path: Path, interleaved, capsys) -> None:
    a = _run(tmp_path / "a.jsonl", interleaved["a"])
    b = _run(tmp_path / "b.jsonl", interleaved["injected"], scale={1: 1.10})
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr()
    assert "REGRESSION matmul[M96-BLOCK_SIZE_M=32-BLOCK_SIZE_N=96]" in out.err
    assert "Mann-Whitney p=" in out.err
    # the other config did not change: only one regression
    assert out.err.count("REGRESSION") == 1
    assert "regressed" in out.out  # the table row
    assert main(["compare", str(a), str(b), "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["verdict"] == "regressed" and rows[0]["metric"] == "time"
    assert 5 < rows[0]["change"] < 20 and rows[0]["p"] < 0.01 and rows[0]["new"] > rows[0]["base"]


def test_per_kernel_threshold_overrides_default(tmp_path: Path, interleaved) -> None:
    a = _run(tmp_path / "a.jsonl", interleaved["a"])
    b = _run(tmp_path / "b.jsonl", interleaved["injected"], scale={1: 1.10})
    assert main(["compare", str(a), str(b), "--threshold", "5", "--threshold", "matmul=25"]) == 0
    assert main(["compare", str(a), str(b), "--threshold", "25", "--threshold", "matmul=5"]) == 1


def test_improvement_is_not_a_regression(tmp_path: Path, interleaved) -> None:
    # both configs carry a's own samples in another order (see `interleaved`): on a loaded machine an A/A pair of
    # alternate samples can itself look like a 20 % change (CI once saw a's minimum that far below b's), and this
    # test is about how a 20 % speed-up of config 0 is classified, not about the machine's noise
    a = _run(tmp_path / "a.jsonl", interleaved["a"])
    b = _run(tmp_path / "b.jsonl", [s[::-1] for s in interleaved["a"]], scale={0: 0.8})
    verdicts = compare_runs(load_run(a), load_run(b), Thresholds())
    assert [v.status for v in verdicts] == ["improved", "unchanged"]


def test_too_few_samples_warns_and_never_passes_silently(tmp_path: Path, interleaved, capsys) -> None:
    a = _run(tmp_path / "a.jsonl", [s[:3] for s in interleaved["a"]])
    b = _run(tmp_path / "b.jsonl", [s[:3] for s in interleaved["b"]], scale={0: 1.5})
    assert main(["compare", str(a), str(b)]) == 0  # not judged, so not a regression...
    err = capsys.readouterr().err
    assert "too few samples for a significance test (base 3, new 3; need >= 5 each)" in err  # ...but said
    verdict = compare_record(load_run(a).records[0], load_run(b).records[0])
    assert verdict.status == "too few samples" and verdict.warnings


def _qemu(kernel_insns_factor: float, samples: list[float]) -> dict:
    counters = exact_counts(32, 96)
    counters["kernel_insns"] = round(counters["kernel_insns"] * kernel_insns_factor)
    return make_record("matmul", "M96", {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 96}, samples[:2], target="qemu",
                       counters=counters)


def test_counter_change_under_qemu_is_flagged(tmp_path: Path, interleaved, capsys) -> None:
    # two emulated samples: time is not judged under QEMU, the exact instruction count is
    a = write_jsonl(tmp_path / "a.jsonl", [_qemu(1.0, interleaved["a"][1])])
    b = write_jsonl(tmp_path / "b.jsonl", [_qemu(1.08, interleaved["b"][1])])
    same = write_jsonl(tmp_path / "same.jsonl", [_qemu(1.0, interleaved["b"][1])])
    assert main(["compare", str(a), str(b)]) == 1
    err = capsys.readouterr().err
    assert "kernel_insns" in err and "+8.0%" in err and "exact count" in err
    assert main(["compare", str(a), str(same)]) == 0
    assert "too few samples" not in capsys.readouterr().err  # emulated time is simply not gated
    # any real change below the threshold is still shown as a change
    small = write_jsonl(tmp_path / "small.jsonl", [_qemu(1.01, interleaved["b"][1])])
    verdict = compare_runs(load_run(a), load_run(small), Thresholds())[0]
    assert verdict.status == "unchanged"
    assert [c.status for c in verdict.changes if c.metric == "kernel_insns"] == ["changed"]


def test_only_kernel_instructions_gate_under_qemu(tmp_path: Path, interleaved) -> None:
    # better-vectorised code: more vector instructions, fewer in the kernel: an improvement, not a regression
    base = _qemu(1.0, interleaved["a"][1])
    vectorised = _qemu(0.9, interleaved["b"][1])
    vectorised["counters"]["vector_insns"] *= 1.5
    vectorised["counters"]["insns"] *= 1.2
    a = write_jsonl(tmp_path / "a.jsonl", [base])
    b = write_jsonl(tmp_path / "b.jsonl", [vectorised])
    verdict = compare_runs(load_run(a), load_run(b), Thresholds())[0]
    status = {c.metric: (c.status, c.gated) for c in verdict.changes}
    assert status["kernel_insns"] == ("improved", True)
    assert status["vector_insns"] == ("not gated", False) and status["insns"] == ("not gated", False)
    assert not verdict.regressed
    assert main(["compare", str(a), str(b)]) == 0
    assert main(["compare", "--counters", "all", str(a), str(b)]) == 1  # every counter gates on request


def test_wrong_answer_after_pass_is_a_regression(tmp_path: Path, interleaved) -> None:
    base = record_from_dict(make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, interleaved["a"][0]))
    new = record_from_dict(make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, interleaved["b"][0],
                                       outcome="wrong"))
    verdict = compare_record(base, new)
    assert verdict.regressed and "passed in base, now wrong" in verdict.message


def test_missing_and_new_items_are_reported(tmp_path: Path, interleaved, capsys) -> None:
    a = _run(tmp_path / "a.jsonl", interleaved["a"])
    b = _run(tmp_path / "b.jsonl", interleaved["b"], kernel="softmax")
    assert main(["compare", str(a), str(b)]) == 2  # no item in common: nothing was compared, nothing passed
    err = capsys.readouterr().err
    assert "missing from the new run" in err and "2 new" in err
    assert "compared 0 of the base run's 2 items" in err and "nothing compared" in err


@pytest.mark.parametrize(("args", "message"), [(["--alpha", "1.5"], "alpha 1.5"),
                                                (["--min-samples", "1"], "min-samples 1")])
def test_bad_test_parameters_are_named(tmp_path: Path, interleaved, capsys, args, message) -> None:
    a = _run(tmp_path / "a.jsonl", interleaved["a"])
    assert main(["compare", str(a), str(a), *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["abc", "matmul=", "=5", "-3"])
def test_bad_threshold_is_named(tmp_path: Path, interleaved, capsys, spec: str) -> None:
    a = _run(tmp_path / "a.jsonl", interleaved["a"])
    assert main(["compare", str(a), str(a), f"--threshold={spec}"]) == 2
    assert f"threshold {spec!r}" in capsys.readouterr().err


def _qemu_run(path: Path, counts: dict[int, float], template: dict, extra: dict[int, float] | None = None) -> Path:
    """One record per BLOCK value with the given gated count (x60_cycles); ``extra`` changes vector_insns only
    (a counter that does not gate)."""
    records = []
    for block, cycles in counts.items():
        record = json.loads(json.dumps(template))
        record["config"] = {"BLOCK": block}
        record["config_id"] = f"BLOCK={block}"
        record["counters"] = {"x60_cycles": cycles, "launch_insns": cycles * 3, "vector_insns": 100.0}
        if extra and block in extra:
            record["counters"]["vector_insns"] = extra[block]
        records.append(record)
    return write_jsonl(path, records)


def test_compare_shows_changed_items_sorted_and_its_summary_agrees(tmp_path: Path, interleaved, capsys) -> None:
    template = _qemu(1.0, interleaved["a"][0])
    blocks = (4, 8, 16, 32, 64, 128)
    base = _qemu_run(tmp_path / "a.jsonl", {b: 1000.0 for b in blocks}, template)
    # BLOCK=128 regresses 20 %, BLOCK=8 improves 30 %, BLOCK=16 changes 2 % (within the threshold), BLOCK=32 only
    # in a counter that does not gate; the rest are identical
    new = _qemu_run(tmp_path / "b.jsonl", {4: 1000.0, 8: 700.0, 16: 1020.0, 32: 1000.0, 64: 1000.0, 128: 1200.0},
                    template, extra={32: 150.0})
    assert main(["compare", str(base), str(new)]) == 1
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines()[2:] if line.strip()]
    assert [line.split()[2] for line in lines] == ["BLOCK=128", "BLOCK=8"]  # worst first, unchanged left out
    assert " regressed " in lines[0] and " improved " in lines[1], out
    summary = err.strip().splitlines()[-1]
    assert summary == (f"compared 6 of the base run's 6 items against {base}: 1 regressed, 1 improved, "
                       "4 unchanged; 0 new, 0 missing; 0 warnings")

    assert main(["compare", str(base), str(new), "--all", "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    # every item, worst first, then by config with numbers in order; the verdict column is the item's
    items = list(dict.fromkeys(r["config"] for r in rows))
    assert items == ["BLOCK=128", "BLOCK=8", "BLOCK=4", "BLOCK=16", "BLOCK=32", "BLOCK=64"]
    assert {r["verdict"] for r in rows if r["config"] == "BLOCK=16"} == {"unchanged"}
    (within,) = [r for r in rows if r["config"] == "BLOCK=16" and r["metric"] == "x60_cycles"]
    assert within["note"].startswith("changed within the threshold") and within["change"] == pytest.approx(2.0)
    (ungated,) = [r for r in rows if r["config"] == "BLOCK=32" and r["metric"] == "vector_insns"]
    assert ungated["verdict"] == "unchanged" and ungated["note"].startswith("not gated") and ungated["change"] == 50

    assert main(["compare", str(base), str(base)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "no item changed (6 unchanged; --all shows every item and metric)"
    assert "1 regressed" not in err and ": 0 regressed, 0 improved, 6 unchanged; 0 new, 0 missing" in err
