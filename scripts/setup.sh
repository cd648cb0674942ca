#!/usr/bin/env bash
# Install what pytest-rvtune needs on a Debian 12 machine, and nothing more. Idempotent: every step first
# checks whether its result is already there, so a second run does nothing and takes seconds.
#
#   scripts/setup.sh           install what is missing
#   scripts/setup.sh --check   only report what would be done (exit 0: nothing to do, 1: something missing)
#
# Steps: (1) Debian packages (checked with dpkg-query), (2) the .venv with torch (CPU wheel from disk, never
# the CUDA build) and the package editable with dev extras (stamp keyed on the hash of pyproject.toml),
# (3) the QEMU instruction-count plugin, built against qemu-plugin.h from Debian's qemu source package
# (rebuilt when its source is newer than the .so).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=${RVTUNE_TOOLS_DIR:-$ROOT/.rvtune/tools}
VENV=$ROOT/.venv
PYTHON=${PYTHON:-python3}
# Where the machine keeps the CPU build of torch (pip's find-links). Without it pip would resolve torch from
# the index, whose Linux build pulls several GB of nvidia-* packages.
TORCH_WHEEL_DIR=${TORCH_WHEEL_DIR:-/opt/wheels}
TORCH_VERSION=2.13.0
APT_PACKAGES=(clang-19 lld-19 llvm-19 g++-riscv64-linux-gnu qemu-user openssh-server iproute2 linux-perf
    gcc make xz-utils)

CHECK=0
case "${1:-}" in
    --check) CHECK=1 ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

TODO=0
say() { echo "setup: $*"; }
die() { echo "setup: ERROR: $*" >&2; exit 1; }
# In --check mode, note the step instead of doing it; returns 1 so callers skip the work.
plan() {
    TODO=1
    if [ "$CHECK" = 1 ]; then say "would $*"; return 1; fi
    say "$*"
}

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else die "need root to run: $* (run this script as root, or install sudo)"
    fi
}

# Teammates and xdist workers may start `make test` at once: one setup at a time.
mkdir -p "$ROOT/.rvtune"
exec 9>"$ROOT/.rvtune/setup.lock"
flock 9

# --- 1. Debian packages ----------------------------------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
        missing+=("$pkg")
    fi
done
# A Debian python3 needs python3-venv to create the venv (a pyenv/python.org Python has it built in).
if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ] && plan "install Debian packages: ${missing[*]}"; then
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -q
    as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- 2. Python virtual environment -----------------------------------------------------------------------
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$PYTHON is $("$PYTHON" --version 2>&1); pytest-rvtune needs Python >= 3.11 (set PYTHON=...)"
venv_key=$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)
venv_stamp=$VENV/.rvtune-setup-stamp
if [ ! -x "$VENV/bin/python" ] && plan "create $VENV"; then
    "$PYTHON" -m venv --clear "$VENV"  # --clear: a venv whose python is gone is broken anyway
fi
if [ "$(cat "$venv_stamp" 2>/dev/null)" != "$venv_key" ] \
    && plan "install torch==$TORCH_VERSION (CPU) and pytest-rvtune[dev] into $VENV"; then
    pip=("$VENV/bin/python" -m pip)
    find_links=()
    [ -d "$TORCH_WHEEL_DIR" ] && find_links=(--find-links "$TORCH_WHEEL_DIR")
    # torch first, from the on-disk CPU wheel only (--no-index): with torch==2.13.0 already satisfied, the
    # editable install below resolves torch's own dependencies from the index but never a CUDA torch.
    if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; \
