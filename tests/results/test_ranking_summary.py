"""The ranking a session under emulation ends with (results/summary.py): best configs by the ranking metric,
the spread, the default config's place; nothing for real timings."""

from __future__ import annotations

from results_data import make_record

from pytest_rvtune.results.summary import ranking_lines


def _qemu(case: str, block: int, launch: float, kernel: float, outcome: str = "passed") -> dict:
    return make_record("k", case, {"BLOCK": block}, [1000, 1100], target="qemu", outcome=outcome,
                       counters={"launch_insns": launch, "kernel_insns": kernel})


def test_emulated_groups_list_the_best_configs_by_launch_the_spread_and_the_default() -> None:
    records = [
        # case A: 64 wins by the whole launch although its in-kernel count is the largest
        _qemu("A", 16, 3000, 1000), _qemu("A", 32, 2000, 1500), _qemu("A", 64, 1000, 1900),
        _qemu("A", 128, 500, 100, outcome="wrong"),  # a wrong answer is never ranked
        # case B: 32 wins; the default (most common winner over A and B, ties to the smaller mean slowdown)
        # is 64 here, 5 % behind
        _qemu("B", 16, 4000, 10), _qemu("B", 32, 1000, 20), _qemu("B", 64, 1050, 30),
        make_record("k", "A", {"BLOCK": 16}, [500, 600], target="host"),  # real timing: not in the summary
    ]
    lines = ranking_lines(records, top=2)
    assert lines[0].startswith("rvtune ranking under emulation, by launch_insns")
    assert lines[1] == "  k / A on qemu: 1. BLOCK=64 1,000  2. BLOCK=32 2,000; worst/best 3.00x over 3 configs; " \
                       "#1 is the default"
    assert lines[2] == "  k / B on qemu: 1. BLOCK=32 1,000  2. BLOCK=64 1,050; worst/best 4.00x over 3 configs; " \
                       "default BLOCK=64 #2 (+5.0%)"
    assert len(lines) == 3


def test_nothing_to_say_without_emulated_counts() -> None:
    host = [make_record("k", "A", {"BLOCK": b}, [500 * b, 600 * b], target="host") for b in (16, 32)]
    no_counts = [make_record("k", "A", {"BLOCK": b}, [500, 600], target="qemu") for b in (16, 32)]
    assert ranking_lines(host) == []
    assert ranking_lines(no_counts) == []  # emulated time alone ranks nothing
