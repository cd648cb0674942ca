"""The helper tools pytest-rvtune builds for its user, in the tools directory (paths.tools_dir()).

Today one tool: the QEMU instruction-count plugin, ``libicount.so``, built with the host C compiler from the
packaged ``targets/qemu_plugin/icount.c`` against ``qemu-plugin.h``. No Debian binary package ships that header,
so it is taken from Debian's qemu source package matching the installed qemu-user, through private apt
directories (deb-src twins of the system's Debian entries) that leave /etc/apt and the system's package lists
untouched; a header obtained another way can be given instead (``rvtune setup --qemu-plugin-header PATH``).

The plugin is rebuilt when what it is built from changes (the source, the header, the flags): a stamp beside it
holds their hash, so a new pytest-rvtune release or an edited icount.c is noticed whatever the file times say.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock

from pytest_rvtune import paths

#: How the plugin is compiled (part of its stamp: new flags rebuild it).
PLUGIN_CFLAGS = ("-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fPIC", "-shared")
#: The header's place in QEMU's source tree.
HEADER_IN_SOURCE = "include/qemu/qemu-plugin.h"
APT_TIMEOUT_S = 600


class SetupError(RuntimeError):
    """A tool that cannot be made here; the message says why and what to do."""


@dataclass(frozen=True)
class Step:
    """One thing `rvtune setup` would do, and why."""

    kind: Literal["copy_header", "fetch_header", "build_plugin"]
    what: str  # e.g. "build /home/u/.cache/pytest-rvtune/tools/libicount.so"
    why: str  # e.g. "missing", "icount.c or qemu-plugin.h changed"


def plugin_stamp_path() -> Path:
    return paths.icount_plugin().with_name(paths.icount_plugin().name + ".stamp")


def plugin_inputs_hash(header: Path) -> str:
    """What the built plugin depends on: its source, the header and the compile flags."""
    h = hashlib.sha256()
    for part in (paths.icount_source().read_bytes(), header.read_bytes(), " ".join(PLUGIN_CFLAGS).encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def plugin_state() -> str:
    """``"ok"``, ``"missing"`` or ``"stale"`` (built from another icount.c, header or flags)."""
    plugin, header, stamp = paths.icount_plugin(), paths.qemu_plugin_header(), plugin_stamp_path()
    if not plugin.is_file():
        return "missing"
    if not header.is_file() or not stamp.is_file() or stamp.read_text().strip() != plugin_inputs_hash(header):
        return "stale"
    return "ok"


def planned_steps(header_from: Path | None = None) -> list[Step]:
    """What `rvtune setup` would do now (nothing when everything is in place)."""
    steps: list[Step] = []
    header = paths.qemu_plugin_header()
    if header_from is not None:
        if not header.is_file() or header.read_bytes() != header_from.read_bytes():
            steps.append(Step("copy_header", f"copy {header_from} to {header}", "given with --qemu-plugin-header"))
    elif not header.is_file():
        steps.append(Step("fetch_header", f"fetch qemu-plugin.h (apt-get source qemu) into {header.parent}", "missing"))
    state = plugin_state()
    if steps or state != "ok":
        why = "missing" if state == "missing" else "icount.c, qemu-plugin.h or the flags changed"
        steps.append(Step("build_plugin", f"build {paths.icount_plugin()}", why))
    return steps


def setup(header_from: Path | None = None, say: Callable[[str], None] = print) -> list[Step]:
    """Make what is missing; returns the steps taken. One setup at a time per tools directory."""
    tools = paths.tools_dir()
    try:
        tools.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SetupError(f"cannot create the tools directory {tools}: {exc.strerror or exc}; set RVTUNE_TOOLS_DIR "
                         "to a writable directory") from None
    with FileLock(str(tools / "setup.lock")):
        steps = planned_steps(header_from)
        header = paths.qemu_plugin_header()
        new_header: bytes | None = None
        for step in steps:
            say(f"rvtune setup: {step.what} ({step.why})")
            if step.kind == "copy_header" and header_from is not None:
                new_header = header_from.read_bytes()
            elif step.kind == "fetch_header":
                new_header = fetch_qemu_plugin_header()
            elif step.kind == "build_plugin":
                # Built against the new header in a scratch directory: a header that does not compile leaves the
                # tools directory as it was (old header, old plugin, old stamp).
                with tempfile.TemporaryDirectory(dir=tools, prefix=".build-") as scratch:
                    candidate = Path(scratch) / header.name
                    candidate.write_bytes(new_header if new_header is not None else header.read_bytes())
                    build_icount_plugin(candidate, paths.icount_plugin())
        if new_header is not None:
            _install_file(header, new_header)
        return steps


def build_icount_plugin(header: Path, out: Path) -> None:
    """Compile the packaged icount.c against ``header`` into ``out`` (through a temporary: a failed build
    leaves the old plugin), then write the stamp."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise SetupError("no C compiler (gcc or cc) on PATH to build the QEMU plugin: install gcc "
                         "(`apt-get install gcc`)")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    cmd = [cc, *PLUGIN_CFLAGS, f"-I{header.parent}", "-o", str(tmp), str(paths.icount_source())]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SetupError(f"building the QEMU plugin failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
    os.replace(tmp, out)
    plugin_stamp_path().write_text(plugin_inputs_hash(header) + "\n")


def _install_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ---- qemu-plugin.h from Debian's qemu source package ---------------------------------------------------------
def fetch_qemu_plugin_header() -> bytes:
    """QEMU's plugin header from the source package of the installed qemu-user (else the release's current
    qemu source), downloaded with apt-get into a temporary directory that is removed afterwards."""
    apt_get = shutil.which("apt-get")
    if apt_get is None or shutil.which("dpkg-query") is None:
        raise SetupError(f"cannot fetch qemu-plugin.h: no apt-get here (not Debian/Ubuntu). Take "
                         f"{HEADER_IN_SOURCE} from the QEMU source of your qemu-riscv64's version and run "
                         "`rvtune setup --qemu-plugin-header PATH`")
    version = _installed_source_version("qemu-user")
    codename = _os_release().get("VERSION_CODENAME", "")
    if not codename:
        raise SetupError("cannot fetch qemu-plugin.h: /etc/os-release names no VERSION_CODENAME; run "
                         "`rvtune setup --qemu-plugin-header PATH` with the header of your QEMU's version")
    with tempfile.TemporaryDirectory(prefix="rvtune-qemu-src-") as tmp:
        work = Path(tmp)
        opts = _private_apt(work, codename)
        _apt(apt_get, opts, ["update"], work, "apt-get update (deb-src, private directories)")
        src = work / "src"
        exact = subprocess.run([apt_get, *opts, "source", "--download-only", f"qemu={version}"], cwd=src,
                               capture_output=True, text=True, check=False, timeout=APT_TIMEOUT_S)
        if exact.returncode != 0:  # the mirror no longer has that exact version: the release's current one
            _apt(apt_get, opts, ["source", "--download-only", "qemu"], src, f"apt-get source qemu ({codename})")
        return _header_from_tarball(src)


def _installed_source_version(package: str) -> str:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${source:Version}", package], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SetupError(f"{package} is not installed: install it first (`apt-get install {package}`), then rerun "
                         "`rvtune setup`")
    return proc.stdout.strip()


