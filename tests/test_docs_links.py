"""Every relative link in README.md, CHANGELOG.md and docs/*.md points at a file that exists, and a link's
#anchor at a heading of that page (GitHub's anchor rule), so moving a page or renaming a section breaks a test,
not a reader's click."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout these tests belong to
PAGES = sorted([REPO_ROOT / "README.md", REPO_ROOT / "CHANGELOG.md", *(REPO_ROOT / "docs").glob("*.md")])

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(page: Path) -> list[str]:
    """The targets of the page's Markdown links and images, code blocks and code spans left out."""
    text = _INLINE_CODE.sub("", _FENCE.sub("", page.read_text()))
    return _LINK.findall(text)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces to hyphens."""
    text = _FENCE.sub("", page.read_text())
    result: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = 1
        candidate = slug
        while candidate in result:
            candidate = f"{slug}-{n}"
            n += 1
        result.add(candidate)
    return result


def test_the_docs_are_the_pages_we_link() -> None:
    names = {p.name for p in PAGES}
    assert {"README.md", "usage.md", "targets.md", "results.md", "kernels.md", "triton-rvv.md", "compiler.md",
            "contributing.md", "contracts.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check offline
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.name}: broken links:\n" + "\n".join(broken)


def test_the_checker_sees_a_broken_link_and_a_broken_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A section\n\n[ok](#a-section) [bad](#nope) [gone](missing.md) `[code](x.md)`\n"
                    "```\n[fenced](y.md)\n```\n")
    assert links(page) == ["#a-section", "#nope", "missing.md"]
    assert anchors(page) == {"title", "a-section"}
