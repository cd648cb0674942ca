"""The plugin's fixtures: rvtune_item, rvtune_targets, rvtune_target, rvtune_build, rvtune_golden. A kernel-suite
item gets its own; a user's test names its kernel, case and config by indirect parametrization."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_rvtune.collect import ITEM_KEY
from pytest_rvtune.item import build_kernel_item, kernel_golden
from pytest_rvtune.item_info import KernelItemInfo, ProjectItemInfo
from pytest_rvtune.session import RvtuneSession, TargetUnavailable, session_of

if TYPE_CHECKING:
    from pytest_rvtune.build import BuildArtifact
    from pytest_rvtune.golden import GoldenSet
    from pytest_rvtune.targets.base import Target

#: What a user's test gives rvtune_item: a kernel, or (kernel, case), or (kernel, case, config id or dict).
ItemParam = str | Path | list[object] | tuple[object, ...]


def resolve_item(session: RvtuneSession, param: ItemParam) -> KernelItemInfo:
    """A KernelItemInfo for a user's own test: ``(kernel, case, config)`` given by indirect parametrization.

    kernel is a module name in the kernel directories (kernels/ when the project names none) or a path; config
    a config id, a dict, or None for the first config; case None for the target's default case.
    """
    from pytest_rvtune.spec import as_config, load_kernel_module
    kernel, case, config = (*tuple(param), None, None)[:3] if isinstance(param, list | tuple) else (param, None, None)
    if not isinstance(kernel, str | Path) or not isinstance(case, str | None) \
            or not isinstance(config, str | dict | None):
        raise pytest.UsageError(f"rvtune_item: parametrize it with (kernel, case, config id or dict), not {param!r}")
    path = Path(kernel)
    if path.suffix != ".py":
        dirs = session.kernel_dirs or [session.rootdir / "kernels"]
        path = next((d / f"{kernel}.py" for d in dirs if (d / f"{kernel}.py").is_file()), path)
    spec = load_kernel_module(path)
    if config is None:
        chosen = spec.configs[0]
    else:
        wanted = config if isinstance(config, str) else spec.config_id(as_config(config))
        found = next((c for c in spec.configs if spec.config_id(c) == wanted), None)
        if found is None:
            raise pytest.UsageError(f"rvtune_item: kernel {spec.name} has no config {wanted}; "
                                    f"configs are {', '.join(spec.config_id(c) for c in spec.configs)}")
        chosen = found
    target = session.target_names[0]
    return KernelItemInfo(spec, case or session.default_case(target), chosen, target)


@pytest.fixture
def rvtune_item(request: pytest.FixtureRequest) -> KernelItemInfo | ProjectItemInfo:
    """The kernel, case, config and target of this item: a kernel-suite item's own, or in a user's test
    ``@pytest.mark.parametrize("rvtune_item", [("softmax", "small", "BLOCK_SIZE_M=4-BLOCK_SIZE_N=32")],
    indirect=True)``."""
    info = request.node.stash.get(ITEM_KEY, None)
    if info is not None:
        return info
    if not hasattr(request, "param"):
        raise pytest.UsageError("rvtune_item: parametrize it indirectly with (kernel, case, config id); "
                                "see docs/usage.md, 'Using the fixtures in your own tests'")
    return resolve_item(session_of(request.config), request.param)


@pytest.fixture(scope="session")
def rvtune_targets(request: pytest.FixtureRequest) -> RvtuneSession:
    """The session's targets, opened once per process: ``rvtune_targets.target("qemu")``."""
    return session_of(request.config)


@pytest.fixture
def rvtune_target(request: pytest.FixtureRequest, rvtune_targets: RvtuneSession) -> Target:
    """The Target of this item (kernel items), or the first --rvtune-target (other tests).

    A target that cannot be opened fails the first item that needs it (naming the target, host and cause);
    the later ones of the same process skip with a pointer to that error.
    """
    info = request.node.stash.get(ITEM_KEY, None)
    name = info.target if info else rvtune_targets.target_names[0]
    try:
        return rvtune_targets.target(name)
    except TargetUnavailable as exc:
        message = str(exc)
    # Outside the except block: the failure shows the message alone, not the exception chain behind it.
    if name in rvtune_targets.target_error_reported:
        pytest.skip(f"target {name!r} unavailable (the error is reported once, above)")
    rvtune_targets.target_error_reported.add(name)
    pytest.fail(message, pytrace=False)


@pytest.fixture
def rvtune_build(rvtune_item: KernelItemInfo, rvtune_target: Target, rvtune_targets: RvtuneSession) -> BuildArtifact:
    """The item's ELF, built or fetched from the content-addressed cache.

    A build error fails the test with the compiler's message."""
    outcome = build_kernel_item(rvtune_item, rvtune_target, rvtune_targets.golden_dir)
    if outcome.artifact is None:
        pytest.fail(str(outcome.error), pytrace=False)
    return outcome.artifact


@pytest.fixture
def rvtune_golden(rvtune_item: KernelItemInfo, rvtune_targets: RvtuneSession) -> GoldenSet:
    """The item's golden data (files, scalars, tolerance, sha256), generated on demand."""
    golden = kernel_golden(rvtune_item, rvtune_targets.golden_dir)
    if isinstance(golden, str):
        pytest.fail(golden, pytrace=False)
    return golden
