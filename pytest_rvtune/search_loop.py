"""--rvtune-search under pytest: the session's run loop, in one process, runs the kernel items a search strategy
chooses (search/), each through pytest's own run protocol, so every evaluated config is a normal item: its
verdict, its record in the results file, its row in pytest-benchmark's table. pytest collects every item up front
while a model-based search needs each result before it chooses the next: so the items are all collected, the
search runs them one at a time, and those it never chose are reported deselected at the end (docs/scaling.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_rvtune.collect import ITEM_KEY
from pytest_rvtune.item_info import KernelItemInfo
from pytest_rvtune.search.engine import SearchOutcome, StopSearch, run_search
from pytest_rvtune.search.report import record_value, search_summary, summary_lines, summary_path, write_summaries
from pytest_rvtune.search.space import SearchSpace, Trial, by_size
from pytest_rvtune.search.strategies import make_strategy
from pytest_rvtune.session import RECORD_KEY, RvtuneSession

#: (kernel, target, problem id): one search each; configs of different problems are never ranked together.
SearchKey = tuple[str, str, str]


def searched_items(items: list[pytest.Item]) -> tuple[dict[SearchKey, list[pytest.Item]], list[pytest.Item]]:
    """The kernel-module items per search, and the other items (a user's tests, Triton_RVV project items), which
    run as they would without a search."""
    from pytest_rvtune.spec import config_id
    groups: dict[SearchKey, list[pytest.Item]] = {}
    others = []
    for item in items:
        info = item.stash.get(ITEM_KEY, None)
        if isinstance(info, KernelItemInfo):
            key = (info.spec.name, info.target, config_id(info.spec.problem_of(info.config)))
            groups.setdefault(key, []).append(item)
        else:
            others.append(item)
    return groups, others


class SearchRun:
    """The searches of one session."""

    def __init__(self, session: pytest.Session, rvtune: RvtuneSession) -> None:
        self.session, self.rvtune = session, rvtune
        self.ran: set[int] = set()  # id() of the items run
        self.stop: str | None = None

    def run(self, item: pytest.Item, nextitem: pytest.Item | None = None) -> None:
        """One item through pytest's protocol, as pytest's own loop runs it. A search's next item is not known
        before this one's result: with no next item, pytest tears down every fixture the item set up, so the
        next can be in any module (a kernel item's fixtures are cheap: the targets stay open in the session)."""
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        self.ran.add(id(item))
        if self.session.shouldfail or self.session.shouldstop:
            self.stop = str(self.session.shouldfail or self.session.shouldstop)

    def search(self, key: SearchKey, members: list[pytest.Item]) -> dict[str, Any]:
        rvtune, options = self.rvtune, self.rvtune.options
        assert options.search is not None and options.budget is not None  # checked at configure
        infos = [info for item in members if isinstance(info := item.stash[ITEM_KEY], KernelItemInfo)]
        first = infos[0]
        ids = list(dict.fromkeys(info.config_id for info in infos))
        configs = {info.config_id: info.config_values for info in infos}
        cases = by_size(list(dict.fromkeys(info.case for info in infos)), first.spec.cases)
        space = SearchSpace([configs[i] for i in ids], ids, cases)
        index = {cid: n for n, cid in enumerate(ids)}
        by_trial = {Trial(index[info.config_id], info.case): item for info, item in zip(infos, members, strict=True)}
        strategy = make_strategy(options.search, space, options.budget, options.search_seed)
        records: list[Mapping[str, Any]] = []

        def evaluate(trial: Trial, step: int) -> float | None:
            if self.stop:
                raise StopSearch
            item = by_trial.get(trial)
            if item is None:  # a (config, case) not collected: counted as failed
                return None
            rvtune.search_field = {"strategy": options.search, "seed": options.search_seed,
                                   "budget": options.budget, "step": step}
            try:
                self.run(item)
            finally:
                rvtune.search_field = None
            record = next((v for k, v in item.user_properties if k == RECORD_KEY), None)
            if not isinstance(record, dict):  # skipped (an unreachable target), errored in setup
                return None
            records.append(record)
            return record_value(record, options.rank_by)

        outcome = run_search(space, strategy, options.budget, evaluate)
        return self.found(key, outcome, records)

    def found(self, key: SearchKey, outcome: SearchOutcome, records: list[Mapping[str, Any]]) -> dict[str, Any]:
        kernel, target, problem_id = key
        return search_summary(outcome, records, kernel=kernel, target=target, problem_id=problem_id,
                              rank_by=self.rvtune.options.rank_by, reference=self.rvtune.search_reference)

def run_searches(session: pytest.Session, rvtune: RvtuneSession) -> None:
    """pytest_runtestloop's work under --rvtune-search: the other items first, then one search per kernel, target
    and problem; the summaries printed at the end and written beside the results file."""
    groups, others = searched_items(session.items)
    runner = SearchRun(session, rvtune)
    progress = session.config.pluginmanager.get_plugin("rvtune-progress")
    if progress is not None:  # the items the searches will run, not every one collected
        budget = rvtune.options.budget or 0
        progress.expect(sum(rvtune.is_kernel_item(i.nodeid) for i in others)
                        + sum(min(budget, len(members)) for members in groups.values()))
    for n, item in enumerate(others):  # in order, as pytest runs them: their fixtures set up once
        if runner.stop:
            break
        runner.run(item, others[n + 1] if n + 1 < len(others) else None)
    summaries = []
    for key, members in groups.items():
        if runner.stop:
            break
        found = runner.search(key, members)
        summaries.append(found)
        rvtune.search_lines += summary_lines(found)
    if summaries:
        where = summary_path(rvtune.results_path)
        write_summaries(where, summaries)
        rvtune.search_lines.append(f"  search summaries: {where}")
    not_run = [item for members in groups.values() for item in members if id(item) not in runner.ran]
    if not_run:
        session.config.hook.pytest_deselected(items=not_run)
    if session.shouldfail:
        raise session.Failed(session.shouldfail)
    if session.shouldstop:
        raise session.Interrupted(session.shouldstop)
