"""The X60 cost table (pytest_rvtune/x60): the packaged data and its provenance, the lookup and its stand-in
rules, and the generator (scripts/x60_costs.py) on pages and a scheduling model we write in the sources' formats."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvtune.x60.costs import LMULS, SEWS, CostTable, load_costs
from pytest_rvtune.x60.isa import base_mnemonic, is_vector, scalar_sched_write, vector_class, vector_sched_write

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "scripts" / "x60_costs.py"


def _generator():
    spec = importlib.util.spec_from_file_location("x60_costs_generator", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _generator()


def v(mnemonic: str, sew: int, lmul: str, masked: bool = False):
    return load_costs().vector(mnemonic, sew=sew, lmul=lmul, masked=masked)


# --- the packaged table --------------------------------------------------------------------------------------


def test_table_loads_with_provenance():
    table = load_costs()
    assert load_costs() is table  # cached
    tp = table.provenance["throughput"]
    assert tp["source"] == "https://github.com/camel-cdr/rvv-bench-results"
    assert tp["page"] == "spacemit_x60/index.html"
    for key in ("repo_commit", "page_commit", "fp_rows_commit", "rvv_bench_commit"):
        assert re.fullmatch(r"[0-9a-f]{40}", tp[key]), key
    assert re.match(r"\d{4}-\d\d-\d\d", tp["page_date"])
    assert "tblMaa" in tp["table"] and "throughput" in tp["measured"]
    assert tp["rows"] > 500 and tp["cells"] > 10000
    lat = table.provenance["latency"]
    assert lat["file"] == "llvm/lib/Target/RISCV/RISCVSchedSpacemitX60.td"
    assert re.fullmatch(r"[0-9a-f]{40}", lat["commit"])


@pytest.mark.parametrize(("lmul", "cycles"), [("m1", 1), ("m2", 2), ("m4", 4), ("m8", 8)])
def test_vadd_scales_with_lmul(lmul, cycles):
    cost = v("vadd.vv", 32, lmul)
    assert cost.cycles == pytest.approx(cycles, abs=0.05)
    assert cost.stand_in is None
    assert v("vadd.vv", 32, lmul, masked=True).cycles == pytest.approx(2 * cycles, abs=0.05)  # masked ~2x


# The figures docs/../x60-measurements.md quotes from the page, as the lookup gives them (the page rounds to 0.01).
@pytest.mark.parametrize(
    ("mnemonic", "lmul", "cycles"),
    [("vle32.v", "m1", 2.45), ("vle32.v", "m2", 4.35), ("vle32.v", "m4", 8.60), ("vle32.v", "m8", 16.52),
     ("vse32.v", "m8", 19.70), ("vlse32.v", "m8", 64.04), ("vrgather.vv", "m8", 256.27),
     ("vfredusum.vs", "m8", 54.02), ("vfmacc.vf", "m8", 8.0),
     # vfdiv e32m8: the page has 305.99 (.vv) and 200.22 (.vf); the reference note's "216" matches no vfdiv cell
     ("vfdiv.vv", "m8", 305.99), ("vfdiv.vf", "m8", 200.22)],
)
def test_page_figures(mnemonic, lmul, cycles):
    cost = v(mnemonic, 32, lmul)
    assert cost.cycles == pytest.approx(cycles, abs=0.006)
    assert cost.stand_in is None


def test_every_cell_is_measured_and_every_blank_a_stand_in():
    """Walk the whole table: a cell the page has comes back as itself with no stand-in; a blank one comes back
    with a stand-in reason (never passed off as measured)."""
    table = load_costs()
    doc = json.loads((ROOT / "pytest_rvtune" / "x60" / "x60_costs.json").read_text())
    columns = doc["columns"]
    measured = blanks = 0
    for mnemonic in table.mnemonics():
        row = doc["vector"][mnemonic]
        for form in ("unmasked", "masked"):
            cells = row[form]
            if cells is None:
                continue
            for column, cell in zip(columns, cells, strict=True):
                sew_text, lmul = re.fullmatch(r"e(\d+)(\w+)", column).groups()
                cost = table.vector(mnemonic, sew=int(sew_text), lmul=lmul, masked=form == "masked")
                if cell is None:
                    blanks += 1
                    assert cost.stand_in, (mnemonic, column, form)
                    assert cost.cycles > 0
                else:
                    measured += 1
                    assert cost.stand_in is None, (mnemonic, column, form)
                    assert cost.cycles == cell
    assert measured > 10000 and blanks > 1000


def test_stand_ins_say_what_stood_in():
    spill = v("vl8re32.v", 32, "m1")  # the page has no whole-register rows: LLVM's measured occupancy stands in
    assert spill.cycles == 16 and "WriteVLD8R" in spill.stand_in
    store = v("vs8r.v", 16, "m2")
    assert store.cycles == 16 and "WriteVST8R" in store.stand_in
    blank = v("vfnmsac.vf", 32, "m8")  # blank on the page: its family at the same vtype, times the rows' ratio
    assert v("vfnmsac.vf", 32, "m4").cycles / v("vfmacc.vf", 32, "m4").cycles == 1.25
    assert blank.cycles == 1.25 * v("vfmacc.vf", 32, "m8").cycles and "vfmacc.vf x 1.25" in blank.stand_in
    emul = v("vle32.v", 8, "m1")  # EMUL m4: the page measured it at e32m4
    assert emul.cycles == v("vle32.v", 32, "m4").cycles and "e32m4" in emul.stand_in
    indexed = v("vluxei32.v", 32, "m4")  # no indexed rows on the page: LLVM's class (VLMAX/2 cycles)
    assert indexed.cycles == 16 and "WriteVLDUX32" in indexed.stand_in


def test_stand_ins_without_llvm_figures():
    """With no scheduling model in the data, spills cost as the unit-stride access of the same registers and an
    indexed load as the strided one (the page's own figures)."""
    doc = json.loads((ROOT / "pytest_rvtune" / "x60" / "x60_costs.json").read_text())
    del doc["llvm"]
    table = CostTable(doc)
    spill = table.vector("vl8re32.v", sew=32, lmul="m1", masked=False)
    assert spill.cycles == v("vle32.v", 32, "m8").cycles and "vle32.v e32m8" in spill.stand_in
    store = table.vector("vs8r.v", sew=16, lmul="m2", masked=False)
    assert store.cycles == v("vse8.v", 8, "m8").cycles and "vse8.v e8m8" in store.stand_in
    indexed = table.vector("vluxei32.v", sew=32, lmul="m4", masked=False)
    assert indexed.cycles == v("vlse32.v", 32, "m4").cycles and "load_indexed" in indexed.stand_in
    assert indexed.latency is None


def test_aliases_cost_as_the_instruction_they_stand_for():
    abs_ = v("vfabs.v", 32, "m8")  # llvm-objdump prints vfsgnjx.vv v, v, v as vfabs.v
    assert abs_ == v("vfsgnjx.vv", 32, "m8") and abs_.stand_in is None
    assert vector_class("vmclr.m") == "mask" and v("vnot.v", 16, "m2") == v("vxor.vi", 16, "m2")
    assert "WriteVLD8R" in v("vl8r.v", 32, "m1").stand_in  # vl8r.v is vl8re8.v


def test_unknown_mnemonics_get_a_class_stand_in():
    cost = v("vfnotreal.vv", 32, "m2")
    assert cost.stand_in and "farith" in cost.stand_in and cost.cycles == v("vfadd.vv", 32, "m2").cycles
    scalar = load_costs().scalar("frobnicate")
    assert scalar.stand_in and "frobnicate" in scalar.stand_in and scalar.cycles == load_costs().scalar("add").cycles


def test_scalar_and_config_costs():
    table = load_costs()
    add = table.scalar("add")
    assert 0.5 <= add.cycles <= 0.65 and add.latency == 1 and add.stand_in is None  # measured: 0.5-0.6
    assert table.scalar("c.addi") == table.scalar("addi") == add  # compressed as its base op
    assert table.scalar("mul").cycles == pytest.approx(3.5)  # measured on the page
    fma = table.scalar("fmadd.s")
    assert fma.latency == 5 and fma.cycles == 1  # LLVM: one FP unit, latency 5
    assert table.scalar("fdiv.s").cycles == 15 and table.scalar("div").cycles == 20
    assert table.scalar("lw").cycles == 0.5 and table.scalar("lw").latency == 4  # two load/store pipes
    for config in ("vsetvli", "vsetivli", "vsetvl"):
        cost = table.vector(config, sew=32, lmul="m8", masked=False)
        assert cost.cycles == 1 and cost.stand_in is None
    assert table.vector("add", sew=32, lmul="m1", masked=False) == add  # a scalar op asked as vector


def test_latencies_from_llvm():
    assert v("vadd.vv", 32, "m1").latency == 4 and v("vadd.vv", 32, "m8").latency == 16
    assert v("vdiv.vv", 32, "m8").latency == 192
    assert v("vfmacc.vf", 32, "m1").latency == 5 and v("vfmacc.vf", 64, "m1").latency == 6  # per SEW
    assert v("vfredusum.vs", 32, "m8").latency == 57
    assert v("vle32.v", 32, "m1").latency == 3 and v("vle32.v", 32, "m8").latency == 16
    assert v("vle32.v", 8, "m1").latency == 8  # EMUL m4: LLVM's classes are by the data's register group
    assert load_costs().scalar("fmadd.s").latency == 5


def test_every_page_mnemonic_has_an_llvm_class():
    """Our mnemonic -> scheduling-class mapping covers every instruction the page measures, and the packaged
    model section was read whole (a regenerated file whose .td the reader cannot follow fails here)."""
    doc = json.loads((ROOT / "pytest_rvtune" / "x60" / "x60_costs.json").read_text())
    writes = doc["llvm"]["sched_writes"]
    assert doc["llvm"]["unparsed"] == []
    missing = [m for m in load_costs().mnemonics() if vector_sched_write(m) not in writes]
    assert missing == []
    no_latency = [m for m in load_costs().mnemonics() if v(m, 32, "m1").latency is None]
    assert no_latency == ["vlm.v"]  # WriteVLDM: LLVM states an occupancy only


def test_bad_vtype_is_a_clear_error():
    with pytest.raises(ValueError, match=r"vadd\.vv.*SEW 12"):
        v("vadd.vv", 12, "m1")
    with pytest.raises(ValueError, match=r"LMUL 'm3'"):
        v("vadd.vv", 32, "m3")
    with pytest.raises(ValueError, match="vector instruction"):
        load_costs().scalar("vadd.vv")


@pytest.mark.parametrize(
    ("mnemonic", "cls"),
    [("vsetvli", "config"), ("vle32.v", "load_unit"), ("vle8ff.v", "load_unit"), ("vlse32.v", "load_strided"),
     ("vluxei32.v", "load_indexed"), ("vlseg2e32.v", "load_segment"), ("vl8re32.v", "load_whole"),
     ("vse32.v", "store_unit"), ("vsse64.v", "store_strided"), ("vsoxei8.v", "store_indexed"),
     ("vs8r.v", "store_whole"), ("vadd.vv", "arith"), ("vmerge.vvm", "arith"), ("vwmacc.vx", "mul"),
     ("vremu.vx", "div"), ("vfmacc.vf", "farith"), ("vmflt.vf", "farith"), ("vfsqrt.v", "fdiv"),
     ("vfredosum.vs", "reduction"), ("vwredsum.vs", "reduction"), ("vrgather.vv", "permute"),
     ("vslidedown.vi", "permute"), ("vmv8r.v", "permute"), ("vmand.mm", "mask"), ("vid.v", "mask"),
     ("vfmv.f.s", "scalar_move"), ("add", "scalar"), ("c.addi", "scalar")],
)
def test_vector_class(mnemonic, cls):
    assert vector_class(mnemonic) == cls


def test_isa_names():
    assert base_mnemonic("C.ADDI") == "addi" and base_mnemonic("c.bnez") == "bne"
    assert base_mnemonic("amoswap.w.aqrl") == "amoswap.w"
    assert base_mnemonic("vfabs.v") == "vfsgnjx.vv" and base_mnemonic("vl8r.v") == "vl8re8.v"
    assert is_vector("vle32.v") and not is_vector("fmadd.s")
    assert vector_sched_write("vfmacc.vf") == "WriteVFMulAddF"
    assert vector_sched_write("vfncvt.f.f.w") == "WriteVFNCvtFToFV"
    assert vector_sched_write("vl8re32.v") == "WriteVLD8R"
    assert scalar_sched_write("fcvt.s.w") == "WriteFCvtI32ToF32"
    assert scalar_sched_write("fmv.x.w") == "WriteFMovF32ToI32"


# --- the generator, on files we write in the sources' formats ------------------------------------------------

COLUMNS = [f"e{s}{lm}" for s in SEWS for lm in LMULS]


def _row(text: str, cells: dict[str, float]) -> str:
    tds = "".join(f"<td>{cells[c]:.2f}</td>" if c in cells else "<td></td>" for c in COLUMNS)
    return f"<tr><td>{text}</td>{tds}</tr>\n"


def _page(tables: dict[str, str], bench_commit: str = "ab" * 20) -> str:
    head = "<thead><tr><th>instruction</th>" + "".join(f"<th>{c}</th>" for c in COLUMNS) + "</tr></thead>"
    body = "".join(f'<table id="{ident}" class="tabPage">{head}<tbody>\n{rows}</tbody></table>\n'
                   for ident, rows in tables.items())
    return (f'<html><body><p>Based on <a href="https://github.com/camel-cdr/rvv-bench/commit/{bench_commit}">'
            f"this commit</a>.</p>{body}</body></html>")


NEW_PAGE = _page({
    "tblMaa": _row("add t0,t1,t2", {"e8m1": 0.62, "e16m1": 0.51, "e32m1": 0.62})
    + _row("vadd.vv v8,v16,v24", {"e32m1": 1.0, "e32m8": 8.0})
    + _row("vadd.vv v8,v16,v24,v0.t", {"e32m1": 2.0, "e32m8": 16.03})
    + _row("vlse32.v v8,(t2),t3", {"e32m8": 64.04})
    + _row("vlse32.v v8,(t2),x0", {"e32m8": 64.05})
    + _row("vfmacc.vf v8,ft0,v16", {})
    + _row("vfmacc.vf v8,ft0,v16,v0.t", {}),
    "tblMau": _row("vfmacc.vf v8,ft0,v16", {"e32m8": 8.5}),
})
OLD_PAGE = _page({"tblMaa": _row("vfmacc.vf v8,ft0,v16", {"e32m8": 8.0, "e32m4": 4.0})})

TD = """
// our own model in the format of LLVM's RISCVSched*.td files (old and new styles of helpers)
class Lat48<string mx> {
  int c = !cond(
    !eq(mx, "M4") : 8,
    !eq(mx, "M8") : 16,
    true: 4
  );
}
class PickLMUL<list<int> Values, string LMUL> {
  defvar Index = !cond(!eq(LMUL, "MF8"): 0, !eq(LMUL, "MF4"): 1, !eq(LMUL, "MF2"): 2, !eq(LMUL, "M1"): 3,
                       !eq(LMUL, "M2"): 4, !eq(LMUL, "M4"): 5, !eq(LMUL, "M8"): 6);
  int c = Values[Index];
}
class Lanes<string mx, int sew> {
  int val = !div(!mul(256, PickLMUL<[1, 1, 1, 1, 2, 4, 8], mx>.c), sew);
}
def Model : SchedMachineModel {
  let IssueWidth = 2;
  let LoadLatency = 3;
}
multiclass Resources<SchedMachineModel Model, int VSetCycles = 2> {
defvar Prefix = NAME;
let SchedModel = Model in {
let BufferSize = 0 in {
  def _ALU : ProcResource<1>;
  def _ALU2 : ProcResource<1>;
  def _IEU : ProcResGroup<[!cast<ProcResource>(Prefix # "_ALU"), !cast<ProcResource>(Prefix # "_ALU2")]>;
  def _V : ProcResource<1>;
}
defvar P_IEU = !cast<ProcResGroup>(Prefix # "_IEU");
defvar P_ALU = !cast<ProcResource>(Prefix # "_ALU");
defvar P_V = !cast<ProcResource>(Prefix # "_V");
def : WriteRes<WriteIALU, [P_IEU]>;
def : WriteRes<WriteIMul, [P_IEU]>  { let Latency = 6; }
let Latency = 20, ReleaseAtCycles = [20] in {
  def : WriteRes<WriteIDiv, [P_ALU]>;
}
let Latency = VSetCycles in {
  def : WriteRes<WriteVSETVLI, [P_ALU]>;
}
foreach mx = SchedMxList in {
  let Latency = Lat48<mx>.c, ReleaseAtCycles = [4] in {
    defm "" : LMULWriteResMX<"WriteVIALUV", [P_V], mx, IsWorstCase>;
  }
  defvar Twice = !cond(
    !eq(mx, "M8") : 2,
    true: 1
  );
  let Latency = !mul(Lat48<mx>.c, Twice) in {
    defm "" : LMULWriteResMX<"WriteVIDivV", [P_V], mx, IsWorstCase>;
  }
  let Latency = Unknown<"M2", mx>.c in {
    defm "" : LMULWriteResMX<"WriteVOdd", [P_V], mx, IsWorstCase>;
  }
  foreach eew = [8, 32] in {
    defvar StridedLat = Lanes<mx, eew>.val;
    let Latency = StridedLat, ReleaseAtCycles = [StridedLat] in {
      defm "" : LMULWriteResMX<"WriteVLDS" # eew, [P_V], mx, IsWorstCase>;
    }
  }
}
foreach mx = SchedMxListW in {
  foreach sew = SchedSEWSet<mx, isF=1>.val in {
    defvar FmaLat = !if(!eq(sew, 64), PickLMUL<[6, 6, 6, 6, 6, 7], mx>.c, PickLMUL<[5, 5, 5, 5, 5, 5], mx>.c);
    let Latency = FmaLat in {
      defm "" : LMULSEWWriteResMXSEW<"WriteVFWMulAddV", [P_V], mx, sew, IsWorstCase>;
    }
  }
}
foreach LMul = [1, 8] in {
  defvar WholeLat = !if(!eq(LMul, 1), 3, !mul(LMul, 2));
  let Latency = WholeLat, ReleaseAtCycles = [WholeLat] in {
    def : WriteRes<!cast<SchedWrite>("WriteVLD" # LMul # "R"), [P_V]>;
  }
}
}
}
def TheModel : SchedMachineModel;
defm P : Resources<TheModel>;
"""

PROVENANCE = {"throughput": {"page_commit": "1" * 40, "fp_rows_commit": "2" * 40}}


def test_generator_reads_the_page_format():
    doc = gen.build(NEW_PAGE, OLD_PAGE, None, json.loads(json.dumps(PROVENANCE)))
    col = doc["columns"].index
    vadd = doc["vector"]["vadd.vv"]
    assert vadd["unmasked"][col("e32m8")] == 8.0 and vadd["masked"][col("e32m8")] == 16.03
    assert vadd["unmasked"][col("e32m2")] is None and vadd["source"] == "tblMaa@1111111"
    # the blank FP row comes from the earlier page's tblMaa (before the newest page's tblMau)
    fma = doc["vector"]["vfmacc.vf"]
    assert fma["unmasked"][col("e32m8")] == 8.0 and fma["unmasked"][col("e32m4")] == 4.0
    assert fma["source"] == {"unmasked": "tblMaa@2222222", "masked": "tblMaa@1111111"}
    assert doc["vector"]["vlse32.v[stride=0]"]["unmasked"][col("e32m8")] == 64.05
    assert doc["scalar"]["add"]["cycles"] == 0.62 and doc["scalar"]["add"]["min"] == 0.51
    assert "add" not in doc["vector"]
    # without the earlier page, the newest page's mask-undisturbed tab fills the row
    doc = gen.build(NEW_PAGE, None, None, json.loads(json.dumps(PROVENANCE)))
    assert doc["vector"]["vfmacc.vf"]["unmasked"][col("e32m8")] == 8.5
    # and the lookup reads what the generator wrote
    doc["provenance"] = PROVENANCE
    table = CostTable(doc)
    assert table.vector("vadd.vv", sew=32, lmul="m8", masked=True).cycles == 16.03
    assert table.vector("vlse32.v", sew=32, lmul="m8", masked=False).cycles == 64.04


def test_generator_reads_the_sched_model_format():
    model = gen.parse_sched_model(TD)
    assert model.machine == {"IssueWidth": 2, "LoadLatency": 3}
    assert model.resources == {"ALU": 1, "ALU2": 1, "IEU": 2, "V": 1}
    w = model.writes
    assert w["WriteIALU"]["latency"] is None and w["WriteIALU"]["latency_default"]
    assert w["WriteIALU"]["resources"] == ["IEU"]
    assert w["WriteIMul"]["latency"] == 6 and w["WriteIDiv"]["occupancy"] == 20
    assert w["WriteVSETVLI"]["latency"] == 2  # the multiclass parameter's default
    assert w["WriteVIALUV"]["latency"] == {"MF8": 4, "MF4": 4, "MF2": 4, "M1": 4, "M2": 4, "M4": 8, "M8": 16}
    assert w["WriteVIALUV"]["occupancy"] == 4
    assert w["WriteVIDivV"]["latency"]["M8"] == 32 and w["WriteVIDivV"]["latency"]["M4"] == 8
    assert w["WriteVLDS8"]["latency"]["M1"] == 32 and w["WriteVLDS32"]["latency"]["M8"] == 64
    assert w["WriteVLDS32"]["occupancy"]["M2"] == 16
    fma = w["WriteVFWMulAddV"]["latency"]  # per LMUL and SEW where it differs; no M8 (the list stops at M4)
    assert fma["M1"] == {"16": 5, "32": 5, "64": 6} and fma["M4"]["64"] == 7 and "M8" not in fma  # no e8 FP
    assert fma["MF4"] == 5  # SEW <= 64 x LMUL: only e16 at mf4
    assert w["WriteVLD1R"]["latency"] == 3 and w["WriteVLD8R"]["occupancy"] == 16
    assert w["WriteVOdd"]["latency"] is None and any("WriteVOdd" in u for u in model.unparsed)


def test_generator_command_on_a_git_checkout(tmp_path):
    """The whole command: a repository holding two revisions of the page (as the real one does), the .td file,
    and the JSON it writes read back by the lookup."""
    repo = tmp_path / "results"
    (repo / "spacemit_x60").mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "spacemit_x60" / "index.html").write_text(OLD_PAGE)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "old"], check=True)
    old = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (repo / "spacemit_x60" / "index.html").write_text(NEW_PAGE)
    subprocess.run([*git, "commit", "-qam", "new"], check=True)
    td = tmp_path / "model.td"
    td.write_text(TD)
    out = tmp_path / "costs.json"
    assert gen.main(["--results", str(repo), "--fp-rev", old, "--td", str(td), "--td-commit", "c" * 40,
                     "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["provenance"]["throughput"]["fp_rows_commit"] == old
    assert doc["provenance"]["throughput"]["rvv_bench_commit"] == "ab" * 20
    table = CostTable(doc)
    assert table.vector("vfmacc.vf", sew=32, lmul="m8", masked=False).cycles == 8.0
    assert table.vector("vadd.vv", sew=32, lmul="m8", masked=False).latency == 16
    assert gen.main(["--results", str(tmp_path / "missing"), "--out", str(out)]) == 1
