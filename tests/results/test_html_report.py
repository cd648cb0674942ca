"""``rvtune report --html``: the page of a real run, rendered by headless Chromium (Debian package ``chromium``).

The run is a real session (matmul, four block configs, QEMU with the icount plugin). The base run is that run
with one item's instruction count lowered by 20 % and another item marked wrong, so the page must show one
regression and one fix. Chromium loads the file offline, runs its script and gives back the DOM (``--dump-dom``)
and a screenshot; the tests read both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from results_data import clean_env

from pytest_rvtune.cli import main
from pytest_rvtune.results.html import render_html
from pytest_rvtune.results.runs import load_run
from pytest_rvtune.results.svg import BEST_STROKE, SCALE, colour_scale

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = "BLOCK_SIZE_M=4,16;BLOCK_SIZE_N=8,32;BLOCK_SIZE_K=8"  # 4-8-8: the first config, the untuned default
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("html")
    run = folder / "run.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "kernels/matmul.py", "--rvtune-case", "small",
                           "--rvtune-config", CONFIGS, "--rvtune-target", "qemu", "-q", "-p", "no:cacheprovider",
                           f"--rvtune-results={run}"], cwd=ROOT, capture_output=True, text=True, env=clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the session's ranking and pytest-benchmark's table fit 120 columns: the 60-column config ids abbreviated
    lines = done.stdout.splitlines()
    shown = lines[next(i for i, line in enumerate(lines) if line.startswith("rvtune ranking")):
                  next(i for i, line in enumerate(lines) if line.startswith("Legend:"))]
    assert max(map(len, shown)) <= 120, "\n".join(line for line in shown if len(line) > 120)
    assert any(line.startswith("matmul[small-BSM=16-BSN=32-BSK=8-GSM=8]") for line in shown), "\n".join(shown)
    records = [json.loads(line) for line in run.read_text().splitlines()]
    assert len(records) == 4
    by_insns = sorted(records, key=lambda r: r["counters"]["x60_cycles"])
    regressed, fixed = by_insns[0]["config_id"], by_insns[-1]["config_id"]
    base = []
    for record in records:
        record = json.loads(json.dumps(record))
        if record["config_id"] == regressed:  # the base needed fewer cycles: this run regressed
            record["counters"]["x60_cycles"] = record["counters"]["x60_cycles"] * 0.8
        if record["config_id"] == fixed:
            record["outcome"], record["message"] = "wrong", "max_abs=1.5 at index 3"
        base.append(json.dumps(record))
    (folder / "base.jsonl").write_text("\n".join(base) + "\n")
    page = folder / "page.html"
    assert main(["report", str(run), "--html", str(page), "--base", str(folder / "base.jsonl"), "--no-plots",
                 "--out", str(folder / "out")]) == 0
    return {"run": run, "page": page, "regressed": regressed, "fixed": fixed, "folder": folder, "records": records}


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    assert binary, "Debian package chromium is not installed: run scripts/setup.sh"
    profile = cwd / f"profile-{len(list(cwd.glob('profile-*')))}"
    done = subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=180, env={**os.environ, "HOME": str(cwd)})
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@dataclass
class Chart:
    css: str
    label: str
    titles: list[str] = field(default_factory=list)  # the hover texts of its cells, points and marks
    texts: list[str] = field(default_factory=list)  # what it writes ("scale:" before a text of class scale)


class Dom(HTMLParser):
    """Tables (id -> rows of (tr attributes, [(td attributes, text)])), SVG shapes and the body's attributes."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: dict[str, list[tuple[dict[str, str], list[tuple[dict[str, str], str]]]]] = {}
        self.heads: dict[str, list[dict[str, str]]] = {}
        self.svgs: list[dict[str, int]] = []
        self.charts: list[Chart] = []  # each svg's class, label, hover titles and texts
        self.links: dict[str, list[str]] = {}  # a ranking row's data-config -> the hrefs of its cells
        self.body: dict[str, str] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._text: list[str] | None = None  # inside an svg's <title> or <text>
        self._config = ""
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.body = a
        elif tag == "table":
            self._table = a.get("id", "")
            self.tables[self._table], self.heads[self._table] = [], []
            self.heads[self._table].append(a)
        elif tag == "th" and self._table is not None:
            self.heads[self._table].append(a)
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append((a, []))
            self._config = a.get("data-config", "")
        elif tag == "a" and self._cell is not None and self._config:
            self.links.setdefault(self._config, []).append(a.get("href", ""))
        elif tag == "td" and self._table is not None and self.tables[self._table]:
            self._cell = []
            self.tables[self._table][-1][1].append((a, ""))
        elif tag == "svg":
            self.svgs.append({})
            self.charts.append(Chart(a.get("class", ""), a.get("aria-label", "")))
        elif self.svgs:
            self.svgs[-1][tag] = self.svgs[-1].get(tag, 0) + 1
            if tag in ("title", "text"):
                self._text = []
            if tag == "text" and a.get("class"):
                self.charts[-1].texts.append(f"{a['class']}:")

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._table is not None:
            row = self.tables[self._table][-1][1]
            row[-1] = (row[-1][0], "".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag in ("title", "text") and self._text is not None and self.charts:
            chart = self.charts[-1]
            (chart.titles if tag == "title" else chart.texts).append("".join(self._text))
            self._text = None

    def column(self, table: str, key: str) -> list[tuple[dict[str, str], str]]:
        keys = [h.get("data-key") for h in self.heads[table][1:]]
        index = keys.index(key)
        return [cells[index] for attrs, cells in self.tables[table] if cells]


def dump_dom(page: Path, fragment: str = "") -> Dom:
    done = chromium("--dump-dom", page.as_uri() + fragment, cwd=page.parent)
    return Dom(done.stdout)


def test_page_renders_rankings_heatmap_scatter_and_comparison(pages) -> None:
    dom = dump_dom(pages["page"])
    assert dom.body.get("data-ready") == "1"  # the page's script ran to its end
    ranking = dom.tables["rank-g1"]
    assert len(ranking) == 1 + 4  # header + one row per valid config
    cycles = [float(cell[0]["data-v"]) for cell in dom.column("rank-g1", "counter:x60_cycles")]
    assert cycles == sorted(cycles)  # ranked by the QEMU metric (the X60 model), best first
    assert ranking[1][0].get("class") == "winner"
    heatmap = next(svg for svg in dom.svgs if svg.get("rect", 0) >= 4)
    assert heatmap["rect"] >= 4 + 1 and heatmap["text"] >= 4  # 2x2 cells, the winner's outline, cell labels
    scatter = [svg for svg in dom.svgs if svg.get("circle", 0) + svg.get("path", 0) == 4]
    assert scatter, dom.svgs  # one point per valid config (three circles and the winner's diamond)
    compared = {attrs["data-config"]: (attrs["data-verdict"], cells) for attrs, cells in dom.tables["compare"]
                if cells}
    assert compared[pages["regressed"]][0] == "regressed" and compared[pages["fixed"]][0] == "fixed"
    assert [verdict for verdict, _ in compared.values()].count("unchanged") == 2
    assert compared[pages["regressed"]][1][8][1] == "+25.0%"  # 0.8x in the base: +25 % now


def test_a_url_fragment_sorts_a_table_as_a_header_click_does(pages) -> None:
    dom = dump_dom(pages["page"], "#sort=rank-g1:median:desc")
    assert dom.heads["rank-g1"][0].get("data-sorted-by") == "median:desc"
    medians = [float(cell[0]["data-v"]) for cell in dom.column("rank-g1", "median")]
    assert medians == sorted(medians, reverse=True) and len(medians) == 4
    sorted_by = [h for h in dom.heads["rank-g1"][1:] if h.get("aria-sort")]
    assert [(h["data-key"], h["aria-sort"]) for h in sorted_by] == [("median", "descending")]


def test_screenshot_shows_the_page_and_its_charts(pages) -> None:
    shot = pages["folder"] / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1400,2400", pages["page"].as_uri(), cwd=pages["folder"])
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int32)
    assert pixels.shape[:2] == (2400, 1400)
    assert pixels.std() > 30  # not blank: a dark header, white cards, coloured cells
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 500  # text, anti-aliasing and colour scales

    def near(colour: str) -> int:
        rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
        return int((np.abs(pixels - rgb).sum(axis=2) <= 12).sum())

    assert near(SCALE[-1]) > 200  # the worst heatmap cell, painted
    assert near(SCALE[0]) > 200  # the best one
    assert near(BEST_STROKE) > 50  # the winner's outline


