"""Collection is opt-in: installed pytest-rvtune collects kernel modules only in a project that names its kernel
directories (ini option rvtune_kernel_dirs) or runs with --rvtune, and rvtune.toml files only when they hold a
[triton_rvv] project. An unrelated project with its own kernels/util.py used to get "ERROR collecting
kernels/util.py"."""

from __future__ import annotations

import pytest
from plugin_helpers import kernel_source

UTIL = "def add(a, b):\n    return a + b\n"
TEST_UTIL = "def test_add():\n    assert 1 + 1 == 2\n"


@pytest.fixture
def unrelated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project that is not ours: kernels/util.py (plain code), a test of its own, pytest configured without us."""
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("RVTUNE_CACHE_DIR", str(pytester.path / "cache"))
    pytester.makeini("[pytest]\ntestpaths = kernels tests\n")
    pytester.mkdir("kernels")
    (pytester.path / "kernels" / "util.py").write_text(UTIL)
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_util.py").write_text(TEST_UTIL)
    return pytester


def test_an_unrelated_projects_kernels_are_not_collected(unrelated: pytest.Pytester) -> None:
    result = unrelated.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "ERROR collecting" not in result.stdout.str() and "kernels/util.py" not in result.stdout.str()
    # named on the command line it is a plain module to pytest (no tests in it), still not a kernel module
    named = unrelated.runpytest("-p", "no:cacheprovider", "kernels/util.py")
    assert named.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "ERROR collecting" not in named.stdout.str()
    assert not (unrelated.path / ".rvtune").exists()  # nothing of ours written either


def test_naming_the_directory_is_what_makes_its_modules_kernels(unrelated: pytest.Pytester) -> None:
    unrelated.makeini("[pytest]\ntestpaths = kernels tests\nrvtune_kernel_dirs = kernels\n")
    result = unrelated.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    out = result.stdout.str()
    assert "ERROR collecting kernels/util.py" in out and "no kernel function util_kernel" in out  # ours now
    assert "tests/test_util.py::test_add" in out


def test_rvtune_option_collects_kernels_dir_without_the_ini_option(unrelated: pytest.Pytester) -> None:
    (unrelated.path / "kernels" / "util.py").unlink()
    (unrelated.path / "kernels" / "optin_add.py").write_text(kernel_source("optin_add", configs=(16, 32)))
    plain = unrelated.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "kernels")
    assert "optin_add[" not in plain.stdout.str()
    opted = unrelated.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "--rvtune", "kernels")
    ids = [line for line in opted.stdout.lines if "optin_add[" in line]
    assert ids == ["kernels/optin_add.py::optin_add[emu-BLOCK=16]", "kernels/optin_add.py::optin_add[emu-BLOCK=32]"]


def test_an_rvtune_toml_without_a_triton_rvv_project_is_not_collected(unrelated: pytest.Pytester) -> None:
    (unrelated.path / "rvtune.toml").write_text('[targets.board]\nhost = "127.0.0.1"\n')
    unrelated.makeini("[pytest]\n")
    result = unrelated.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert "rvtune.toml" not in result.stdout.str()
    (unrelated.path / "rvtune.toml").write_text("[triton_rvv\nbroken = \n")  # a broken project file is ours
    broken = unrelated.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert "ERROR collecting rvtune.toml" in broken.stdout.str() and "not valid TOML" in broken.stdout.str()


def test_the_old_ini_name_is_refused_with_the_new_one(unrelated: pytest.Pytester) -> None:
    unrelated.makeini("[pytest]\nrvtune_kernels = kernels\n")
    result = unrelated.runpytest("-p", "no:cacheprovider", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "the ini option rvtune_kernels is now rvtune_kernel_dirs" in result.stderr.str()
