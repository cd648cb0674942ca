"""The shortlist workflow: rank every config under emulation, then time only the best few on a real target.

Instruction counts prune well but do not pick (issue 19: on the host, the top 3 by count always held a config
within 1 % of the best, the count's own #1 was up to 18 % slower). So a board's time goes where it decides
something: ``--rvtune-shortlist RUN`` keeps, per (kernel, case, problem), the configs of the best
``--rvtune-shortlist-size`` results of the earlier run RUN (a results file or pytest-benchmark JSON) by its
ranking metric (``x60_cycles`` under emulation, runs.rank_metric). Configs that ran the same run in RUN
(summary.distinct_results: identical builds) are one result, timed once.

When RUN ranked a kernel at another case (an emulation-sized problem, then the board's bench size), its
ranking is used for the case asked for, and the shortlist says so: winners move with size. A kernel or
problem RUN never ranked keeps every config (nothing is dropped without a ranking). Nothing here knows pytest.

Every record of a shortlisted item keeps where its shortlist came from (``shortlisted_by``: RUN, the case and
sizes it was ranked at, the metric, the configs kept of how many), so `rvtune report` and `rvtune export-best`
say, long after the session, when a winner was picked among configs ranked at another size (``size_note``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_rvtune.results.records import RunRecord
from pytest_rvtune.results.report import ranked
from pytest_rvtune.results.runs import Run, rank_metric
from pytest_rvtune.results.summary import distinct_results

#: Results kept per group unless --rvtune-shortlist-size says otherwise (issue 19's figures: the top 3 by count
#: always held a config within 1 % of the host's best).
DEFAULT_SIZE = 3


@dataclass(frozen=True)
class Ranking:
    """One group's shortlist: the config ids kept, what ranked them and where (the case of RUN)."""

    kept: tuple[str, ...]
    metric: str
    case: str
    configs: int  # configs RUN ranked in the group
    distinct: int  # their distinct results
    case_params: dict[str, Any] = field(default_factory=dict)  # the sizes of that case, e.g. {"M": 160}


@dataclass
class Shortlist:
    """The kept configs per (kernel, case, problem id) of RUN."""

    run: Run
    size: int
    rankings: dict[tuple[str, str, str], Ranking] = field(default_factory=dict)

    @classmethod
    def of(cls, run: Run, size: int = DEFAULT_SIZE) -> Shortlist:
        if size < 1:
            raise ValueError(f"shortlist size {size}: keep at least 1 config per group")
        shortlist = cls(run, size)
        groups: dict[tuple[str, str, str], list[RunRecord]] = {}
        for record in run.records:  # every target of RUN: a qemu run, or an earlier board run
            groups.setdefault((record.kernel, record.case, record.problem_id), []).append(record)
        for key, group in groups.items():
            metric = rank_metric(group)
            results = distinct_results(ranked(group, metric))
            if results:
                shortlist.rankings[key] = Ranking(tuple(result[0].config_id for result in results[:size]), metric,
                                                  key[1], sum(len(r) for r in results), len(results),
                                                  dict(group[0].case_params))
        return shortlist

    def ranking_for(self, kernel: str, case: str, problem_id: str) -> Ranking | None:
        """The ranking that decides this group (``problem_id`` as records.RunRecord.problem_id): RUN's own of the case,
        else the one case RUN ranked the kernel's problem at (another size: describe says so), else None (keep
        everything)."""
        if (kernel, case, problem_id) in self.rankings:
            return self.rankings[(kernel, case, problem_id)]
        others = [r for (k, _c, p), r in self.rankings.items() if k == kernel and p == problem_id]
        return others[0] if len(others) == 1 else None

    def keeps(self, kernel: str, case: str, problem_id: str, config: str) -> bool:
        ranking = self.ranking_for(kernel, case, problem_id)
        return ranking is None or config in ranking.kept

    def record_field(self, kernel: str, case: str, problem_id: str) -> dict[str, Any] | None:
        """What a shortlisted item's record keeps about its shortlist (None: the group was not shortlisted)."""
        ranking = self.ranking_for(kernel, case, problem_id)
        if ranking is None:
            return None
        return {"run": str(self.run.path), "case": ranking.case, "case_params": ranking.case_params,
                "metric": ranking.metric, "kept": list(ranking.kept), "of_configs": ranking.configs}

    def describe(self, asked: Iterable[tuple[str, str, str]]) -> list[str]:
        """One line per (kernel, case, problem id) asked for: what was kept and why."""
        lines = []
        for kernel, case, problem_id in sorted(set(asked)):
            ranking = self.ranking_for(kernel, case, problem_id)
            label = f"{kernel} / {case}{f' {problem_id}' if problem_id else ''}"
            if ranking is None:
                lines.append(f"  {label}: not ranked in {self.run.path}: every config runs")
                continue
            where = "" if ranking.case == case else f" (ranked at case {ranking.case}, not {case}: winners move " \
                                                     "with size)"
            lines.append(f"  {label}: {len(ranking.kept)} of {ranking.configs} configs "
                         f"({ranking.distinct} distinct) by {ranking.metric}{where}: {', '.join(ranking.kept)}")
        return lines

