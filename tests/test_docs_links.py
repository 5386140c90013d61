"""Every relative link of README.md and docs/*.md resolves: the file exists and, for ``#anchor``,
the page has that heading (GitHub's slug). The README's tour links into pages that hold the rest
of it, so a moved or renamed section must not leave a dead link behind."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCED = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _FENCED.sub("", page.read_text(encoding="utf-8")), flags=re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")  # GitHub numbers repeated headings
    return out


def dead_links(page: Path) -> list[str]:
    dead = []
    for target in _LINK.findall(_FENCED.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not ours to check offline
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            dead.append(f"{target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            dead.append(f"{target} (no heading with that anchor in {os.path.relpath(path, ROOT)})")
    return dead


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    dead = dead_links(page)
    assert not dead, f"{page.relative_to(ROOT)} links to what is not there: {dead}"


def test_the_slug_is_github_s() -> None:
    assert slug("12. Extensions") == "12-extensions"
    assert slug("Run `openenv`") == "run-openenv"
    assert slug("Untrusted code: the sandbox boundary") == "untrusted-code-the-sandbox-boundary"


def test_a_dead_link_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad anchor](#nope)\n", encoding="utf-8")
    assert [d.split(" ")[0] for d in dead_links(page)] == ["missing.md", "#nope"]
