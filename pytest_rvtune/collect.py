"""Collection: our kernel modules (``kernels/<name>.py``) and Triton_RVV projects (``rvtune.toml`` with
``[triton_rvv]`` tables), each -> one item per (entry or kernel) x case x config x target.

The work is in spec.py and compat/ (what the items are) and item.py (build, run, verdict, record); this module
only makes pytest collectors and items of them, and turns an item's outcome into a pass or a failure.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rvtune.compat.project import PROJECT_FILE, TABLE
from pytest_rvtune.item import ItemOutcome, finish_item, run_kernel_item, run_project_item
from pytest_rvtune.item_info import KernelItemInfo, ProjectItemInfo
from pytest_rvtune.selection import config_keywords, filter_keys
from pytest_rvtune.session import RECORD_KEY, RESULTS_ERROR_KEY, RvtuneSession, session_of
from pytest_rvtune.targets.base import Target

if TYPE_CHECKING:  # spec.py loads torch: imported where a kernel module is collected
    from pytest_rvtune.results.shortlist import Shortlist

#: Where a collected item keeps what it is (KernelItemInfo or ProjectItemInfo); the fixtures read it.
ITEM_KEY = pytest.StashKey["KernelItemInfo | ProjectItemInfo"]()


# --------------------------------------------------------------------------------------------- kernel modules
class KernelModule(pytest.File):
    """A kernels/<name>.py module: one item per (case, config, target)."""

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_rvtune.spec import KernelModuleError, filter_configs, filter_key_values, load_kernel_module
        session = session_of(self.config)
        try:
            spec = load_kernel_module(self.path)
        except Exception as exc:
            # One broken kernel module must not stop the suite: pytest would interrupt the whole session on
            # a collection error, so the error is reported and the other kernels still run.
            self.config.option.continue_on_collection_errors = True
            message = str(exc) if isinstance(exc, KernelModuleError) else \
                f"kernel module {self.path}: {type(exc).__name__}: {exc}"
            raise self.CollectError(message) from exc
        session.kernel_modules += 1
        configs = list(spec.configs)
        known_keys = {key for config in configs for key in config}
        for config_filter in session.config_filters:
            missing = filter_keys(config_filter) - known_keys
            for key in missing:
                session.filter_keys_unknown[key] += 1
            # A filter on a key this kernel does not have selects none of its configs (e.g. BLOCK_SIZE_M
            # across the suite leaves out jacobi); a key no kernel has is one collection error (see below).
            configs = [] if missing else filter_configs(configs, config_filter)
            if not missing:
                if filter_configs(spec.configs, config_filter):
                    session.filters_matched.add(config_filter)
                for key, values in filter_key_values(spec.configs, config_filter).items():
                    session.filter_values[config_filter].setdefault(key, set()).update(values)
        for marker in (spec.name, *spec.cases):  # per kernel and case, registered so --strict-markers works
            self.config.addinivalue_line("markers", f"{marker}: pytest-rvtune kernel or case {marker}")
        # The cases asked for, else each target's default case: a module without one is left out of it, with a
        # note (plugin.py), so kernels with different case sets share one command.
        asked = list(session.cases) or list(dict.fromkeys(session.default_case(t) for t in session.target_names))
        session.cases_asked.update(asked)
        session.cases_found.update(c for c in asked if c in spec.cases)
        lacking = [c for c in asked if c not in spec.cases]
        if lacking:
            session.cases_left_out.append((self.nodeid, str(self.path), spec.name, lacking, list(spec.cases)))
        for target in session.target_names:
            cases = [c for c in session.cases if c in spec.cases] if session.cases else [session.default_case(target)]
            for case in (c for c in cases if c in spec.cases):
                for config in configs:
                    info = KernelItemInfo(spec, case, config, target)
                    suffix = f"-{target}" if len(session.target_names) > 1 else ""
                    item = KernelItem.from_parent(self, name=info.item_name(suffix), callobj=kernel_item_test)
                    item.stash[ITEM_KEY] = info
                    for marker in (spec.name, case, "rvtune"):
                        item.add_marker(marker)
                    # the target too: a pasted `kernel[case-config] on qemu` (report, compare) selects its item
                    item.extra_keyword_matches.update({*config_keywords(info.config_values), target})
                    yield item


def align_node_id(node: pytest.Item) -> None:
    """Give an item named ``kernel[params]`` the structured id pytest parses out of that string (pytest 9.2 keys
    --lf/--ff on it: built from the name alone it says names ``("kernel[params]",)`` and no params, parsed back from
    the cache it says names ``("kernel",)`` and params ``"params"``, so --lf found "2 known failures not in selected
    tests" and ran every item). Older pytest has no structured id: nothing to do."""
    structured = getattr(node, "_id", None)
    parse = getattr(type(structured), "parse", None)
    if callable(parse):
        node._id = parse(str(structured))


class KernelItem(pytest.Function):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        align_node_id(self)

    def reportinfo(self) -> tuple[Path, int, str]:
        # Line 0: there is no test function line; pytest's skip report needs a number.
        return self.path, 0, self.name


def collect_file(file_path: Path, parent: pytest.Collector, others: list[pytest.Collector]) -> list[pytest.Collector]:
    """pytest_collect_file's answer: an rvtune.toml project, a kernel module (ours alone), or what the other
    plugins made of the file."""
    if is_project_file(file_path):  # a Triton_RVV checkout configured by `rvtune import`
        return [ProjectFile.from_parent(parent, path=file_path), *others]
    if file_path.suffix != ".py" or file_path.name.startswith("_") or file_path.name == "conftest.py":
        return others
    session = session_of(parent.config)
    if not any(file_path.resolve().is_relative_to(d) for d in session.kernel_dirs):
        return others
    # A kernel module named on the command line (or matching python_files) is also a test module to pytest's
    # python plugin, which would import it a second time: a syntax error would then be reported twice, once
    # with pytest's import traceback. A kernel module is ours alone.
    return [KernelModule.from_parent(parent, path=file_path),
            *(c for c in others if not isinstance(c, pytest.Module))]


def kernel_item_test(request: pytest.FixtureRequest, rvtune_item: KernelItemInfo, rvtune_target: Target) -> None:
    """One kernel-suite item (item.run_kernel_item), passed or failed by its verdict."""
    session = session_of(request.config)
    finish(request, session, run_kernel_item(session, request.node.nodeid, rvtune_item, rvtune_target),
           rvtune_target)


def finish(request: pytest.FixtureRequest, session: RvtuneSession, outcome: ItemOutcome, target: Target) -> None:
    """Record the item (item.finish_item), hand the record to the controller, fail the item if it did not pass."""
    # An xdist worker (on this host or another) never writes the results file: the record goes back with the
    # item's report and the controller appends it (session.tally_report), so one process owns the file.
    finished = finish_item(session, outcome, target, write=session.is_controller)
    if finished.write_error is not None:
        request.node.user_properties.append((RESULTS_ERROR_KEY, finished.write_error))
    request.node.user_properties.append((RECORD_KEY, finished.record))
    if not finished.verdict.passed:
        pytest.fail(finished.verdict.message, pytrace=False)


# --------------------------------------------------------------------------------------------- Triton_RVV projects


def is_project_file(file_path: Path) -> bool:
    """An rvtune.toml with a [triton_rvv] table: a Triton_RVV project, which opts in by having it (an rvtune.toml
    that only configures boards is not collected). A file that is not valid TOML but mentions the table is
    collected, so its error is reported."""
    if file_path.name != PROJECT_FILE:
        return False
    try:
        text = file_path.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    try:
        return TABLE in tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return TABLE in text


def unimported_checkout_hint(*roots: Path) -> list[str]:
    """A line for the collection report when nothing of ours was collected in what looks like a Triton_RVV
    checkout without the rvtune.toml that `rvtune import` writes (else pytest says only "collected 0 items")."""
    from pytest_rvtune.compat.checkout_layout import looks_like_checkout

    for root in dict.fromkeys(roots):
        if is_project_file(root / PROJECT_FILE):
            continue
        kernels = looks_like_checkout(root)
        if kernels is not None:
            return [f"rvtune: {root} looks like a Triton_RVV checkout (kernels in {kernels}/) that has not been "
                    f"imported: run `rvtune import {root}` (it writes rvtune.toml), then pytest again"]
    return []


class ProjectFile(pytest.File):
    """An rvtune.toml: items for its [triton_rvv] entries (none when it only configures boards)."""

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_rvtune.compat.project import read_project
        from pytest_rvtune.compat.project_items import entry_configs

        session = session_of(self.config)
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
            session.cases_found.update(c.name for c in cases)
            for case in cases:
                try:
                    configs = entry_configs(entry, case)
                except Exception as exc:  # one broken module: its entry's error, the other entries still run
                    yield EntryErrorItem.from_parent(self, name=f"{entry.name}[{case.name}]",
                                                 message=f"{entry.where}: {exc}")
                    continue
                for target in session.target_names:
                    for config in configs:
                        cid = config.id
                        suffix = f"-{target}" if len(session.target_names) > 1 else ""
                        # which harness runs it: theirs, or our generic one where theirs cannot (variants.py)
                        variant = case.variant(config.values)
                        harness = "generic" if variant is not None and variant.harness == "generic" else "theirs"
                        if harness == "generic" and variant is not None and variant.chain:
                            harness = "chain"  # their kernels one after the other in one ELF (chain_run.py)
                        shown = f"-{harness}" if harness != "theirs" else ""
                        item = KernelItem.from_parent(self, name=f"{entry.name}[{case.name}-{cid}{shown}{suffix}]",
                                                      callobj=project_item_test)
                        item.stash[ITEM_KEY] = ProjectItemInfo(project, entry, case, config, cid, target)
                        for marker in ("rvtune", "triton_rvv"):
                            item.add_marker(marker)
                        item.extra_keyword_matches.update({entry.name, case.name, f"{harness}_harness", target,
                                                           *config_keywords(config.values)})
                        yield item


class EntryErrorItem(pytest.Item):
    """Stands for an entry whose configs cannot be had: fails with the reason (the other entries still run)."""

    #: No fixtures; said because other plugins read it of every item (labgrid's pytest plugin, installed with the
    #: [labgrid] extra, raised AttributeError in its runtest_setup and the entry's reason was lost).
    fixturenames: tuple[str, ...] = ()

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message
        align_node_id(self)

    def runtest(self) -> None:
        pytest.fail(self.message, pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


def project_item_test(request: pytest.FixtureRequest, rvtune_item: ProjectItemInfo, rvtune_target: Target) -> None:
    """One Triton_RVV project item (item.run_project_item), passed or failed by its verdict."""
    session = session_of(request.config)
    finish(request, session, run_project_item(session, request.node.nodeid, rvtune_item, rvtune_target),
           rvtune_target)


def left_out_by_shortlist(items: list[pytest.Item], shortlist: Shortlist) -> list[pytest.Item]:
    """The kernel-module items --rvtune-shortlist leaves out (results/shortlist.py); other items (a Triton_RVV
    project's, which have no kernel module to take problem keys from, and a user's tests) stay."""
    from pytest_rvtune.spec import config_id
    dropped: list[pytest.Item] = []
    for item in items:
        info = item.stash.get(ITEM_KEY, None)
        if isinstance(info, KernelItemInfo) and not shortlist.keeps(info.spec.name, info.case,
                                                    config_id(info.spec.problem_of(info.config)), info.config_id):
            dropped.append(item)
    return dropped
