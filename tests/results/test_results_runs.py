"""runs.load_run on both inputs (results JSONL, real pytest-benchmark JSON), bad input, resume index."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from results_data import clean_env, make_record, measure, write_jsonl

from pytest_rvtune.results.records import RunFileError
from pytest_rvtune.results.runs import RunFileWarning, completed_items, identity_key, load_run

BENCH_TEST = '''
import json

FIELDS = json.loads({fields!r})


def _work():
    return sum(i * i for i in range(2000))


def test_with_samples(benchmark):
    benchmark.extra_info.update(FIELDS["with"])
    benchmark.pedantic(_work, rounds=7, iterations=1)


def test_without_samples(benchmark):
    benchmark.extra_info.update(FIELDS["without"])
    benchmark.pedantic(_work, rounds=6, iterations=1)
'''


def test_reads_real_pytest_benchmark_json(tmp_path: Path) -> None:
    """pytest-benchmark itself writes the file: samples from extra_info.samples_ns, else stats.data."""
    (samples,) = measure([(16, 16)], rounds=5)
    with_samples = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, samples, target="qemu",
                               counters={"kernel_insns": 1234.0})
    without = make_record("matmul", "M96", {"BLOCK_SIZE_M": 32}, [], counters={"vector_inst:u": 5.0})
    del without["samples_ns"], without["nodeid"]  # the test's own name stands in for a missing nodeid
    fields = json.dumps({"with": with_samples, "without": without})
    (tmp_path / "test_bench.py").write_text(BENCH_TEST.format(fields=fields))
    out = tmp_path / "bench.json"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:rvtune", "-p", "no:cacheprovider",
                    "test_bench.py", f"--benchmark-json={out}", "--benchmark-save-data"],
                   cwd=tmp_path, check=True, capture_output=True, env=clean_env())
    run = load_run(out)
    assert run.format == "pytest-benchmark" and run.machine_info
    by_config = {r.config_id: r for r in run.records}
    first, second = by_config["BLOCK_SIZE_M=16"], by_config["BLOCK_SIZE_M=32"]
    assert first.samples_ns == [float(int(s)) for s in samples]  # the board's samples, not the host's
    assert first.emulated and first.counters == {"kernel_insns": 1234.0}
    assert len(second.samples_ns) == 6 and all(s > 0 for s in second.samples_ns)  # from stats.data, in ns
    assert second.counters == {"vector_inst:u": 5.0} and second.nodeid.endswith("test_without_samples")


def test_jsonl_rerun_replaces_and_torn_last_line_is_skipped(tmp_path: Path) -> None:
    (samples,) = measure([(16, 16)], rounds=6)
    first = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, samples[:3], outcome="crashed")
    rerun = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, samples[3:])
    other = make_record("matmul", "M96", {"BLOCK_SIZE_M": 32}, samples)
    path = write_jsonl(tmp_path / "r.jsonl", [first, other, rerun])
    with open(path, "a") as fh:
        fh.write('{"kernel": "matmul", "ca')  # killed mid-write
    with pytest.warns(RunFileWarning, match=str(path).replace(".", r"\.") + ":4: not a JSON object"):
        run = load_run(path)
    assert [(r.config_id, r.outcome) for r in run.records] == [("BLOCK_SIZE_M=32", "passed"),
                                                                ("BLOCK_SIZE_M=16", "passed")]
    assert run.find(rerun).samples_ns == [float(int(s)) for s in samples[3:]]
    assert run.find({**rerun, "target": "other"}) is None


GOOD = '{"kernel": "k", "case": "c", "config_id": "x", "target": "t", "outcome": "passed", "samples_ns": [1]}'


@pytest.mark.parametrize(("content", "message"), [
    ("not json\nnot json either\n", ": not a results file: no line of it is an item record"),
    ("[1, 2]\n[3]\n", ":1: expected a JSON object"),
    (GOOD.replace("[1]", '["a"]') + "\n" + GOOD, ":1: samples_ns and counters must be numbers"),
    # an outcome no run gives (a hand edit, another tool's file) is named, not read as a silent failure
    (GOOD.replace('"passed"', '"pased"') + "\n" + GOOD, ":1: outcome 'pased' is none of passed, wrong, "),
    ("", ": empty results file"),
])
def test_bad_files_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(RunFileError, match=str(path).replace(".", r"\.") + message):
        load_run(path)
    with pytest.raises(RunFileError, match="no such results file"):
        load_run(tmp_path / "missing.jsonl")


def test_completed_items_for_resume(tmp_path: Path) -> None:
    (samples,) = measure([(16, 16)], rounds=3)
    records = [make_record("matmul", "M96", {"BLOCK_SIZE_M": bm}, samples, outcome=outcome)
               | {"verdict_key": f"key-{bm}"}
               for bm, outcome in ((16, "passed"), (32, "wrong"), (48, "crashed"), (64, "timeout"))]
    older = make_record("matmul", "M96", {"BLOCK_SIZE_M": 80}, samples)
    del older["verdict_key"]  # an older pytest-rvtune's record: what decided it is unknown
    run = load_run(write_jsonl(tmp_path / "r.jsonl", [*records, older]))
    done = completed_items(run)
    # passed and wrong answers are facts of the ELF and data; crashes and timeouts may be the board's fault
    assert sorted(r.config_id for r in done.values()) == ["BLOCK_SIZE_M=16", "BLOCK_SIZE_M=32"]
    key = ("key-16", identity_key(records[0]["machine"]))
    assert dict(done[key]) == records[0]  # the record exactly as the earlier run wrote it
    other_board = identity_key({**records[0]["machine"], "board": "laptop"})
    assert (key[0], other_board) not in done


def test_an_item_failed_only_by_a_compare_gate_is_still_a_measurement(tmp_path: Path) -> None:
    """outcome "regressed" (pytest --rvtune-compare failed it against a base) keeps a right answer and real
    samples: reports rank it and a later compare judges its numbers rather than calling it broken."""
    from pytest_rvtune.results.compare import compare_record
    (samples,) = measure([(16, 16)], rounds=6)
    base = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, samples)
    gated = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, samples) | {"outcome": "regressed"}
    wrong = make_record("matmul", "M96", {"BLOCK_SIZE_M": 16}, samples) | {"outcome": "wrong"}
    [b] = load_run(write_jsonl(tmp_path / "base.jsonl", [base])).records
    [g] = load_run(write_jsonl(tmp_path / "gated.jsonl", [gated])).records
    [w] = load_run(write_jsonl(tmp_path / "wrong.jsonl", [wrong])).records
    assert g.valid and not w.valid
    assert compare_record(b, g).status == "unchanged"  # the same samples: no change, not "broken"
    assert compare_record(b, w).status == "broken"


def test_sessions_of_one_process_in_one_second_get_distinct_run_ids() -> None:
    """rounds.py pools only records of *another* session: two sessions must never share an id."""
    from pytest_rvtune.results.writer import new_run_id
    ids = {new_run_id() for _ in range(50)}
    assert len(ids) == 50 and all(i[:8].isdigit() and i[8] == "T" for i in ids)  # still sortable by time
