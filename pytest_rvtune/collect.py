"""pytest glue for Triton_RVV projects: ``rvtune.toml`` with ``[triton_rvv]`` tables -> one item per entry x case
x config x target. The work is in compat/ (project file, data, build) and item_runner.py (run, verdict, record);
this module only wires them to pytest, next to plugin.py's kernel-module items, whose fixtures and reporting it
shares.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_rvtune.compat.project import PROJECT_FILE, RvvCase, RvvEntry, RvvProject
from pytest_rvtune.compat.triton_rvv_module import RvvConfig


@dataclass
class ProjectItemInfo:
    """What one project item is (the plugin's rvtune_target fixture reads ``target``)."""

    project: RvvProject
    entry: RvvEntry
    case: RvvCase
    config: RvvConfig
    config_id: str
    target: str


def is_project_file(file_path: Path) -> bool:
    return file_path.name == PROJECT_FILE


class ProjectFile(pytest.File):
    """An rvtune.toml: items for its [triton_rvv] entries (none when it only configures boards)."""

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_rvtune.compat.project import read_project
        from pytest_rvtune.compat.project_items import entry_configs
        from pytest_rvtune.plugin import ITEM_KEY, KernelItem, _config_keywords, _session

        session = _session(self.config)
        try:
            project = read_project(self.path)
        except Exception as exc:
            self.config.option.continue_on_collection_errors = True
            raise self.CollectError(str(exc)) from exc
        if project is None:
            return
        self.config.addinivalue_line("markers", "triton_rvv: an item of a Triton_RVV project (rvtune import)")
        for entry in project.entries.values():
            cases = [c for c in entry.cases.values() if not session.cases or c.name in session.cases]
            for case in cases:
                try:
                    configs = entry_configs(entry, case)
                except Exception as exc:  # one broken module: its entry's error, the other entries still run
                    yield _ErrorItem.from_parent(self, name=f"{entry.name}[{case.name}]",
                                                 message=f"{entry.where}: {exc}")
                    continue
                for target in session.target_names:
                    for config in configs:
                        cid = config.id
                        suffix = f"-{target}" if len(session.target_names) > 1 else ""
                        item = KernelItem.from_parent(self, name=f"{entry.name}[{case.name}-{cid}{suffix}]",
                                                      callobj=_project_item_test)
                        item.stash[ITEM_KEY] = ProjectItemInfo(project, entry, case, config, cid, target)  # type: ignore[arg-type]
                        for marker in ("rvtune", "triton_rvv"):
                            item.add_marker(marker)
                        item.extra_keyword_matches.update({entry.name, case.name,
                                                           *_config_keywords(config.values)})
                        yield item


class _ErrorItem(pytest.Item):
    """Stands for an entry whose configs cannot be had: fails with the reason (the other entries still run)."""

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message

    def runtest(self) -> None:
        pytest.fail(self.message, pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


def _project_item_test(request: pytest.FixtureRequest, rvtune_item: Any, rvtune_target: Any) -> None:
    """Data -> build -> run -> verdict -> record, like a kernel-module item; never raises mid-way."""
    from pytest_rvtune.compat.project_items import ProjectDataError, build_project_item, project_data
    from pytest_rvtune.item import ItemWork, build_failed, item_error
    from pytest_rvtune.plugin import _finish, _session

    session = _session(request.config)
    info: ProjectItemInfo = rvtune_item
    work = ItemWork(request.node.nodeid, info.entry.name, info.case.name, dict(info.config.values),
                    info.config_id, info.target, dict(info.case.params))
    try:
        data = project_data(info.project, info.entry, info.case)
    except ProjectDataError as exc:
        _finish(request, session, item_error(work, rvtune_target, str(exc)), rvtune_target)
        return
    started = time.perf_counter()
    try:
        artifact = build_project_item(info.project, info.entry, info.case, info.config, rvtune_target.isa)
    except Exception as exc:  # compile, link, the module's own errors: this item's build fails, the rest go on
        outcome = build_failed(work, rvtune_target, f"{work.what}: {exc}", time.perf_counter() - started)
        _finish(request, session, outcome, rvtune_target)
        return
    outcome = _run(session, work, rvtune_target, artifact, data, info.project.output_format,
                   time.perf_counter() - started)
    _finish(request, session, outcome, rvtune_target)


def _run(session: Any, work: Any, target: Any, artifact: Any, data: Any, output_format: str,
         build_seconds: float) -> Any:
    from pytest_rvtune.harness.output_format import OutputFormat
    from pytest_rvtune.item import ExternalRun, item_error, run_item
    from pytest_rvtune.targets.lock import exclusive

    build_info = {"build_seconds": build_seconds, "build_cache_hit": bool(artifact.cache_hit)}
    try:
        target.prepare([artifact.elf, *data.files.values()])
        with exclusive(target):
            return run_item(work, target, elf=artifact.elf, argv=list(artifact.argv), elf_sha256=artifact.elf_sha256,
                            golden_sha256=data.sha256, options=session.run_options(target),
                            kernel_symbol=artifact.kernel_symbol, build_info=build_info,
                            external=ExternalRun(data.files, OutputFormat.load(output_format), artifact.launches))
    except Exception as exc:  # a board lost, a full disk: this item
        return item_error(work, target, f"{work.what}: {exc}")
