"""Where pytest-rvtune keeps things: a project's state under the project, the user's tools in the user's cache.

- A project's state (results files, build, golden-data and count caches) lives in ``<project root>/.rvtune``.
  The project root is pytest's rootdir while a pytest session runs (the plugin sets it at configure), else the
  nearest directory at or above the working directory holding a pytest or rvtune configuration file, else the
  working directory. ``RVTUNE_CACHE_DIR`` moves the caches elsewhere (e.g. one cache shared by checkouts).
- Built helper tools (the QEMU instruction-count plugin and the qemu-plugin.h it is built against) serve every
  project of the user: ``~/.cache/pytest-rvtune/tools`` (the platform's user cache directory), or
  ``RVTUNE_TOOLS_DIR``. ``rvtune setup`` builds them there.
- Files shipped inside the package (icount.c, runtime headers, harness sources) are found next to the code, so an
  installed wheel and a checkout behave the same.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from pytest_rvtune import PACKAGE_DIR

APP_NAME = "pytest-rvtune"
#: The per-project state directory's name, under the project root.
STATE_DIRNAME = ".rvtune"
#: Files that mark a project root when no pytest session says which it is (pytest's own rootdir markers, and
#: rvtune.toml, which a Triton_RVV project has).
ROOT_MARKERS = ("rvtune.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

_session_root: Path | None = None


def set_project_root(root: Path | None) -> Path | None:
    """Make ``root`` (pytest's rootdir) the project root of this process; returns the one it replaces, for the
    caller to restore (a pytest session run inside another, as pytester does, must not leave its root behind).
    A process-wide setting rather than an argument: the caches are reached from deep inside the build, golden
    and target code, which serves the CLI too and knows nothing of pytest."""
    global _session_root
    previous, _session_root = _session_root, (root.resolve() if root is not None else None)
    return previous


def project_root() -> Path:
    """The project whose state we read and write (see the module's docstring)."""
    if _session_root is not None:
        return _session_root
    cwd = Path.cwd().resolve()
    for directory in (cwd, *cwd.parents):
        if any((directory / marker).is_file() for marker in ROOT_MARKERS):
            return directory
    return cwd


#: Written into .rvtune/ (and a RVTUNE_CACHE_DIR) when it is made: git ignores everything in it (`git add -A` took
#: 217 files, 93 MB), and backup tools that honour the Cache Directory Tagging Specification
#: (https://bford.info/cachedir/: tar --exclude-caches, borg, restic) skip it.
GITIGNORE = "# Made by pytest-rvtune: its results and caches are not part of the project's sources.\n*\n"
CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by pytest-rvtune (results, build and data caches).\n"
                "# For information about cache directory tags see https://bford.info/cachedir/\n")
_marked: set[Path] = set()


def mark_state_dir(directory: Path) -> Path:
    """Make ``directory`` if needed, with a ``.gitignore`` of ``*`` and a ``CACHEDIR.TAG`` (either is written again
    if missing: a directory an older version made gets them too). Once per directory and process."""
    if directory in _marked:
        return directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHEDIR_TAG)):
            path = directory / name
            if not path.exists():
                path.write_text(text)
    except OSError:  # a read-only or unusable place: whoever writes there next says so, naming the file
        return directory
    _marked.add(directory)
    return directory


def state_dir(root: Path | None = None) -> Path:
    """``<project root>/.rvtune`` (not made here: reading a path must not make a directory)."""
    return (root or project_root()) / STATE_DIRNAME


def results_dir(root: Path | None = None) -> Path:
    """Where a session's results file goes unless --rvtune-results names another (not made here: a project that
    collects no kernel gets no .rvtune/; the results writer marks it when it writes the first record)."""
    return state_dir(root) / "results"


def cache_dir() -> Path:
    """Content-addressed build and data cache, shared across runs and xdist workers.

    Override with RVTUNE_CACHE_DIR (e.g. to share one cache between checkouts).
    """
    override = os.environ.get("RVTUNE_CACHE_DIR")
    # absolute: its paths are handed to QEMU and harnesses that run in other directories
    if override:
        return Path(override).absolute()
    return mark_state_dir(state_dir()) / "cache"


def tools_dir() -> Path:
    """Built helper tools (the QEMU instruction-count plugin), one set per user. Override with RVTUNE_TOOLS_DIR."""
    override = os.environ.get("RVTUNE_TOOLS_DIR")
    return Path(override).absolute() if override else platformdirs.user_cache_path(APP_NAME) / "tools"


#: The environment variables naming directories, and what each is for (in messages).
ENV_DIRS = {
    "RVTUNE_CACHE_DIR": "the build, data and count caches",
    "RVTUNE_TOOLS_DIR": "the built QEMU plugin (`rvtune setup`)",
    "RVTUNE_GOLDEN_DIR": "the committed golden data",
}


class EnvDirError(ValueError):
    """An environment variable naming a directory that cannot be one; the message names the variable."""


def settle_env_dirs() -> None:
    """Check the ENV_DIRS that are set, once at start-up, and make each absolute in the environment (child
    processes and xdist workers then see the same directory, whatever their working directory): a relative
    RVTUNE_CACHE_DIR made every item "crash" (QEMU's wrapper not found from the run directory). Raises
    EnvDirError naming the variable for a value that is a file, a symlink loop, or under a file."""
    for name, purpose in ENV_DIRS.items():
        value = os.environ.get(name)
        if not value:
            continue
        where = f"{name}={value} ({purpose})"
        try:
            path = Path(value).expanduser().resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: Python 3.11's "Symlink loop"
            raise EnvDirError(f"{where}: cannot be resolved ({exc}); point it at a directory") from None
        existing = next((p for p in (path, *path.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            what = "is a file" if existing == path else f"is under {existing}, which is a file"
            raise EnvDirError(f"{where}: {path} {what}, not a directory; point it at a directory (or unset it)")
        if name == "RVTUNE_CACHE_DIR":  # written by every item: say now, not once per item, when it cannot be
            try:
                path.mkdir(parents=True, exist_ok=True)
                if not os.access(path, os.W_OK | os.X_OK):
                    raise PermissionError("not writable")
                mark_state_dir(path)
            except OSError as exc:
                raise EnvDirError(f"{where}: cannot use {path} ({exc.strerror or exc}); point it at a "
                                  "writable directory (or unset it)") from None
        os.environ[name] = str(path)


def icount_plugin() -> Path:
    """The built QEMU instruction-count plugin (`rvtune setup` builds it)."""
    return tools_dir() / "libicount.so"


def qemu_plugin_header() -> Path:
    """QEMU's plugin API header, which no Debian binary package ships (`rvtune setup` fetches it)."""
    return tools_dir() / "include" / "qemu-plugin.h"


def icount_source() -> Path:
    """The plugin's C source, shipped inside the package."""
    return PACKAGE_DIR / "targets" / "qemu_plugin" / "icount.c"