sys.exit(m.version('torch').split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
        "${pip[@]}" install -q --no-index --no-deps "${find_links[@]}" "torch==$TORCH_VERSION" \
            || die "no CPU wheel of torch==$TORCH_VERSION found in $TORCH_WHEEL_DIR (set TORCH_WHEEL_DIR to the \
directory holding torch-$TORCH_VERSION+cpu-*.whl); refusing to let pip pull the CUDA build"
    fi
    "${pip[@]}" install -q "${find_links[@]}" -e "$ROOT[dev]"
    nvidia=$("${pip[@]}" list --format=freeze 2>/dev/null | grep -i '^nvidia' || true)
    if [ -n "$nvidia" ]; then
        die "pip installed CUDA packages into $VENV (a CUDA torch slipped in):
$nvidia
Remove the venv (rm -rf $VENV) and rerun make setup with the CPU torch wheel in $TORCH_WHEEL_DIR."
    fi
    echo "$venv_key" > "$venv_stamp"
fi

# --- 3. QEMU instruction-count plugin --------------------------------------------------------------------
header=$TOOLS/include/qemu-plugin.h
plugin_src=$ROOT/pytest_rvtune/targets/qemu_plugin/icount.c
plugin_so=$TOOLS/libicount.so

# qemu-plugin.h is not in any Debian binary package: take it from the qemu source package matching the
# installed qemu-user. Private apt dirs with deb-src twins of the system's Debian entries leave /etc/apt and
# the system's package lists untouched.
fetch_qemu_header() {
    local codename version
    work=$(mktemp -d)  # global: the EXIT trap removes it (23 MB of sources) however the script ends
    trap 'rm -rf "$work"' EXIT
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    mkdir -p "$work"/{etc/sources.list.d,lists/partial,cache/archives/partial,src}
    : > "$work/etc/sources.list"
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        # deb822 stanzas of this Debian release, turned into deb-src.
        awk -v RS= -v ORS='\n\n' -v c="$codename" \
            '$0 ~ ("Suites:[^\n]*" c) && /Types:[^\n]*deb/ { sub(/Types:[^\n]*/, "Types: deb-src"); print }' \
            "$f" > "$work/etc/sources.list.d/$(basename "$f")"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -e "$f" ] || continue
        sed -n "s/^deb \(.*\b$codename\b.*\)/deb-src \1/p" "$f" >> "$work/etc/sources.list"
    done
    local apt_opts=(-q -o "Dir::Etc::SourceList=$work/etc/sources.list"
        -o "Dir::Etc::SourceParts=$work/etc/sources.list.d" -o "Dir::State::Lists=$work/lists"
        -o "Dir::Cache=$work/cache" -o "APT::Sandbox::User=root")
    apt-get "${apt_opts[@]}" update >/dev/null || die "apt-get update (deb-src, private dirs) failed"
    version=$(dpkg-query -W -f='${source:Version}' qemu-user)
    # The exact source of the installed qemu-user if the mirror still has it, else the release's current one.
    (cd "$work/src" && { apt-get "${apt_opts[@]}" source --download-only "qemu=$version" >/dev/null 2>&1 \
        || apt-get "${apt_opts[@]}" source --download-only qemu >/dev/null; }) \
        || die "apt-get source qemu failed: no deb-src for $codename reachable"
    mkdir -p "$TOOLS/include"
    tar -xJOf "$work"/src/qemu_*.orig.tar.xz --wildcards '*/include/qemu/qemu-plugin.h' > "$header.tmp"
    [ -s "$header.tmp" ] || die "qemu-plugin.h not found in the qemu source package"
    mv "$header.tmp" "$header"
}

if [ ! -s "$header" ] && plan "fetch qemu-plugin.h (apt-get source qemu) into $TOOLS/include"; then
    fetch_qemu_header
fi
if { [ ! -f "$plugin_so" ] || [ "$plugin_src" -nt "$plugin_so" ] || [ "$header" -nt "$plugin_so" ]; } \
    && plan "build $plugin_so"; then
    gcc -O2 -Wall -Wextra -Wno-unused-parameter -fPIC -shared -I"$TOOLS/include" \
        -o "$plugin_so.tmp" "$plugin_src"
    mv "$plugin_so.tmp" "$plugin_so"
fi

if [ "$TODO" = 0 ]; then
    say "nothing to do: everything is installed"
elif [ "$CHECK" = 1 ]; then
    exit 1
else
    say "done"
fi
