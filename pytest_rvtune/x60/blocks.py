"""The QEMU plugin's ``blocks=`` file: which translated blocks ran inside the launch windows, how often, on which
guest thread (docs/contracts.md).

One line per block: ``<vaddr hex> <count> <insn hex>:<insn hex>... [h=<n0>,<n1>,...]``: the block's address, its
executions inside launches, its instructions' bytes (memory order), and, when a launch ran more than one thread,
the executions on each guest thread of the launches (they sum to ``count``). A line without ``h=`` is one hart's.
Nothing here knows pytest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class BlocksFileError(ValueError):
    """A blocks file that does not have the documented format; the message names file and line."""


@dataclass(frozen=True)
class ExecutedBlock:
    vaddr: int
    count: int
    insns: tuple[bytes, ...]
    # executions per guest thread of the launches: 0 = the thread that called the launcher, then the threads it
    # started, in creation order (the plugin's numbering, not QEMU's vCPU index); (count,) for one thread
    per_hart: tuple[int, ...]


def parse_blocks(text: str, source: str = "blocks file") -> list[ExecutedBlock]:
    blocks = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        where = f"{source}:{number}"
        if len(fields) not in (3, 4) or (len(fields) == 4 and not fields[3].startswith("h=")):
            raise BlocksFileError(f"{where}: expected '<vaddr> <count> <bytes> [h=<n>,...]', got {line!r}")
        try:
            vaddr, count = int(fields[0], 16), int(fields[1])
            insns = tuple(bytes.fromhex(h) for h in fields[2].split(":"))
            per_hart = tuple(int(n) for n in fields[3][2:].split(",")) if len(fields) == 4 else (count,)
        except ValueError as exc:
            raise BlocksFileError(f"{where}: {exc} in {line!r}") from None
        if sum(per_hart) != count:
            raise BlocksFileError(f"{where}: per-hart counts {fields[3]} do not sum to the block's count {count}")
        blocks.append(ExecutedBlock(vaddr, count, insns, per_hart))
    return blocks


def read_blocks(path: Path) -> list[ExecutedBlock]:
    """The blocks of ``path``; BlocksFileError names the file when it is missing or malformed."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise BlocksFileError(f"{path}: no blocks file (the QEMU plugin writes it at exit: was QEMU killed?)") from None
    return parse_blocks(text, str(path))
