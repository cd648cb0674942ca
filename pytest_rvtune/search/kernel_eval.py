"""Evaluating a trial without pytest (`rvtune tune`): a kernel module's config on one case, built, run on a target
and judged by the same item pipeline the plugin uses (item.py), its record appended to a results file."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_rvtune.item import ItemOutcome, item_error, kernel_item_outcome, kernel_work, provenance, run_built
from pytest_rvtune.item_info import KernelItemInfo
from pytest_rvtune.results.writer import ResultsWriter
from pytest_rvtune.run_options import RunOptions
from pytest_rvtune.spec import BlockConfig, KernelSpec
from pytest_rvtune.targets.base import Target

if TYPE_CHECKING:
    from pytest_rvtune.build import BuildArtifact
    from pytest_rvtune.golden import GoldenSet


@dataclass
class KernelEvaluator:
    """Runs one kernel's (config, case) items on ``target`` and records each as pytest would."""

    spec: KernelSpec
    target: Target
    golden_root: Path
    options: RunOptions
    writer: ResultsWriter
    run_id: str
    rootdir: Path
    search_field: dict[str, Any] = field(default_factory=dict)

    def nodeid(self, info: KernelItemInfo) -> str:
        """The node id pytest gives the same item, so the records of both match (`rvtune compare`, resume)."""
        try:
            module = Path(os.path.relpath(self.spec.path, self.rootdir)).as_posix()
        except ValueError:  # another drive: the absolute path
            module = self.spec.path.as_posix()
        return f"{module}::{info.item_name()}"

    def evaluate(self, config: BlockConfig, case: str, step: int) -> dict[str, Any]:
        """The item's record, written to the results file (a write error propagates: nothing would be kept)."""
        info = KernelItemInfo(self.spec, case, config, self.target.name)
        work = kernel_work(self.nodeid(info), info)
        def run(golden: GoldenSet, artifact: BuildArtifact, build_seconds: float) -> ItemOutcome:
            try:
                return run_built(work, self.target, artifact, build_seconds, golden, self.options)
            except Exception as exc:  # a board lost, a full disk: this item, as the plugin records it
                return item_error(work, self.target, f"{work.what}: {exc}")

        outcome = kernel_item_outcome(work, info, self.target, self.golden_root, run)
        record: dict[str, Any] = outcome.record | provenance(self.run_id, self.rootdir, work.nodeid)
        record["search"] = self.search_field | {"step": step}
        self.writer.append(record)
        return record

