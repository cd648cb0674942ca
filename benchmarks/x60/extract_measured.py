#!/usr/bin/env python3
"""Extract the SpacemiT X60 figures benchmarks/x60_fidelity.py compares against into measured.json beside this file.

Source: camel-cdr/rvv-bench-results (the X60 pages, measured on a Banana Pi BPI-F3 by rvv-bench's author), read
from a git clone of it (fetch github:camel-cdr/rvv-bench-results; default /work/.mirror/...); every figure keeps its
page, the results-repository commit its data comes from (the page's last change of data, checked below) and the
rvv-bench commit that page names. Only figures are taken, no code and no page text.

- whole kernels (memcpy.html, memset.html, mandelbrot.html, strlen.html): each page's ``infos`` arrays hold
  ``title``, ``labels`` (label 0 is the size row) and ``data`` (the sizes, then one row of measured
  bytes-or-elements per cycle per label); we take the size nearest to a target per family;
- single instructions (index.html, table ``tblMaa``: vl=VLMAX, tail and mask agnostic; cycles per instruction of an
  unrolled stream): the e32 columns m1..m8 of the rows named below.

    python benchmarks/x60/extract_measured.py [--repo DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = "camel-cdr/rvv-bench-results"
DEFAULT_CLONE = Path("/work/.mirror/camel-cdr+rvv-bench-results/repo")

#: page -> (results commit whose data the page still shows, rvv-bench commit that revision's index names). Checked
#: by check_unchanged(): the page's infos at HEAD are byte-identical to those at this commit.
PAGES = {
    "memcpy": ("c1287204043c765ad6208f2c53964e8e7fd8b6a5", "e1b462f1263e3940a72d7dcac11b68d8e5fddb09"),
    "memset": ("c1287204043c765ad6208f2c53964e8e7fd8b6a5", "e1b462f1263e3940a72d7dcac11b68d8e5fddb09"),
    "mandelbrot": ("97bc272", "9d1adf276f8bb8e2e61623283c1c91081808b888"),
    "strlen": ("97bc272", "9d1adf276f8bb8e2e61623283c1c91081808b888"),
}
#: index.html at the rename commit: its tblMaa still has the floating-point rows (HEAD's tblMaa has them empty).
INDEX = ("6438d64", "e1b462f1263e3940a72d7dcac11b68d8e5fddb09")

#: (family, page, title, [labels], target size, unit, what each variant does)
KERNELS = [
    ("memcpy vl=VLMAX", "memcpy", "memcpy aligned", ["rvv_m1", "rvv_m2", "rvv_m4", "rvv_m8"], 8192, "bytes/cycle"),
    ("memcpy vl=16", "memcpy", "memcpy aligned", ["rvv_128_m1", "rvv_128_m2", "rvv_128_m4", "rvv_128_m8"], 8192,
     "bytes/cycle"),
    ("memset vl=VLMAX", "memset", "memset aligned", ["rvv_m1", "rvv_m2", "rvv_m4", "rvv_m8"], 8192, "bytes/cycle"),
    ("mandelbrot", "mandelbrot", "mandelbrot 100", ["scalar_f32", "scalar_f64", "rvv_f32_m1", "rvv_f32_m2",
                                                    "rvv_f64_m2"], 16384, "pixels/cycle"),
    ("scalar byte loops", "memcpy", "memcpy aligned", ["scalar"], 8192, "bytes/cycle"),
    ("scalar byte loops", "memset", "memset aligned", ["scalar"], 8192, "bytes/cycle"),
    ("scalar byte loops", "strlen", "strlen", ["scalar"], 8192, "bytes/cycle"),
]
#: (family, table row, unit): e32 at m1, m2, m4, m8
INSTRUCTIONS = [
    ("strided load vlse32 (stride 12)", "vlse32.v v8,(t2),t3"),
    ("reduction vfredusum e32", "vfredusum.vs v8,v16,v24"),
    ("fma vfmacc.vf e32 (peak)", "vfmacc.vf v8,ft0,v16"),
]
E32_COLUMNS = {"m1": 17, "m2": 18, "m4": 19, "m8": 20}  # 4 SEW x 7 LMUL (mf8..m8) columns per row


def show(clone: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(clone), "show", f"{commit}:{path}"], capture_output=True, text=True,
                          check=True).stdout


def page_path(clone: Path, commit: str, page: str) -> str:
    """The X60 pages were under bpi_f3/ before 2026-01-17."""
    for folder in ("spacemit_x60", "bpi_f3"):
        probe = subprocess.run(["git", "-C", str(clone), "cat-file", "-e", f"{commit}:{folder}/{page}.html"],
                               capture_output=True, check=False)
        if probe.returncode == 0:
            return f"{folder}/{page}.html"
    raise SystemExit(f"{page}.html not found at {commit} in {clone}")


def infos(text: str) -> dict[str, tuple[list[str], list[list[float]]]]:
    out = {}
    for m in re.finditer(r'title:\s*"([^"]*)",\s*labels:\s*\[([^\]]*)\],\s*data:\s*\[(.*?)\]\s*\n\}', text, re.S):
        labels = re.findall(r'"([^"]*)"', m.group(2))
        rows = [[float(x) for x in row.split(",") if x.strip()] for row in re.findall(r"\[([^\]]*)\]", m.group(3))]
        out[m.group(1)] = (labels, rows)
    return out


def check_unchanged(clone: Path, page: str, commit: str) -> None:
    def tail(text: str) -> str:
        return text[text.index("let infos"):]
    then = show(clone, commit, page_path(clone, commit, page))
    if tail(then) != tail(show(clone, "HEAD", f"spacemit_x60/{page}.html")):
        raise SystemExit(f"{page}.html's data changed after {commit}: update PAGES")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=DEFAULT_CLONE, help=f"a clone of {REPO}")
    args = parser.parse_args()
    head = subprocess.run(["git", "-C", str(args.repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    figures = []
    for family, page, title, labels, target, unit in KERNELS:
        commit, bench_commit = PAGES[page]
        check_unchanged(args.repo, page, commit)
        path = page_path(args.repo, commit, page)
        names, rows = infos(show(args.repo, commit, path))[title]
        sizes = rows[0]
        at = min(range(len(sizes)), key=lambda i: abs(sizes[i] - target))
        for label in labels:
            figures.append({"family": family, "variant": f"{page} {label}", "measured": rows[names.index(label)][at],
                            "unit": unit, "size": int(sizes[at]), "kind": "kernel",
                            "source": {"repository": REPO, "page": path, "commit": commit, "title": title,
                                       "label": label, "rvv_bench_commit": bench_commit}})
    index_path = page_path(args.repo, INDEX[0], "index")
    tables = re.split(r'id="(tbl\w+)"', show(args.repo, INDEX[0], index_path))
    maa = dict(zip(tables[1::2], tables[2::2], strict=True))["tblMaa"]
    for family, row in INSTRUCTIONS:
        m = re.search(r"<tr><td>" + re.escape(row) + r"</td>(.*?)</tr>", maa)
        if m is None:
            raise SystemExit(f"row {row!r} not in tblMaa of {index_path} at {INDEX[0]}")
        cells = re.findall(r"<td>([^<]*)</td>", m.group(1))
        for lmul, column in E32_COLUMNS.items():
            figures.append({"family": family, "variant": f"{row.split()[0]} e32{lmul}",
                            "measured": float(cells[column]), "unit": "cycles/instruction", "size": 0,
                            "kind": "instruction",
                            "source": {"repository": REPO, "page": index_path, "commit": INDEX[0],
                                       "title": "tblMaa (vl=VLMAX, ta, ma)", "label": row,
                                       "rvv_bench_commit": INDEX[1]}})
    out = {"about": "SpacemiT X60 (BPI-F3, 1.6 GHz) figures measured by rvv-bench; extracted by "
                    "benchmarks/x60/extract_measured.py", "results_head": head, "figures": figures}
    (HERE / "measured.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {len(figures)} figures to {HERE / 'measured.json'}")


if __name__ == "__main__":
    main()
