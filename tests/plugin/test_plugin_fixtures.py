"""The fixtures in a user's own test: rvtune_item (indirect parametrization), rvtune_target, rvtune_build,
rvtune_golden, exactly as the README shows them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

USER_TEST = '''
import pytest

from pytest_rvtune.golden import read_tensor


@pytest.mark.parametrize("rvtune_item", [("pf_user", "small", "BLOCK=32")], indirect=True)
def test_my_own_check(rvtune_item, rvtune_target, rvtune_build, rvtune_golden):
    assert rvtune_build.elf.is_file() and rvtune_build.kernel_symbol == "pf_user_kernel"
    (expected,) = rvtune_golden.expected
    assert read_tensor(expected).shape == (75,)
    result = rvtune_target.run(rvtune_build.elf, ["--runs", "3", *rvtune_build.argv], timeout=60,
                               kernel_symbol=rvtune_build.kernel_symbol)
    assert result.returncode == 0 and result.all_checks_ok
    assert len(result.samples_ns) == 3 and result.counters["kernel_insns"] > 0


@pytest.mark.parametrize("rvtune_item", [("pf_user", "small", "BLOCK=48")], indirect=True)
def test_unknown_config(rvtune_item):
    pass


@pytest.mark.parametrize("rvtune_item", [(42, "small")], indirect=True)
def test_kernel_not_a_name(rvtune_item):
    pass
'''


def test_fixtures_in_a_users_test(project: pytest.Pytester, add_kernel: Callable[..., Path]) -> None:
    add_kernel("pf_user", configs=(16, 32))
    project.mkdir("tests").joinpath("test_mine.py").write_text(USER_TEST)
    result = project.runpytest("tests/test_mine.py", "-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*rvtune_item: kernel pf_user has no config BLOCK=48; configs are BLOCK=16, "
                                 "BLOCK=32*"])
    # a kernel that is no name or path is named as the bad parameter (it was a TypeError from inside Path())
    result.stdout.fnmatch_lines(["*rvtune_item: parametrize it with (kernel, case, config id or dict), "
                                 "not (42, 'small')*"])
