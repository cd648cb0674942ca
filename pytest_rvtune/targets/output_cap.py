"""A bounded capture of one output stream of a run: its first HEAD_BYTES and its last TAIL_BYTES.

An ELF (or a board's exec_prefix wrapper) that prints 60 MB took the session to over 1 GB of memory when its
whole output was kept. What matters in it is small and comes at the end (the harness's result lines, a crash's
last words) or at the start (the first error); the middle is dropped, and the kept text says so twice: where
the gap is, and in its last line, which is what a verdict's output tail shows.

``keep_after``: a marker from which on everything is kept whole (a board appends perf's CSV to the run's
stderr after a marker line: a flood from the ELF must not cut the counters off).
"""

from __future__ import annotations

#: Bytes kept from the start of a stream, and from its end.
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 1024 * 1024


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


class CappedOutput:
    """Feed chunks with ``add``; ``text()`` is the kept output, decoded (undecodable bytes replaced)."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES, keep_after: bytes | None = None) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.total = 0  # bytes seen
        self._head = bytearray()
        self._tail = bytearray()  # may grow to twice the limit between trims (one copy per ~limit bytes)
        self._trimmed = 0  # bytes dropped from the tail's front so far
        self._marker = keep_after
        self._pending = b""  # bytes held back while they could be the start of the marker
        self._rest: bytearray | None = None  # from the marker on: kept whole

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self._rest is not None:
            self._rest += chunk
            return
        if not self._marker:
            self._keep(chunk)
            return
        data = self._pending + chunk
        at = data.find(self._marker)
        if at >= 0:
            self._keep(data[:at])
            self._pending, self._rest = b"", bytearray(data[at:])
            return
        hold = min(len(data), len(self._marker) - 1)
        self._keep(data[: len(data) - hold])
        self._pending = data[len(data) - hold:]

    def _keep(self, chunk: bytes) -> None:
        room = self.head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        if len(self._tail) > 2 * self.tail_limit:
            excess = len(self._tail) - self.tail_limit
            del self._tail[:excess]
            self._trimmed += excess

    @property
    def dropped(self) -> int:
        """Bytes not kept (so far)."""
        return self._trimmed + max(0, len(self._tail) - self.tail_limit)

    def text(self) -> str:
        head, tail = bytes(self._head), bytes(self._tail[-self.tail_limit:]) + self._pending
        dropped = self.dropped
        if dropped:
            # Whole lines on both sides of the gap: a line cut in two would read as two odd lines.
            cut = head.rfind(b"\n") + 1
            dropped += len(head) - cut
            head = head[:cut]
            start = tail.find(b"\n") + 1
            dropped += start
            tail = tail[start:]
        kept = _decode(head)
        if dropped:
            note = (f"[rvtune: {_size(dropped)} of this output ({_size(self.total)} in all) not kept: only its "
                    f"first {_size(self.head_limit)} and last {_size(self.tail_limit)} are]")
            kept += note.replace("not kept:", "dropped here:") + "\n"
        kept += _decode(tail)
        if dropped:
            kept += ("" if kept.endswith("\n") else "\n") + note + "\n"
        return kept + (_decode(bytes(self._rest)) if self._rest is not None else "")


def _decode(data: bytes) -> str:
    """As a text-mode pipe reads it: UTF-8 with replacement, universal newlines."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