def test_strings_from_a_run_are_escaped(pages, tmp_path: Path) -> None:
    hostile = "<img src=x onerror=alert(1)>"
    lines = [json.loads(line) for line in pages["run"].read_text().splitlines()]
    for record in lines:
        record["kernel"], record["case"], record["message"] = f"mm{hostile}", f"small{hostile}", hostile
    lines[0]["outcome"] = "wrong"
    run = tmp_path / "hostile.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in lines))
    page = render_html(load_run(run))
    assert hostile not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


#: matmul's first config: its untuned default (the module names no DEFAULT_CONFIG), one of CONFIGS.
FIRST = "BLOCK_SIZE_M=4-BLOCK_SIZE_N=8-BLOCK_SIZE_K=8-GROUP_SIZE_M=8"


def test_parameter_charts_colour_scale_default_rates_roofline_and_code_links(pages) -> None:
    dom = dump_dom(pages["page"])
    records = pages["records"]
    cycles = {r["config_id"]: r["counters"]["x60_cycles"] for r in records}
    winner = min(cycles, key=cycles.__getitem__)
    # one chart per parameter that varies: the best (and median) x60_cycles over the configs at each value
    for param in ("BLOCK_SIZE_M", "BLOCK_SIZE_N"):
        chart = next(c for c in dom.charts if c.label == f"x60_cycles against {param}")
        for value in {r["config"][param] for r in records}:
            mine = sorted(r["counters"]["x60_cycles"] for r in records if r["config"][param] == value)
            tip = next(t for t in chart.titles if t.startswith(f"{param}={value}:"))
            assert f"best {mine[0]:,.0f}" in tip and tip.endswith(f"over {len(mine)} configs"), tip
    assert not [c for c in dom.charts if c.label.endswith("against BLOCK_SIZE_K")]  # one value: nothing to chart
    # the heatmap's legend says which colour scale it uses: the one colour_scale picks for these cycles
    heat = next(c for c in dom.charts if "heatmap" in c.css)
    assert heat.texts[heat.texts.index("scale:") + 1] == colour_scale(list(cycles.values())).title
    # the untuned default (the first config) marked in the table and the heatmap, the best's speed-up over it
    (default_row,) = [(attrs, cells) for attrs, cells in dom.tables["rank-g1"] if "default" in attrs.get("class", "")]
    assert default_row[0]["data-config"] == FIRST and default_row[1][0][1].endswith("(default)")
    assert "the untuned default config" in heat.titles
    best_vs_default = float(dom.column("rank-g1", "vs_default")[0][0]["data-v"])
    assert best_vs_default == pytest.approx(cycles[FIRST] / cycles[winner])
    # FLOP/cycle from the module's FLOPS(case) over the X60 model's cycles, per config
    flops, moved = 2 * 67 * 45 * 33, 4 * (67 * 33 + 33 * 45 + 67 * 45)
    rates = {attrs["data-config"]: float(cells[0]["data-v"]) for (attrs, _), cells in
             zip([row for row in dom.tables["rank-g1"] if row[1]], dom.column("rank-g1", "rate:flop/cycle"),
                 strict=True)}
    assert rates == {c: pytest.approx(flops / n) for c, n in cycles.items()}
    roof = next(c for c in dom.charts if "roofline" in c.css)
    points = [t for t in roof.titles if "FLOP/byte" in t]
    assert len(points) == 4 and all(f"{flops / moved:.3g} FLOP/byte" in t for t in points)
    # each config's generated C and disassembly, copied beside the page and linked from its row
    for config in cycles:
        c_href, asm_href = dom.links[config]
        c_file, asm_file = pages["page"].parent / c_href, pages["page"].parent / asm_href
        assert c_file.suffix == ".c" and "matmul_kernel" in c_file.read_text()
        assert asm_file.suffix == ".s" and "<matmul_kernel>:" in asm_file.read_text()


