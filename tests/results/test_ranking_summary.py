"""The ranking a session ends with (results/summary.py): best configs by the ranking metric, the spread, the
default config's place; configs that ran the same run listed as aliases of one result."""

from __future__ import annotations

from results_data import make_record

from pytest_rvtune.results.summary import ranking_lines, short_item_name


def joined(lines: list[str]) -> list[str]:
    """The lines with each continuation (a group's line broken to fit 120 columns) joined back to its line."""
    out: list[str] = []
    for line in lines:
        if line.startswith("      ") and out:
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return out


def _qemu(case: str, block: int, launch: float, kernel: float, outcome: str = "passed") -> dict:
    return make_record("k", case, {"BLOCK": block}, [1000, 1100], target="qemu", outcome=outcome,
                       counters={"launch_insns": launch, "kernel_insns": kernel})


def _same_run(record: dict, elf: str, argv: list[str]) -> dict:
    """``record`` as the item whose run was the ELF ``elf`` with ``argv`` (what decides a run's result)."""
    return record | {"elf_sha256": elf, "rerun": {"elf": f"/c/{elf}.elf", "argv": argv}}


def test_emulated_groups_list_the_best_configs_by_launch_the_spread_and_the_default() -> None:
    records = [
        # case A: 64 wins by the whole launch although its in-kernel count is the largest
        _qemu("A", 16, 3000, 1000), _qemu("A", 32, 2000, 1500), _qemu("A", 64, 1000, 1900),
        _qemu("A", 128, 500, 100, outcome="wrong"),  # a wrong answer is never ranked
        # case B: 32 wins; the default (most common winner over A and B, ties to the smaller mean slowdown)
        # is 64 here, 5 % behind
        _qemu("B", 16, 4000, 10), _qemu("B", 32, 1000, 20), _qemu("B", 64, 1050, 30),
    ]
    lines = joined(ranking_lines(records, top=2))
    assert lines[0].startswith("rvtune ranking, by launch_insns (instructions per launch, counted under emulation")
    assert lines[1] == "  k / A on qemu: 1. BLOCK=64 1,000  2. BLOCK=32 2,000; worst/best 3.00x over 3 configs; " \
                       "#1 is the most common winner"
    assert lines[2] == "  k / B on qemu: 1. BLOCK=32 1,000  2. BLOCK=64 1,050; worst/best 4.00x over 3 configs; " \
                       "most common winner BLOCK=64 #2 (+5.0%)"
    assert len(lines) == 3
    # records that name their kernel's untuned config (DEFAULT_CONFIG or the first): that is the default
    named = [r | {"kernel_default": "BLOCK=16"} for r in records]
    lines = joined(ranking_lines(named, top=2))
    assert lines[1].endswith("; worst/best 3.00x over 3 configs; default BLOCK=16 #3 (+200.0%)")
    assert lines[2].endswith("; default BLOCK=16 #3 (+300.0%)")


def test_configs_that_ran_the_same_run_are_one_result_with_aliases() -> None:
    same = ["--grid", "4,1,1", "/c/x.bin"]
    records = [
        # BLOCK 16, 32, 64 and 128 ran one ELF with the same argv (a constexpr the kernel ignores): one result
        _same_run(_qemu("A", b, 700, 600), "e1", same) for b in (16, 32, 64, 128)
    ] + [
        _same_run(_qemu("A", 8, 900, 800), "e2", same),  # another ELF
        _same_run(_qemu("A", 4, 700, 600), "e1", ["--grid", "8,1,1", "/c/x.bin"]),  # same ELF, another grid
    ]
    lines = ranking_lines(records)
    assert lines[1:] == ["  k / A on qemu: 1. BLOCK=128 700 (= BLOCK=16, BLOCK=32, +1 more)  2. BLOCK=4 700  "
                         "3. BLOCK=8 900;",  # 123 columns in one line: the rest goes on the next
                         "      worst/best 1.29x over 6 configs, 3 distinct"]


def test_real_timings_rank_by_median_time_and_emulated_time_alone_ranks_nothing() -> None:
    host = [make_record("k", "A", {"BLOCK": b}, [500 * b, 600 * b, 700 * b], target="host") for b in (32, 16)]
    lines = ranking_lines(host)
    assert lines[0] == "rvtune ranking, by time (median time on the target):"
    assert lines[1].startswith("  k / A on host: 1. BLOCK=16 9.6 us  2. BLOCK=32 19.2 us; worst/best 2.00x")
    no_counts = [make_record("k", "A", {"BLOCK": b}, [500, 600], target="qemu") for b in (16, 32)]
    assert ranking_lines(no_counts) == []  # emulated time is not performance: nothing to rank by
    assert ranking_lines(host + no_counts)[-1] == "  (emulated groups without instruction counts are not ranked)"


def test_long_config_ids_are_shortened_by_a_stable_scheme_to_fit_120_columns() -> None:
    # a Triton_RVV fused MoE space: six keys, four of them constant over the group
    records = [make_record("fused_moe", "default", {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": 8,
                                                    "GROUP_SIZE_M": 8, "top_k": 2, "num_threads": 1},
                           [1000], target="qemu", counters={"x60_cycles": 197_674_023.0 + 10_000_000 * i})
               for i, (m, n) in enumerate([(4, 16), (8, 16), (16, 32), (32, 32)])]
    lines = ranking_lines(records)
    assert all(len(line) <= 120 for line in lines), [len(line) for line in lines]
    assert lines[0].startswith("rvtune ranking, by x60_cycles (modelled SpacemiT X60 cycles per launch")
    group = " ".join(line.strip() for line in lines[2:])
    assert group.startswith("fused_moe / default on qemu: 1. BSM=4-BSN=16 197,674,023  2. BSM=8-BSN=16 207,674,023")
    assert group.endswith("; worst/best 1.15x over 4 configs; (all: BSK=8, GSM=8, tk=2, nt=1)")
    assert lines[3].startswith("      ")  # a continuation, indented under its group


def test_item_names_are_abbreviated_by_the_same_scheme() -> None:
    assert short_item_name("matmul[small-BLOCK_SIZE_M=16-BLOCK_SIZE_N=32-GROUP_SIZE_M=8-num_threads=1] (0001)") \
        == "matmul[small-BSM=16-BSN=32-GSM=8-nt=1] (0001)"
    assert short_item_name("k[emu-BLOCK_M=4-BATCH_M=2]") == "k[emu-BLOCK_M=4-BATCH_M=2]"  # both "BM": kept
