"""Triton_RVV (triton-cpu) kernel modules loaded as they are: modules we write in their format.

Their habits, each in RVV_MODULE below: undecorated kernels, several per file, a host helper named like a
kernel, a jitted alias, getters with problem-size parameters and num_threads, ``DTYPE`` from the environment,
``set_active_to_cpu()`` at import, an import of a module that does not exist, a ``__main__`` block that would
end the process.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from pathlib import Path

import pytest
import triton
import triton.language as tl

from pytest_rvtune.compat.triton_rvv_module import (
    MissingImport,
    RvvConfig,
    RvvModuleError,
    getter_params,
    jit_kernel,
    kernel_names,
    load_configs,
    load_rvv_module,
    read_configs,
)
from pytest_rvtune.spec import KernelModuleError

RVV_MODULE = '''\
"""A module in the Triton_RVV format (written for these tests)."""
import os

import torch
import triton
import triton.language as tl
from utils import save_matrices_to_txt

DTYPE = getattr(torch, os.getenv("DTYPE", "float32"))
triton.runtime.driver.set_active_to_cpu()


def shift_kernel(x_ptr, y_ptr, n, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + SHIFT, mask=offs < n)  # STORE LINE


def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


rvv_scale_kernel = triton.jit(scale_kernel)


def run_scale_kernel(x):
    y = torch.empty_like(x)
    triton.jit(scale_kernel)[(1,)](x, y, x.numel(), BLOCK=16)
    return y


def get_pair_kernel_autotune_config(N_CTX, D_HEAD, num_threads=1):
    return [triton.Config({"BLOCK": b, "C_D_HEAD": D_HEAD, "COL_SIZE": N_CTX}, num_threads=num_threads)
            for b in (8, 16)]


def get_scale_kernel_autotune_config():
    return [triton.Config({"BLOCK": b}) for b in (4, 8)]


def save_outputs(y):
    save_matrices_to_txt(y, output_dir=".")


if __name__ == "__main__":
    os.environ["TRITON_CPU_BACKEND"] = "1"
    raise SystemExit("the __main__ block ran")
'''


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def write(tmp_path: Path, text: str = RVV_MODULE, name: str = "rvv_pair") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def rvv_path(tmp_path: Path) -> Path:
    return write(tmp_path)


@pytest.fixture
def rvv(rvv_path: Path):
    return load_rvv_module(rvv_path)


# ---- loading -------------------------------------------------------------------------------------
def test_module_level_code_runs_with_the_tolerances(rvv_path: Path, rvv) -> None:
    import torch

    assert rvv.__name__ == "rvtune_rvv.rvv_pair" and rvv.__file__ == str(rvv_path)  # never __main__
    assert rvv.DTYPE is torch.float32
    assert sys.modules[rvv.__name__] is rvv  # triton and inspect find functions' modules by name
    # set_active_to_cpu() did nothing: upstream Triton has no such function, and none was added
    assert not hasattr(triton.runtime.driver, "set_active_to_cpu")
    assert str(rvv_path.parent) not in sys.path  # only while the module executed
    assert "__rvtune_missing_import__" not in vars(rvv)


def test_dtype_comes_from_the_environment(rvv_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv("DTYPE", "float16")
    assert load_rvv_module(rvv_path).DTYPE is torch.float16
    monkeypatch.setenv("DTYPE", "float33")
    with pytest.raises(RvvModuleError) as err:
        load_rvv_module(rvv_path)
    line = line_of(RVV_MODULE, "DTYPE = getattr")
    assert f"{rvv_path}:{line}: executing the module failed: AttributeError" in str(err.value)
    assert "float33" in str(err.value) and "fix the module-level code at that line" in str(err.value)
    assert "rvtune_rvv.rvv_pair" not in sys.modules


def test_the_file_on_disk_is_not_changed(rvv_path: Path, rvv) -> None:
    assert rvv_path.read_text() == RVV_MODULE


def test_a_missing_import_fails_only_where_it_is_used(rvv_path: Path, rvv) -> None:
    assert isinstance(rvv.save_matrices_to_txt, MissingImport)
    assert not hasattr(rvv.save_matrices_to_txt, "__wrapped__")  # introspection still works
    line = line_of(RVV_MODULE, "from utils import")
    expected = (f"{rvv_path}:{line}: save_matrices_to_txt is used, but `from utils import save_matrices_to_txt` "
                f"failed (module 'utils' does not exist): add utils.py beside rvv_pair.py (in {rvv_path.parent}) "
                "or remove the import")
    with pytest.raises(RvvModuleError) as err:
        rvv.save_outputs([1.0])  # the module's own function using the name
    assert str(err.value) == expected
    with pytest.raises(RvvModuleError, match="save_matrices_to_txt is used"):
        rvv.save_matrices_to_txt.some_attribute  # noqa: B018
    assert isinstance(err.value, KernelModuleError)  # the plugin's collection reports it like its own errors


def test_a_helper_beside_the_module_is_imported(rvv_path: Path) -> None:
    (rvv_path.parent / "utils.py").write_text("CALLS = []\n\n\ndef save_matrices_to_txt(*m, **kw):\n"
                                              "    CALLS.append(m)\n")
    sys.modules.pop("utils", None)
    try:
        load_rvv_module(rvv_path).save_outputs([1.0])
        assert sys.modules["utils"].CALLS == [([1.0],)]  # the real helper ran
    finally:
        sys.modules.pop("utils", None)


def test_only_import_time_triton_cpu_calls_are_skipped(tmp_path: Path) -> None:
    path = write(tmp_path, "import triton\n\nif True:\n    triton.runtime.driver.set_active_to_cpu()\n\n\n"
                           "def select():\n    triton.runtime.driver.set_active_to_cpu()\n", name="cpu_calls")
    mod = load_rvv_module(path)
    with pytest.raises(AttributeError, match="set_active_to_cpu"):  # a call at run time is the user's own
        mod.select()


def test_import_forms_bind_placeholders_for_their_names(tmp_path: Path) -> None:
    path = write(tmp_path, "import no_such_pkg.sub\nimport no_such_mod as alias\nfrom os import no_such_name\n",
                 name="forms")
    mod = load_rvv_module(path)
    assert all(isinstance(getattr(mod, n), MissingImport) for n in ("no_such_pkg", "alias", "no_such_name"))
    with pytest.raises(RvvModuleError, match=r"forms.py:2: alias is used, .*add no_such_mod.py beside forms.py"):
        mod.alias()
    with pytest.raises(RvvModuleError, match=r"forms.py:3: no_such_name is used, .*cannot import name"):
        mod.no_such_name()


@pytest.mark.parametrize("ending", ["import sys\nsys.exit(3)\n", "raise SystemExit(3)\n"])
def test_exit_at_import_is_the_modules_error(tmp_path: Path, ending: str) -> None:
    path = write(tmp_path, "X = 1\n" + ending, name="exits")
    with pytest.raises(RvvModuleError, match=r"exits.py:\d: executing the module failed: SystemExit: 3"):
        load_rvv_module(path)


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(RvvModuleError, match=r"broken.py:2: syntax error"):
        load_rvv_module(write(tmp_path, "X = 1\ndef f(:\n", name="broken"))


# ---- kernels -------------------------------------------------------------------------------------
def test_kernel_names_in_file_order(rvv) -> None:
    # not alphabetical; no host helper (run_scale_kernel uses no tl.*) and no alias (rvv_scale_kernel)
    assert kernel_names(rvv) == ["shift_kernel", "scale_kernel"]


def test_jit_kernel_keeps_the_files_lines(rvv_path: Path, rvv) -> None:
    kernel = jit_kernel(rvv, "shift_kernel")
    assert isinstance(kernel, triton.runtime.JITFunction) and kernel.__name__ == "shift_kernel"
    assert jit_kernel(rvv, "shift_kernel") is kernel  # jitted once
    def_line = line_of(RVV_MODULE, "def shift_kernel")
    assert kernel.fn.__code__.co_firstlineno == def_line
    assert inspect.getsourcelines(kernel.fn)[1] == def_line
    assert kernel.arg_names == ["x_ptr", "y_ptr", "n", "SHIFT", "BLOCK"]
    # Triton's locations (what its errors and our TTIR carry) are the file's lines
    from pytest_rvtune.compiler.frontend import kernel_to_ttir

    ttir = kernel_to_ttir(kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"SHIFT": 1, "BLOCK": 16})
    assert f'"{rvv_path}":{line_of(RVV_MODULE, "# STORE LINE")}:' in ttir


def test_jit_kernel_errors(rvv) -> None:
    with pytest.raises(RvvModuleError, match=r"no kernel function nope_kernel; its kernels are shift_kernel, "):
        jit_kernel(rvv, "nope_kernel")
    with pytest.raises(RvvModuleError, match=r"rvv_scale_kernel is triton.jit\(scale_kernel\): .*use the kernel "
                                             r"scale_kernel"):
        jit_kernel(rvv, "rvv_scale_kernel")
    with pytest.raises(RvvModuleError, match=r"run_scale_kernel uses no triton.language .* host code"):
        jit_kernel(rvv, "run_scale_kernel")


def test_an_already_jitted_kernel_is_returned_as_it_is(tmp_path: Path) -> None:
    mod = load_rvv_module(write(tmp_path, "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                                          "def one_kernel(x_ptr):\n    tl.store(x_ptr, 1.0)\n", name="jitted"))
    assert kernel_names(mod) == ["one_kernel"] and jit_kernel(mod, "one_kernel") is mod.one_kernel


# ---- configs -------------------------------------------------------------------------------------
def test_getter_parameters_bind_by_name(rvv) -> None:
    assert getter_params(rvv, "get_pair_kernel_autotune_config") == ["N_CTX", "D_HEAD"]
    assert getter_params(rvv, "get_scale_kernel_autotune_config") == []
    configs = load_configs(rvv, "get_pair_kernel_autotune_config", {"D_HEAD": 16, "N_CTX": 64, "Z": 2})
    assert configs == [RvvConfig({"BLOCK": 8, "C_D_HEAD": 16, "COL_SIZE": 64}, 1),
                       RvvConfig({"BLOCK": 16, "C_D_HEAD": 16, "COL_SIZE": 64}, 1)]  # the getter's default
    threaded = load_configs(rvv, "get_pair_kernel_autotune_config", {"D_HEAD": 16, "N_CTX": 64}, num_threads=4)
    assert [c.num_threads for c in threaded] == [4, 4]
    assert threaded[0].id == "BLOCK=8-C_D_HEAD=16-COL_SIZE=64-num_threads=4"
    assert threaded[0].block_config() == {"BLOCK": 8, "C_D_HEAD": 16, "COL_SIZE": 64}
    assert threaded[0].block_config().num_threads == 4
    # a getter without num_threads is not given it, and its configs have none
    plain = load_configs(rvv, "get_scale_kernel_autotune_config", {}, num_threads=4)
    assert [(c.values, c.num_threads, c.id) for c in plain] == [({"BLOCK": 4}, None, "BLOCK=4"),
                                                                ({"BLOCK": 8}, None, "BLOCK=8")]
    with pytest.raises(TypeError, match="num_threads"):  # triton.Config is upstream's again after the call
        triton.Config({"BLOCK": 4}, num_threads=1)


def test_a_missing_getter_parameter_is_named(rvv_path: Path, rvv) -> None:
    with pytest.raises(RvvModuleError) as err:
        load_configs(rvv, "get_pair_kernel_autotune_config", {"D_HEAD": 16})
    line = line_of(RVV_MODULE, "def get_pair_kernel_autotune_config")
    assert str(err.value) == (
        f"{rvv_path}:{line}: get_pair_kernel_autotune_config() takes the parameter N_CTX, which is not given "
        "(given: D_HEAD): give N_CTX in the problem parameters (the case's dict), or a default in the getter")


def test_a_missing_getter_is_named_with_the_ones_there_are(rvv) -> None:
    with pytest.raises(RvvModuleError, match="no config getter get_x_kernel_autotune_config\\(\\); its getters "
                                             "are get_pair_kernel_autotune_config, get_scale_kernel_autotune_config"):
        getter_params(rvv, "get_x_kernel_autotune_config")


GETTER = '''
import triton
from triton import Config


def get_bad_kernel_autotune_config(N=4):
    return {body}
'''


def test_a_config_listed_twice_is_kept_once_and_named(tmp_path: Path) -> None:
    """Their flash-attention getter appends every config twice: one item each, the duplicates named."""
    body = ('[triton.Config({"BLOCK": b}, num_threads=2) for b in (4, 8) for _ in range(2)]'
            ' + [triton.Config({"BLOCK": 4}, num_threads=1)]')
    mod = load_rvv_module(write(tmp_path, GETTER.format(body=body), name="dup"))
    got = read_configs(mod, "get_bad_kernel_autotune_config", {})
    assert [(c.values, c.num_threads) for c in got.configs] == [({"BLOCK": 4}, 2), ({"BLOCK": 8}, 2),
                                                                 ({"BLOCK": 4}, 1)]
    assert got.duplicates == ["BLOCK=4-num_threads=2", "BLOCK=8-num_threads=2"]
    assert load_configs(mod, "get_bad_kernel_autotune_config", {}) == got.configs


@pytest.mark.parametrize(("body", "cause"), [
    ('[Config({"BLOCK": 4.5}, num_threads=2)]', "config 0 (BLOCK=4.5): BLOCK=4.5 must be an int or a bool"),
    ('[triton.Config({"BLOCK": 4}, num_threads="all")]', "num_threads='all' must be an int >= 0"),
    ('[{"BLOCK": 4}]', "config 0 is not a triton.Config with kwargs"),
    ("[]", "returned list []: it must return a non-empty list of triton.Config"),
    ("[N // 0]", "failed (line 7): ZeroDivisionError"),
])
def test_bad_configs_are_named(tmp_path: Path, body: str, cause: str) -> None:
    path = write(tmp_path, GETTER.format(body=body), name="bad")
    mod = load_rvv_module(path)
    with pytest.raises(RvvModuleError) as err:
        load_configs(mod, "get_bad_kernel_autotune_config", {})
    assert str(err.value).startswith(f"{path}:6: get_bad_kernel_autotune_config()")
    assert cause in str(err.value)
    assert mod.Config is triton.Config  # the module's `from triton import Config` is given back


def test_kernel_constexprs_can_be_used_as_configs(rvv) -> None:
    """The loaded pieces fit together: a kernel's constexprs are what its getter's configs set."""
    kernel = jit_kernel(rvv, "scale_kernel")
    (first, _) = load_configs(rvv, "get_scale_kernel_autotune_config", {})
    assert set(first.values) <= {p.name for p in kernel.params if p.is_constexpr}
    assert rvv.tl is tl
