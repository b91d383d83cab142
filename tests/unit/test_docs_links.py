"""Every relative link in the docs reaches something: a Markdown link or image in a page under
docs/, the README or bench/README.md names a file of this repository that exists and, with
`#anchor`, a heading of that page (as GitHub makes its anchor) or an `<a id>` in it. Pages that
move or headings that are renamed break no reader's link unnoticed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)[^`\n].*?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def pages() -> list[Path]:
    return sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md", ROOT / "bench" / "README.md"])


def prose(text: str) -> str:
    """The page without its code blocks and code spans, where a `[x](y)` is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower case, anything but
    letters, digits, `_`, `-` and spaces dropped, spaces turned into `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """Every anchor of `page`: each heading's, a repeated one with `-1`, `-2`... as GitHub
    numbers them, and the ids of `<a>` elements."""
    text = FENCE.sub("", page.read_text())
    found: set[str] = set(EXPLICIT.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return frozenset(found)


@dataclass(frozen=True)
class Link:
    """One relative link as a page shows it."""

    page: Path
    target: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}: ({self.target})"


def relative_links() -> Iterator[Link]:
    for page in pages():
        for target in LINK.findall(prose(page.read_text())):
            if not re.match(r"^[a-zA-Z][\w+.-]*:", target):  # http:, mailto: and the like
                yield Link(page, target)


def link_problem(link: Link) -> str | None:
    """What is wrong with `link`, if anything."""
    path, _, anchor = link.target.partition("#")
    target = (link.page.parent / path).resolve() if path else link.page
    if not target.exists():
        return "no such file"
    if ROOT not in target.parents and target != ROOT:
        return "outside the repository"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"no heading #{anchor} in {target.relative_to(ROOT)}"
    return None


def test_every_relative_link_of_the_docs_reaches_a_file_and_a_heading_that_exist() -> None:
    links = list(relative_links())
    assert len(links) > 50  # the docs do link to each other: the extraction found them
    wrong = [f"{link}: {why}" for link in links if (why := link_problem(link))]
    assert wrong == []


@pytest.mark.parametrize(("heading", "anchor"), [
    ("Health checks", "health-checks"),
    ("3b. Stalled dedicated connections, and the leader's takeover",
     "3b-stalled-dedicated-connections-and-the-leaders-takeover"),
    ("8. SQL capture (`captureSqlWrites`)", "8-sql-capture-capturesqlwrites"),
    ("`authoric serve`", "authoric-serve"),
    ("The live feed: runs and history moved from realtime.md",
     "the-live-feed-runs-and-history-moved-from-realtimemd"),
    ("13. 50,000 deliveries a second", "13-50000-deliveries-a-second"),
    ("`AUTHORIC_WEBHOOK_DELIVERY`", "authoric_webhook_delivery"),
    ("See [api](api.md) — counting", "see-api--counting"),
])
def test_a_heading_gets_the_anchor_github_gives_it(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_link_is_found_wrong_when_its_file_or_its_heading_is_missing() -> None:
    page = ROOT / "docs" / "index.md"
    assert link_problem(Link(page, "realtime.md#10-chaos")) is None
    assert link_problem(Link(page, "realtime.md")) is None
    assert link_problem(Link(page, "../bench/README.md")) is None
    assert link_problem(Link(page, "#the-repository")) is None
    assert link_problem(Link(page, "realtime.md#no-such-heading")) is not None
    assert link_problem(Link(page, "no-such-page.md")) is not None


def test_the_index_links_every_page_of_the_docs_and_names_every_top_level_folder() -> None:
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / link.target.partition("#")[0]).resolve()
              for link in relative_links() if link.page == index}
    unlinked = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")
                      if p != index and p.resolve() not in linked)
    assert unlinked == []
    text = index.read_text()
    ignored = {line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()}
    unnamed = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name != ".git"
                     and p.name not in ignored and f"`{p.name}/`" not in text)
    assert unnamed == []
