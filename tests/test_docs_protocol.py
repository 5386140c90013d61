"""The protocol reference lives in the repository and every citation of it resolves.

Code comments, docstrings and docs cite ``docs/protocol.md §N`` (a section), ``§11 Bn`` (an
upstream defect we fixed) and ``T1``–``T10`` (transcripts). These tests fail when a citation names
a section, defect or transcript the document does not have, or when something cites the old spec
file that is not part of the repository.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = ROOT / "docs" / "protocol.md"
SKIP_DIRS = {".git", ".venv", ".nox", "node_modules", "bench-results", "__pycache__"}
CITATION = re.compile(r"docs/protocol\.md`?\s*§\s*(\d+(?:\.\d+)?)")
DEFECT = re.compile(r"§11\s+B(\d+)")


def _repo_texts() -> list[tuple[Path, str]]:
    """Every .py/.md/.toml file of the checkout but this one and the document itself."""
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if path.suffix in (".py", ".md", ".toml") and path not in (PROTOCOL, Path(__file__).resolve()):
                out.append((path, path.read_text(encoding="utf-8", errors="replace")))
    return out


def _sections() -> set[str]:
    text = PROTOCOL.read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, flags=re.M))


def test_the_protocol_document_has_every_section_and_defect() -> None:
    text = PROTOCOL.read_text(encoding="utf-8")
    sections = _sections()
    assert {str(n) for n in range(1, 13)} <= sections
    defects = {int(n) for n in re.findall(r"^\* \*\*B(\d+) ", text, flags=re.M)}
    assert defects == set(range(1, 23)), "§11 must list B1-B22, each once, as '* **Bn ...'"
    transcripts = set(re.findall(r"^### (T\d+)\. ", text, flags=re.M))
    assert transcripts == {f"T{n}" for n in range(1, 11)}


def test_every_citation_names_an_existing_section() -> None:
    sections = _sections()
    dangling = [f"{path.relative_to(ROOT)}: §{ref}" for path, text in _repo_texts()
                for ref in CITATION.findall(text) if ref not in sections]
    assert not dangling, f"citations of sections docs/protocol.md does not have: {dangling}"


def test_every_cited_defect_exists() -> None:
    dangling = [f"{path.relative_to(ROOT)}: B{n}" for path, text in _repo_texts()
                for n in DEFECT.findall(text) if not 1 <= int(n) <= 22]
    assert not dangling, dangling


@pytest.mark.parametrize("needle", ["wire-protocol.md", "shared/spec"])
def test_nothing_cites_the_spec_outside_the_repository(needle: str) -> None:
    found = [str(path.relative_to(ROOT)) for path, text in _repo_texts() if needle in text]
    assert not found, f"{needle} is not in this repository; cite docs/protocol.md instead: {found}"
