#!/usr/bin/env bash
# Install what pytest-rvtune needs on a Debian 12 machine, and nothing more. Idempotent: every step first
# checks whether its result is already there, so a second run does nothing and takes seconds.
#
#   scripts/setup.sh           install what is missing
#   scripts/setup.sh --check   only report what would be done (exit 0: nothing to do, 1: something missing)
#
# Steps: (1) Debian packages (checked with dpkg-query), (2) the .venv with torch (CPU wheel from disk, never
# the CUDA build) and the package editable with dev extras (stamp keyed on the hash of pyproject.toml),
# (3) the QEMU instruction-count plugin, by `rvtune setup` (built against qemu-plugin.h from Debian's qemu
# source package; rebuilt when icount.c, the header or the flags change).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=${RVTUNE_TOOLS_DIR:-$ROOT/.rvtune/tools}
VENV=$ROOT/.venv
PYTHON=${PYTHON:-python3}
# Where the machine keeps the CPU build of torch (pip's find-links). Without it pip would resolve torch from
# the index, whose Linux build pulls several GB of nvidia-* packages.
TORCH_WHEEL_DIR=${TORCH_WHEEL_DIR:-/opt/wheels}
TORCH_VERSION=2.13.0
APT_PACKAGES=(clang-19 lld-19 llvm-19 g++-riscv64-linux-gnu qemu-user openssh-server iproute2 linux-perf chromium
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
# `rvtune setup` (the package's own command, which pip users run too) fetches qemu-plugin.h and builds the
# plugin from the packaged icount.c into $TOOLS when either is missing or out of date.
export RVTUNE_TOOLS_DIR=$TOOLS
if [ -x "$VENV/bin/rvtune" ]; then
    if ! plugin_plan=$("$VENV/bin/rvtune" setup --check); then
        TODO=1
        if [ "$CHECK" = 1 ]; then
            echo "${plugin_plan//rvtune setup: would/setup: would}"
        else
            "$VENV/bin/rvtune" setup || die "rvtune setup failed (see above)"
        fi
    fi
else  # only in --check mode: otherwise step 2 has made the venv
    plan "build the QEMU plugin into $TOOLS (rvtune setup)" || true
fi

if [ "$TODO" = 0 ]; then
    say "nothing to do: everything is installed"
elif [ "$CHECK" = 1 ]; then
    exit 1
else
    say "done"
fi
