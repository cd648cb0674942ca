"""Fixtures of the SSH target tests: real OpenSSH servers, the test ELF, and the board to test on.

With ``RVTUNE_TEST_BOARD=<name>`` the board-agnostic tests (fixture ``board``) use that target from
``rvtune.toml`` (or from the file in ``RVTUNE_TEST_CONFIG``) instead: a real board. The fault tests keep
using fixture servers, since they stop, break and misconfigure them. Helpers and the server class live in
sshd_helpers.py.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sshd_helpers import HERE, REPO, Keys, NetnsHost, Sshd, _keygen, board_config, netns_link

from pytest_rvtune.targets.config import TargetConfig, load_targets
from pytest_rvtune.toolchain import RISCV_ISA, Toolchain


@pytest.fixture(scope="session")
def ssh_keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    d = tmp_path_factory.mktemp("sshkeys")
    host_pub = _keygen(d / "host_key")
    client_pub = _keygen(d / "client_key")
    _keygen(d / "other_key")
    other_host_pub = _keygen(d / "other_host_key")
    (d / "authorized_keys").write_text(client_pub + "\n")
    return Keys(d, d / "host_key", host_pub, d / "client_key", d / "other_key", other_host_pub)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory, ssh_keys: Keys) -> Iterator[Sshd]:
    """The shared loopback board server (tests that break a server start their own)."""
    server = Sshd(tmp_path_factory.mktemp("sshd"), ssh_keys, also=("127.0.0.2",)).start()
    yield server
    server.stop()


@pytest.fixture
def own_sshd(tmp_path: Path, ssh_keys: Keys) -> Iterator[Sshd]:
    """A loopback server of this test's own, free to be stopped or have its sessions killed."""
    server = Sshd(tmp_path / "sshd", ssh_keys).start()
    yield server
    server.stop()


@pytest.fixture
def board(sshd: Sshd, tmp_path: Path) -> TargetConfig:
    """The board the behaviour tests run on: RVTUNE_TEST_BOARD from rvtune.toml, else the fixture server."""
    name = os.environ.get("RVTUNE_TEST_BOARD")
    if name:
        config = os.environ.get("RVTUNE_TEST_CONFIG")  # else rvtune.toml / pyproject.toml of the repo
        targets = load_targets(REPO, Path(config) if config else None)
        if name not in targets or targets[name].kind != "ssh":
            pytest.fail(f"RVTUNE_TEST_BOARD={name}: no such SSH target in {config or 'rvtune.toml/pyproject.toml'}")
        cfg = targets[name]
        return replace(cfg, work_dir=f"{cfg.work_dir}/test-{secrets.token_hex(4)}")
    return board_config(sshd, tmp_path)


@pytest.fixture(scope="session")
def rvtest_elf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test program, cross-built for rv64gcv with the project's toolchain."""
    tc = Toolchain.for_isa(RISCV_ISA)
    d = tmp_path_factory.mktemp("rvtest")
    tc.compile(HERE / "rvtest.c", d / "rvtest.o")
    tc.link([d / "rvtest.o"], d / "rvtest.elf")
    return d / "rvtest.elf"


@pytest.fixture
def netns_host() -> Iterator[NetnsHost]:
    """A namespace with a veth link to us (10.213.x.0/30); skipped, naming why, where netns is not allowed."""
    with netns_link() as host:
        yield host