def _os_release() -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    return fields


def _private_apt(work: Path, codename: str) -> list[str]:
    """apt options for private state and cache directories whose sources are the deb-src twins of the system's
    Debian entries for ``codename``."""
    for sub in ("etc/sources.list.d", "lists/partial", "cache/archives/partial", "src"):
        (work / sub).mkdir(parents=True)
    lines = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]:
        if path.is_file():
            for line in path.read_text().splitlines():
                if line.startswith("deb ") and re.search(rf"\b{re.escape(codename)}\b", line):
                    lines.append("deb-src " + line[len("deb "):])
    (work / "etc/sources.list").write_text("".join(f"{line}\n" for line in lines))
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        stanzas = [s for s in re.split(r"\n\s*\n", path.read_text())
                   if re.search(rf"^Suites:.*\b{re.escape(codename)}\b", s, re.M)
                   and re.search(r"^Types:.*\bdeb\b", s, re.M)]
        text = "\n\n".join(re.sub(r"^Types:.*$", "Types: deb-src", s, flags=re.M) for s in stanzas)
        (work / "etc/sources.list.d" / path.name).write_text(text + "\n" if text else "")
    return ["-q", "-o", f"Dir::Etc::SourceList={work}/etc/sources.list",
            "-o", f"Dir::Etc::SourceParts={work}/etc/sources.list.d", "-o", f"Dir::State::Lists={work}/lists",
            "-o", f"Dir::Cache={work}/cache", "-o", "APT::Sandbox::User=root"]


def _apt(apt_get: str, opts: list[str], args: list[str], cwd: Path, what: str) -> None:
    try:
        proc = subprocess.run([apt_get, *opts, *args], cwd=cwd, capture_output=True, text=True, check=False,
                              timeout=APT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{what} took over {APT_TIMEOUT_S} s: is the Debian mirror reachable?") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise SetupError(f"{what} failed: {tail}; without a reachable deb-src for this release, run "
                         "`rvtune setup --qemu-plugin-header PATH` with the header of your QEMU's version")


def _header_from_tarball(src: Path) -> bytes:
    tarballs = sorted(src.glob("qemu_*.orig.tar.*"))
    if not tarballs:
        raise SetupError(f"apt-get source qemu left no qemu_*.orig.tar.* in {src}")
    with tarfile.open(tarballs[0]) as tar:
        for member in tar:
            if member.isfile() and member.name.endswith("/" + HEADER_IN_SOURCE):
                data = tar.extractfile(member)
                if data is not None:
                    return data.read()
    raise SetupError(f"{HEADER_IN_SOURCE} not found in {tarballs[0].name}")
