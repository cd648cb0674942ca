"""Which pointer arguments a kernel reads the initial data of (loads, atomics, descriptor loads), from its TTIR.

A buffer the kernel updates in place (RoPE's ``q``, a gradient written into its logits, ``x += 1``) needs its
input data before the launch and its expected data after: golden.py asks this module which buffers the kernel
reads before it writes them. A buffer whose first access in program order is a store (softmax writes exp(x - m)
to its output, then reads it back to scale it) holds only what the kernel wrote when it reads it: its initial
data does not matter. The answer comes from the kernel's own IR (every helper inlined), not from its Python
text, so pointer arithmetic, block pointers, tensor descriptors, loops and helpers are followed as Triton
compiled them.

Each SSA value carries the set of kernel pointer arguments it is derived from: an op's results take their
operands' sets; a loop body's iterator arguments take their initial values' and the yielded values' sets (to a
fixed point); a loaded value carries none (it is data, not an address). An op that reads memory marks the
arguments its address operand is derived from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_rvtune.compiler.ttir import Block, Op, parse_module

#: Ops that read the memory their first operand addresses (atomics read before they write).
_READ_OPS = ("tt.load", "tt.atomic_rmw", "tt.atomic_cas", "tt.atomic_poll", "tt.descriptor_load",
             "tt.descriptor_gather", "tt.descriptor_reduce", "tt.experimental_descriptor_load",
             "tt.experimental_descriptor_gather")
#: Ops whose results are data read from memory: they carry no pointer argument.
_DATA_OPS = frozenset(_READ_OPS) - {"tt.descriptor_reduce"}
_WRITE_OPS = ("tt.store", "tt.descriptor_store", "tt.descriptor_scatter", "tt.experimental_descriptor_store")
_LOOPS = ("scf.for",)  # operands: lower, upper, step, initial values; body args: induction variable, iterators
#: Ops whose regions run in order after what precedes them (loops: their writes count afterwards).
_SEQUENTIAL = ("scf.for", "scf.while")


def _blocks(op: Op) -> Iterable[Block]:
    for region in op.regions:
        yield from region.blocks


def _walk(ops: Iterable[Op]) -> Iterable[Op]:
    for op in ops:
        yield op
        for block in _blocks(op):
            yield from _walk(block.ops)


def read_before_written(ttir: str) -> set[str]:
    """Names of the kernel's pointer parameters (of its first ``tt.func``) whose first access in program order
    is a read: their initial data matters."""
    funcs = [op for op in parse_module(ttir) if op.name == "tt.func"]
    if not funcs or not funcs[0].regions:
        return set()
    entry = funcs[0].regions[0].blocks[0]
    params = {value: loc.name or value.lstrip("%") for value, ty, loc in entry.args if ty.is_ptr}
    origins: dict[str, frozenset[str]] = {value: frozenset({name}) for value, name in params.items()}
    ops = [op for func in funcs for block in _blocks(func) for op in _walk(block.ops)]  # every op, for origins
    changed = True
    while changed:  # loop-carried pointers: the body's arguments take what the body yields, until nothing grows
        changed = False
        for op in ops:
            changed |= _propagate(op, origins)
    read: set[str] = set()
    blocks = list(_blocks(funcs[0]))
    written = _scan(blocks[0].ops, set(), origins, read)
    for block in blocks[1:]:  # blocks an early return branches to: each after the entry block, not after each other
        _scan(block.ops, set(written), origins, read)
    return read


def _scan(ops: list[Op], written: set[str], origins: Mapping[str, frozenset[str]], read: set[str]) -> set[str]:
    """Walk ``ops`` in program order, adding to ``read`` what is read before it is written; the written set after.

    A store in a loop body counts as done after the loop (the program reads back what a loop wrote, softmax);
    a store in one branch of an ``scf.if`` (Liger's cross entropy zeroes an ignored row's logits, then returns)
    does not count after it: the other branch may read the initial data."""
    for op in ops:
        if op.name in _READ_OPS and op.operands:
            read |= origins.get(op.operands[0], frozenset()) - written
        elif op.name == "tt.call":  # a call not inlined: whatever it is handed may be read
            read |= _union(origins, op.operands) - written
        elif op.name in _WRITE_OPS and op.operands:
            written |= origins.get(op.operands[0], frozenset())
        if op.name in _SEQUENTIAL:
            for block in _blocks(op):
                written = _scan(block.ops, written, origins, read)
        else:
            for block in _blocks(op):
                _scan(block.ops, set(written), origins, read)
    return written


def _union(origins: Mapping[str, frozenset[str]], values: Iterable[str]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for v in values:
        out |= origins.get(v, frozenset())
    return out


def _grow(origins: dict[str, frozenset[str]], value: str, more: frozenset[str]) -> bool:
    old = origins.get(value, frozenset())
    if more <= old:
        return False
    origins[value] = old | more
    return True


def _propagate(op: Op, origins: dict[str, frozenset[str]]) -> bool:
    changed = False
    blocks = list(_blocks(op))
    if op.name in _LOOPS and blocks:  # iterator i and result i: initial value i and yielded value i
        body = blocks[0]
        inits = op.operands[3:]
        last = body.ops[-1] if body.ops else None
        yields = last.operands if last is not None and last.name == "scf.yield" else []
        for i, (value, _, _) in enumerate(body.args[1:]):
            more = _union(origins, inits[i:i + 1]) | _union(origins, yields[i:i + 1])
            changed |= _grow(origins, value, more)
            if i < len(op.results):
                changed |= _grow(origins, op.results[i], more)
        return changed
    every = _union(origins, op.operands)
    if op.name not in _DATA_OPS:  # results from every operand and from what the regions yield (scf.if)
        yielded = _union(origins, (v for b in blocks for o in b.ops[-1:] for v in o.operands))
        for r in op.results:
            changed |= _grow(origins, r, every | yielded)
    for block in blocks:  # scf.while, reductions' combiners: every argument from every operand
        for value, _, _ in block.args:
            changed |= _grow(origins, value, every)
    return changed