def test_report_names_every_file_it_wrote(pages, capsys) -> None:
    folder = pages["folder"]
    capsys.readouterr()
    assert main(["report", str(pages["run"]), "--no-plots", "--out", str(folder / "again"),
                 "--html", str(folder / "again.html")]) == 0
    wrote = [line.removeprefix("wrote ") for line in capsys.readouterr().err.splitlines()
             if line.startswith("wrote ")]
    assert wrote[:3] == [str(folder / "again" / "report.txt"), str(folder / "again/qemu/matmul/small/perf_stats.csv"),
                         str(folder / "again.html")]
    assert {Path(w).suffix for w in wrote[3:]} == {".c", ".s"} and all(Path(w).is_file() for w in wrote)


def test_the_heatmap_colour_scale_is_log_or_rank_when_one_outlier_would_wash_it_out() -> None:
    log = colour_scale([100.0, 200.0, 400.0, 800.0])
    assert log.kind == "log" and log.fraction(200.0) == pytest.approx(1 / 3) and log.title == "log scale"
    # one config 1000x off: linear, the other three would share the palest 0.02 % of the scale; log, 3 % of it
    values = [100.0, 110.0, 120.0, 100_000.0]
    rank = colour_scale(values)
    assert rank.kind == "rank" and [rank.fraction(v) for v in values] == pytest.approx([0, 1 / 3, 2 / 3, 1])
    # two clusters of many cells each (jacobi: 15 slow, 10 fast) keep the log scale: their gap is the news
    assert colour_scale([1.0 + i / 100 for i in range(10)] + [8.0 + i / 10 for i in range(15)]).kind == "log"
