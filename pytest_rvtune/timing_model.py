"""A timing model for emulated runs: ``est_cycles`` = sum over basic blocks of (llvm-mca cycles per execution of
the block) x (executions of the block inside the launches, counted by the QEMU plugin's ``blocks=`` file).

The cycles per block come from llvm-mca with a core's scheduling model: the steady-state cycles of one
iteration of the block run back to back (``Total Cycles / Iterations``), which is what a loop body costs. The
SpacemiT X60 (the K1's core) has no scheduling model in LLVM 19 (``llvm-mca -mcpu=spacemit-x60``: "unable to
find instruction-level scheduling information"), so the RISC-V model falls back to the closest one LLVM 19 has:
the SiFive X280, an in-order dual-issue RVV core whose VLEN is twice its datapath width, as the X60's
(VLEN 256, DLEN 128). Which model was used is part of every estimate (:class:`CoreModel.name`) and of the
count-cache key. RVV costs depend on the vector type: a block that sets none inherits the SEW/LMUL of the nearest
executed block before it (by address) that does, passed to llvm-mca as its ``LLVM-MCA-RISCV-SEW/LMUL``
instruments; with none, e32/m1 is assumed.

Per-block estimates are cached by content (model, triple, CPU, the block's instructions and inherited vector
type) under ``<cache>/mca``: a block is analysed once, whatever ELF or config it appears in. A block llvm-mca
cannot analyse (an instruction without a scheduling class, a crash) costs one cycle per instruction and is
counted in :attr:`Estimate.fallback_blocks`. Nothing here knows pytest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvtune import paths
from pytest_rvtune.x60.blocks import ExecutedBlock, parse_blocks

#: Bump when the way an estimate is computed changes: cached per-block estimates of another version are unused.
TIMING_MODEL_VERSION = 1

LLVM_BIN = Path("/usr/lib/llvm-19/bin")

#: The cycle estimate's counter name, and the cache model's (written by the plugin, see CACHE_GEOMETRY).
EST_CYCLES = "est_cycles"
CACHE_COUNTERS = ("l1d_accesses", "l1d_misses", "l2_misses")

#: llvm-mca iterations per block: enough for a steady state, few enough to stay fast.
ITERATIONS = 100

#: Blocks per llvm-mca process (one process per region batch: spawning one per block would dominate).
BATCH = 400


@dataclass(frozen=True)
class CacheLevel:
    size: int
    ways: int
    line: int

    def plugin_arg(self) -> str:
        return f"{self.size}:{self.ways}:{self.line}"


#: SpacemiT K1 data caches, per core (the plugin's model is one cache: with launcher threads, all harts share it).
#: - L1D 32 KiB: "32K L1-Cache per core" (SpacemiT K1 datasheet, docs.banana-pi.org/en/BPI-F3/SpacemiT_K1_datasheet).
#: - L2 512 KiB per 4-core cluster: "512K L2-Cache" per cluster (same datasheet).
#: - line 64 B: the K1 device tree's `riscv,cbom-block-size = <64>` (Linux arch/riscv/boot/dts/spacemit/k1.dtsi).
#: - associativity: NOT FOUND in any reachable vendor document; 4-way L1D and 8-way L2 are assumptions (typical
#:   for 32 KiB / 512 KiB caches of in-order cores such as the XuanTie C908 the X60 resembles).
K1_L1D = CacheLevel(size=32 * 1024, ways=4, line=64)
K1_L2 = CacheLevel(size=512 * 1024, ways=8, line=64)


@dataclass(frozen=True)
class CoreModel:
    """An llvm-mca configuration: ``name`` says which core's scheduling model is really used."""

    name: str
    triple: str
    mcpu: str
    mattr: str
    disassemble_mattr: str
    rvv: bool

    def identity(self) -> dict[str, str]:
        return {"timing_model": str(TIMING_MODEL_VERSION), "mca_model": self.name, "mca": _mca_version(),
                "l1d": K1_L1D.plugin_arg(), "l2": K1_L2.plugin_arg()}


