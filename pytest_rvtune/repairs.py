"""Damaged cache entries that were found and replaced in this process, for the person running it to hear of.

The caches (compiler/cache.py's build entries, harness/data_image.py's images, targets/count_cache.py's records)
check what they hold before it is used; a bad entry is removed and made again, never served. Each such repair is
noted here once; the item pipeline moves the notes into the record of the item that met them (field
``cache_repairs``) and the session's summary lists them, so a disk fault or a hand edit in the cache is reported
and never blamed on a kernel. Nothing here knows pytest.
"""

from __future__ import annotations

#: Notes not yet handed to a record, in the order found.
_pending: list[str] = []
#: Every note of this process: each damaged entry is reported once.
_seen: set[str] = set()


def new_session() -> None:
    """Forget what was reported: a new session (in the same process) reports what it meets again."""
    _pending.clear()
    _seen.clear()


def note(message: str) -> None:
    """Report one repair (once per process, whatever the number of callers)."""
    if message not in _seen:
        _seen.add(message)
        _pending.append(message)


def drain() -> list[str]:
    """The repairs noted since the last call (the caller reports them)."""
    taken = list(_pending)
    _pending.clear()
    return taken
