"""Files on a board by content: ``<work_dir>/files/<sha256>/<name>``, uploaded once over SFTP.

A file is uploaded only when the board does not have that content yet (checked once per session with one
SFTP stat, then remembered), so a re-run of the same ELFs and golden data uploads nothing. Uploads go to a
temporary name and are renamed into place, so two workers uploading the same file never see half of it.
The name is kept (inside the hash directory) because it shows up in ``ps``, perf output and error messages.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

from pytest_rvtune.extras import missing_extra

try:
    import asyncssh
except ImportError as exc:  # the [boards] extra
    raise missing_extra("asyncssh", "boards", "RISC-V boards over SSH") from exc

from pytest_rvtune.hashing import sha256_file


class UploadError(RuntimeError):
    """An upload failed; the message names file, board path and (when it is the cause) the free space."""


class RemoteCache:
    """The content-addressed file store of one board (one SFTP session, reused for the whole session)."""

    def __init__(self, sftp: asyncssh.SFTPClient, root: str, board: str,
                 free_kib: Callable[[str], Awaitable[int | None]]) -> None:
        self.sftp = sftp
        self.root = root  # absolute path on the board
        self.board = board  # for messages: "user@host"
        self._free_kib = free_kib
        self._present: dict[tuple[str, str], str] = {}
        self.uploads = 0  # files actually sent (tests and the benchmark count these)
        self.bytes_uploaded = 0

    def remote_path(self, digest: str, name: str) -> str:
        return f"{self.root}/{digest}/{name}"

    async def ensure(self, local: Path) -> str:
        """The board's path of ``local``'s content, uploading it first if the board lacks it.

        Every file is stored executable: the same content may be prepared as data and later run as an ELF.
        """
        if not local.is_file():
            raise UploadError(f"{local}: no such file to upload to {self.board}")
        digest = sha256_file(local)
        key = (digest, local.name)
        if key in self._present:
            return self._present[key]
        remote = self.remote_path(digest, local.name)
        size = local.stat().st_size
        try:
            attrs = await self.sftp.stat(remote)
            have = attrs.size == size
        except asyncssh.SFTPNoSuchFile:
            have = False
        if not have:
            await self._upload(local, remote, size)
        self._present[key] = remote
        return remote

    async def _upload(self, local: Path, remote: str, size: int) -> None:
        directory = remote.rsplit("/", 1)[0]
        tmp = f"{directory}/.{secrets.token_hex(6)}.part"
        try:
            # One mkdir, not makedirs (which stats every parent): the root exists since connect.
            with contextlib.suppress(asyncssh.SFTPFailure):  # it exists: another worker or an old upload
                await self.sftp.mkdir(directory)
            await self.sftp.put(str(local), tmp)
            await self.sftp.chmod(tmp, 0o755)
            # posix-rename replaces a copy another worker finished first (same content, so either wins).
            await self.sftp.posix_rename(tmp, remote)
        except asyncssh.SFTPConnectionLost:
            raise  # not the board's disk: the caller reconnects and retries
        except (asyncssh.SFTPError, OSError) as exc:
            await self._forget(tmp)
            reason = getattr(exc, "reason", None) or str(exc)
            free = await self._free_kib(self.root)
            if free is not None and free * 1024 < size + 64 * 1024:
                raise UploadError(
                    f"uploading {local} ({size // 1024} KiB) to {self.board}:{remote} failed ({reason}): the "
                    f"board's disk is full ({free} KiB free under {self.root}); free space there or set "
                    "work_dir to a bigger file system"
                ) from exc
            raise UploadError(f"uploading {local} to {self.board}:{remote} failed: {reason}") from exc
        self.uploads += 1
        self.bytes_uploaded += size

    async def _forget(self, tmp: str) -> None:
        # Nothing was written, or the connection is gone: then there is nothing to clean.
        with contextlib.suppress(asyncssh.SFTPError, OSError):
            await self.sftp.remove(tmp)