class TimingModelError(RuntimeError):
    """llvm-mca or llvm-mc missing or unusable; the message says what to install."""


def _tool(name: str) -> str:
    path = LLVM_BIN / name
    if not path.is_file():
        raise TimingModelError(f"{path} not found: the timing model needs LLVM 19's {name} (apt-get install llvm-19)")
    return str(path)


@functools.cache
def _mca_version() -> str:
    out = subprocess.run([_tool("llvm-mca"), "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"LLVM version (\S+)", out)
    return match.group(1) if match else "unknown"


@functools.cache
def _has_scheduling_model(triple: str, mcpu: str, mattr: str) -> bool:
    proc = subprocess.run([_tool("llvm-mca"), f"-mtriple={triple}", f"-mcpu={mcpu}", f"-mattr={mattr}"],
                          input="nop\n", capture_output=True, text=True, check=False, timeout=60)
    return proc.returncode == 0 and "Total Cycles" in proc.stdout


@functools.cache
def riscv_core_model() -> CoreModel:
    """The X60's scheduling model if this LLVM has one, else the SiFive X280's (see the module docstring)."""
    mattr = "+v,+zfh,+zvfh,+c,+zba,+zbb,+zbs"
    for mcpu, name in (("spacemit-x60", "spacemit-x60"), ("sifive-x280", "sifive-x280 (no spacemit-x60 model)")):
        if _has_scheduling_model("riscv64", mcpu, mattr):
            return CoreModel(name=name, triple="riscv64", mcpu=mcpu, mattr=mattr,
                             disassemble_mattr="+v,+c,+f,+d,+zfh,+zvfh,+zba,+zbb,+zbs,+zicond", rvv=True)
    raise TimingModelError("llvm-mca has neither a spacemit-x60 nor a sifive-x280 scheduling model")


@functools.cache
def host_core_model() -> CoreModel:
    """This x86-64 host's own core (clang's -march=native CPU name), for the ranking-fidelity benchmark."""
    proc = subprocess.run(["clang-19", "-march=native", "-E", "-x", "c", "/dev/null", "-###"],
                          capture_output=True, text=True, check=False)
    match = re.search(r'"-target-cpu" "([^"]+)"', proc.stderr)
    mcpu = match.group(1) if match else "x86-64-v3"
    if not _has_scheduling_model("x86_64", mcpu, ""):
        raise TimingModelError(f"llvm-mca has no scheduling model for the host CPU {mcpu}")
    return CoreModel(name=mcpu, triple="x86_64", mcpu=mcpu, mattr="", disassemble_mattr="", rvv=False)


# ------------------------------------------------------------------------------------------ the plugin's file
@dataclass
class Block:
    vaddr: int
    count: int
    insns: list[bytes]
    asm: list[str] = field(default_factory=list)
    #: ``count`` per guest thread of the launches (the plugin's ``h=``: 0 = the thread that called the launcher,
    #: then the threads started inside it, in creation order); sums to ``count``. A line without ``h=`` (the
    #: launches ran one thread) reads as ``[count]``.
    harts: list[int] = field(default_factory=list)


def read_blocks(path: Path) -> list[Block]:
    """The plugin's ``blocks=`` file (format and checks: x60.blocks.parse_blocks, its one reader), as llvm-mca
    blocks still to be disassembled."""
    return blocks_of(parse_blocks(path.read_text(), str(path)))


def blocks_of(executed: Sequence[ExecutedBlock]) -> list[Block]:
    """The blocks a caller read already (for the X60 model), as llvm-mca blocks still to be disassembled."""
    return [Block(vaddr=b.vaddr, count=b.count, insns=list(b.insns), harts=list(b.per_hart)) for b in executed]


# --------------------------------------------------------------------------------------------- disassembly
def _disassemble(model: CoreModel, blocks: Sequence[Block]) -> None:
    """Fill each block's ``asm`` (one line per instruction; an undecodable one becomes ``nop``) with one
    llvm-mc process: one input line per instruction, undecodable lines found by the line numbers it warns on."""
    lines = [" ".join(f"0x{b:02x}" for b in insn) for block in blocks for insn in block.insns]
    if not lines:
        return
    cmd = [_tool("llvm-mc"), "--disassemble", f"-triple={model.triple}"]
    if model.disassemble_mattr:
        cmd.append(f"-mattr={model.disassemble_mattr}")
    proc = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, check=False,
                          timeout=600)
    bad = {int(m.group(1)) for m in re.finditer(r"<stdin>:(\d+):\d+: warning: invalid instruction", proc.stderr)}
    decoded = [ln.strip() for ln in proc.stdout.splitlines()
               if ln.startswith("\t") and not ln.strip().startswith(".")]
    good = iter(decoded)
    number = 0
    for block in blocks:
        block.asm = []
        for _ in block.insns:
            number += 1
            block.asm.append("nop" if number in bad else next(good, "nop"))


# ------------------------------------------------------------------------------------------ the vector type
_VSET = re.compile(r"^vset(?:i)?vli\s+[^,]+,\s*[^,]+,\s*(e\d+),\s*(mf?\d)")


def _last_vtype(asm: Iterable[str]) -> tuple[str, str] | None:
    vtype = None
    for line in asm:
        match = _VSET.match(line)
        if match:
            vtype = (match.group(1), match.group(2))
    return vtype


def _is_vector(line: str) -> bool:
    return line.startswith("v") and not line.startswith("vset")


def _region_text(model: CoreModel, block: Block, inherited: tuple[str, str] | None) -> str:
    """The block as llvm-mca input: RVV instruments (SEW and LMUL together: LMUL alone crashes llvm-mca 19 on
    vector loads) when it uses vectors before setting a type of its own."""
    head: list[str] = []
    if model.rvv:
        first_vset = next((i for i, ln in enumerate(block.asm) if ln.startswith("vset")), len(block.asm))
        if any(_is_vector(ln) for ln in block.asm[:first_vset]):
            sew, lmul = inherited or ("e32", "m1")
            head = [f"# LLVM-MCA-RISCV-SEW {sew.upper()}", f"# LLVM-MCA-RISCV-LMUL {lmul.upper()}"]
    return "\n".join([*head, *block.asm])


# ------------------------------------------------------------------------------------------------- llvm-mca
def _cache_entry(key: str) -> Path:
    return paths.cache_dir() / "mca" / key[:2] / f"{key}.json"


def _key(model: CoreModel, text: str) -> str:
    blob = json.dumps([TIMING_MODEL_VERSION, _mca_version(), model.triple, model.mcpu, model.mattr, ITERATIONS,
                       text])
    return hashlib.sha256(blob.encode()).hexdigest()


def _load(key: str) -> float | None:
    try:
        return float(json.loads(_cache_entry(key).read_text())["cycles"])
    except (FileNotFoundError, ValueError, KeyError):
        return None


def _store(key: str, cycles: float, fallback: bool) -> None:
    entry = _cache_entry(key)
    entry.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump({"cycles": cycles, "fallback": fallback}, f)
    os.replace(tmp, entry)  # published whole: a reader never sees half a record


_REGION = re.compile(r"^\[(\d+)\] Code Region - r(\d+)", re.M)
_TOTAL = re.compile(r"^Total Cycles:\s+(\d+)", re.M)
_ITER = re.compile(r"^Iterations:\s+(\d+)", re.M)
_ERROR_LINE = re.compile(r"^<stdin>:(\d+):\d+: error", re.M)


def _run_mca(model: CoreModel, texts: Sequence[str]) -> list[float | None]:
    """Cycles per iteration of each text, from one llvm-mca process over code regions; None where llvm-mca
    could not analyse it (the offending region is dropped and the rest retried; a crash splits the batch)."""
    results: list[float | None] = [None] * len(texts)
    todo = list(range(len(texts)))
    while todo:
        source: list[str] = []
        starts: list[tuple[int, int]] = []  # (first line of region, text index)
        for i in todo:
            starts.append((len(source) + 1, i))
            source += [f"# LLVM-MCA-BEGIN r{i}", *texts[i].split("\n"), "# LLVM-MCA-END"]
        proc = subprocess.run([_tool("llvm-mca"), f"-mtriple={model.triple}", f"-mcpu={model.mcpu}",
                               *([f"-mattr={model.mattr}"] if model.mattr else []), f"-iterations={ITERATIONS}",
                               "-skip-unsupported-instructions=any"],
                              input="\n".join(source) + "\n", capture_output=True, text=True, check=False,
                              timeout=600)
        if proc.returncode == 0:
            for block_match in _REGION.finditer(proc.stdout):
                index = int(block_match.group(2))
                rest = proc.stdout[block_match.end():]
                total, iterations = _TOTAL.search(rest), _ITER.search(rest)
                if total and iterations and int(iterations.group(1)) > 0:
                    results[index] = int(total.group(1)) / int(iterations.group(1))
            return results
        error = _ERROR_LINE.search(proc.stderr)
        if error:  # drop the region holding the error line, retry the rest
            line = int(error.group(1))
            culprit = max((s for s in starts if s[0] <= line), default=starts[0])[1]
            todo.remove(culprit)
            continue
        if len(todo) == 1:
            return results
        half = len(todo) // 2  # a crash without a line: split until the culprit stands alone
        first = _run_mca(model, [texts[i] for i in todo[:half]])
        second = _run_mca(model, [texts[i] for i in todo[half:]])
        for i, value in zip(todo, [*first, *second], strict=True):
            results[i] = value
        return results
    return results


@dataclass
class Estimate:
    cycles: float
    blocks: int
    fallback_blocks: int
    model: str


def estimate(blocks: Sequence[Block], model: CoreModel) -> Estimate:
    """est_cycles of the executions in ``blocks`` (see the module docstring)."""
    _disassemble(model, blocks)
    texts: list[str] = []
    inherited: tuple[str, str] | None = None
    by_address = sorted(blocks, key=lambda b: b.vaddr)
    vtype_before: dict[int, tuple[str, str] | None] = {}
    for block in by_address:
        vtype_before[id(block)] = inherited
        inherited = _last_vtype(block.asm) or inherited
    texts = [_region_text(model, b, vtype_before[id(b)]) for b in blocks]
    keys = [_key(model, t) for t in texts]
    per_iteration: dict[str, float | None] = {k: _load(k) for k in set(keys)}
    missing = [k for k, v in per_iteration.items() if v is None]
    text_of = dict(zip(keys, texts, strict=True))
    fallback_keys: set[str] = set()
    for start in range(0, len(missing), BATCH):
        chunk = missing[start:start + BATCH]
        for key, cycles in zip(chunk, _run_mca(model, [text_of[k] for k in chunk]), strict=True):
            if cycles is None:
                fallback_keys.add(key)
                cycles = float(max(1, sum(1 for ln in text_of[key].splitlines() if not ln.startswith("#"))))
            per_iteration[key] = cycles
            _store(key, cycles, key in fallback_keys)
    total = sum(b.count * (per_iteration[k] or 0.0) for b, k in zip(blocks, keys, strict=True))
    return Estimate(cycles=total, blocks=len(blocks), fallback_blocks=len(fallback_keys), model=model.name)


def est_cycles_of(blocks: Path | Sequence[ExecutedBlock], model: CoreModel) -> dict[str, float]:
    """``{"est_cycles": n}`` for the plugin's blocks file, or its blocks when the caller read them already (whole
    launch windows; the caller divides by the launches), ``{}`` when the file is missing (QEMU killed before it
    exited)."""
    if isinstance(blocks, Path):
        if not blocks.is_file():
            return {}
        return {EST_CYCLES: estimate(read_blocks(blocks), model).cycles}
    return {EST_CYCLES: estimate(blocks_of(blocks), model).cycles}
