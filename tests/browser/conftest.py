"""Browser fixtures: Debian's Chromium driven by Playwright (from PyPI), a page served from a
second origin by a tiny static server, and the page's script bundled by esbuild from the
pinned npm packages in this folder (`npm ci` when they are missing), with the console's Node
(tests/node.py: the system's, or console/.node).

Skipped, loudly, when /usr/bin/chromium is missing or no Node can be had; under CI=true a skip
fails the run instead (tests/conftest.py), and CI installs Chromium (.ci/run).
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests import node

HERE = Path(__file__).parent
CHROMIUM = Path(os.environ.get("AUTHORIC_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>An app on its own origin</title></head>
<body><p>Authoric browser client test page</p><script src="/bundle.js"></script></body></html>
"""


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    try:
        node.node_bin()
    except node.NodeMissing as missing:
        return f"no Node: {missing}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if Path(str(item.fspath)).is_relative_to(HERE)]
    why = _missing() if ours else None
    if why is None:
        return
    skip = pytest.mark.skip(reason=f"browser tests need Chromium and Node: {why}")
    for item in ours:
        item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    why = _missing()
    if why is not None:
        terminalreporter.write_line(f"*** SKIPPED the browser tests (tests/browser): {why} ***",
                                    red=True, bold=True)


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the page and its script bundle, built now from the pinned packages."""
    node.npm_ci(HERE)
    out = tmp_path_factory.mktemp("browser-page")
    subprocess.run([str(HERE / "node_modules" / ".bin" / "esbuild"), "client.mjs", "--bundle",
                    "--format=iife", f"--outfile={out / 'bundle.js'}", "--log-level=warning"],
                   cwd=HERE, check=True, env=node.env())
    (out / "index.html").write_text(PAGE)
    return out


@pytest.fixture(scope="session")
def page_port(bundle: Path) -> Iterator[int]:
    """A static server for the page (its own port: another origin than the API's)."""
    handler = functools.partial(_QuietHandler, directory=str(bundle))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="page server")
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Chromium for one test module. Not for the session: while Playwright's sync API is
    active it holds an event loop in the main thread, and later tests that run their own
    (asyncio.run, run_until_complete) would fail."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
