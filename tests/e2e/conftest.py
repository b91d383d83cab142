"""Browser fixtures: Playwright (from PyPI) driving Debian's chromium against a real server.

Without /usr/bin/chromium these tests skip, loudly; under CI (CI=true) they fail instead, so
CI never passes without having run them. Screenshots for docs/console.md are written when
AUTHORIC_E2E_SCREENSHOTS=1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.scenario import AppWorld
from tests.servers import ServerProcess

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
CONSOLE_DIST = Path(__file__).resolve().parents[2] / "platform" / "authoric" / "console_dist"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
VIEWPORT = {"width": 1280, "height": 800}

# Waits are on conditions; the timeout only bounds a failure on this slow, shared machine.
expect.set_options(timeout=30_000)


@pytest.fixture(scope="module")
def browser(server: ServerProcess) -> Iterator[Browser]:
    """One chromium per test module. Playwright's sync API keeps an event loop running while
    it is open, so it starts after the server (whose setup runs asyncio) and stops with the
    module, before other tests run theirs."""
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: /usr/bin/chromium is missing")
        pytest.skip("SKIPPED the browser tests: /usr/bin/chromium is missing (apt-get install chromium)")
    if not (CONSOLE_DIST / "index.html").exists():
        pytest.fail("the console is not built: run scripts/setup (or scripts/console build)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                             headless=True)
        yield browser
        browser.close()


def new_page(browser: Browser) -> Page:
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1,
                                  color_scheme="light", accept_downloads=True)
    context.set_default_timeout(30_000)
    return context.new_page()


def sign_in(page: Page, server: ServerProcess, route: str = "") -> None:
    page.goto(f"{server.url}/console/")
    page.get_by_label("Admin token").fill(server.admin_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("link", name="Authoric console")).to_be_visible()
    if route:
        page.goto(f"{server.url}/console/#{route}")


@pytest.fixture
def console(browser: Browser, server: ServerProcess) -> Iterator[Page]:
    """A page of the console, signed in with the admin token."""
    page = new_page(browser)
    sign_in(page, server)
    yield page
    page.context.close()


def screenshot(page: Page, name: str) -> None:
    """Saves a docs screenshot when AUTHORIC_E2E_SCREENSHOTS=1 (PNG, 1280x800), made smaller
    with pngquant (Debian's package) when it is installed."""
    if os.environ.get("AUTHORIC_E2E_SCREENSHOTS") != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    if shutil.which("pngquant"):
        subprocess.run(["pngquant", "--force", "--skip-if-larger", "--strip", "--output", str(path),
                        "64", str(path)], check=False)


def confirm(page: Page, action: str, *lines: str) -> None:
    """Checks that the confirmation dialog lists `lines`, then confirms with `action`."""
    dialog = page.get_by_role("dialog")
    for line in lines:
        expect(dialog).to_contain_text(line)
    dialog.get_by_role("button", name=action, exact=True).click()
    expect(dialog).to_have_count(0)


def go(page: Page, world: AppWorld, route: str) -> None:
    page.goto(f"{world.server.url}/console/#/apps/{world.name}/{route}")
