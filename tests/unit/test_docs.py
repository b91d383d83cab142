"""The docs a newcomer reads: one index that lists every page, links that lead somewhere, and no
citation of files a reader of this repository does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def pages() -> list[Path]:
    return sorted([*DOCS.glob("*.md"), ROOT / "README.md"])


def test_a_reader_of_the_index_finds_every_page_of_the_docs() -> None:
    listed = set(LINK.findall((DOCS / "index.md").read_text()))
    assert {p.name for p in DOCS.glob("*.md")} - {"index.md"} - listed == set()


def test_every_relative_link_in_the_docs_leads_to_a_file() -> None:
    broken = [(page.name, target) for page in pages() for target in LINK.findall(page.read_text())
              if "://" not in target and not target.startswith("mailto:")
              and not (page.parent / target).exists()]
    assert broken == []


def test_no_doc_cites_a_file_the_repository_does_not_have() -> None:
    cited = [(page.name, name) for page in pages() for name in ("CONTRACT.md", "scripts/console-build")
             if name in page.read_text()]
    assert cited == []
