"""A browser app on its own origin, in Chromium: CORS, REST, and the live feed through the
SSE clients people use (`@microsoft/fetch-event-source` and `eventsource`), against real
server processes (contract sections 2, 5 and 5b).

The page is served by a static server on another port than the API (another origin); the
app lists that origin in `settings.allowedOrigins`. `http://localhost:<same port>` is a
third origin the app does not list. Every wait is on a condition with a wide timeout.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Request
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server

WAIT_MS = 60_000
TABLES = ("invoices", "vendors", "notes")


@pytest.fixture
def shop(server: ServerProcess, http: httpx.Client, page_port: int) -> AppWorld:
    """An app with three tables, an org, a clerk role, allowing the page's origin."""
    world = AppWorld.create(server, http)
    for name in TABLES:
        world.table(name, [{"name": "title", "type": "text", "required": True}])
    world.org("Northwind")
    world.role("clerk", [f"{name}:*" for name in TABLES])
    expect(world.admin.patch(world.base, json={"settings": {
        "allowedOrigins": [f"http://127.0.0.1:{page_port}"]}}), 200)
    return world


@pytest.fixture
def page(browser: Browser, page_port: int) -> Iterator[Page]:
    context = browser.new_context()
    opened = context.new_page()
    opened.goto(f"http://127.0.0.1:{page_port}/index.html")
    opened.wait_for_function("window.authoric !== undefined", timeout=WAIT_MS)
    yield opened
    context.close()


def member(world: AppWorld) -> tuple[dict[str, Any], Caller]:
    user = world.user()
    world.member(world.orgs["Northwind"], user["uid"], ["clerk"])
    return user, world.login(user)


def frames(page: Page, stream: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate(
        "name => authoric.state.frames.filter(f => f.stream === name)", stream)
    return found


def changes(page: Page, stream: str) -> list[tuple[str, str, str]]:
    """(table, op, row uid) of every data frame the page received, in arrival order."""
    return [(f["data"]["table"], f["data"]["op"],
             f["data"]["rowUid"] if f["data"]["op"] == "delete" else f["data"]["row"]["uid"])
            for f in frames(page, stream) if f["event"] == "message"]


def wait_changes(page: Page, stream: str, count: int) -> None:
    page.wait_for_function(
        "([name, n]) => authoric.state.frames.filter("
        "f => f.stream === name && f.event === 'message').length >= n",
        arg=[stream, count], timeout=WAIT_MS, polling=100)


def wait_frame(page: Page, stream: str, event: str) -> None:
    page.wait_for_function(
        "([name, ev]) => authoric.state.frames.some(f => f.stream === name && f.event === ev)",
        arg=[stream, event], timeout=WAIT_MS, polling=100)


def start_session(page: Page, api: str, world: AppWorld, user: dict[str, Any], path: str,
                  stream: str) -> None:
    page.evaluate("""async ([base, app, email, password, path, name]) => {
        window.s = authoric.session(base, app);
        await s.login(email, password);
        s.follow(path, name);
    }""", [api, world.name, user["email"], user["password"], path, stream])
    wait_frame(page, stream, "connected")


def insert(caller: Caller, world: AppWorld, table: str, title: str) -> str:
    return str(expect(caller.post(world.rows(table), json={"title": title}), 201)["uid"])


# -- fetch-event-source -----------------------------------------------------------------------

def test_page_gets_a_token_calls_rest_and_its_table_stream_gets_insert_update_delete(
        shop: AppWorld, page: Page) -> None:
    user, _ = member(shop)
    start_session(page, shop.server.url, shop, user, "/autocrud/invoices/subscribe", "inv")
    created = page.evaluate("() => s.rest('POST', '/autocrud/invoices', {title: 'A-1'})")
    assert created["status"] == 201
    uid = created["body"]["uid"]
    wait_changes(page, "inv", 1)
    patched = page.evaluate("uid => s.rest('PATCH', `/autocrud/invoices/${uid}`, {title: 'A-2'})",
                            uid)
    assert patched["status"] == 200 and patched["body"]["title"] == "A-2"
    wait_changes(page, "inv", 2)
    listed = page.evaluate("() => s.rest('GET', '/autocrud/invoices')")
    assert listed["status"] == 200 and [r["uid"] for r in listed["body"]["items"]] == [uid]
    deleted = page.evaluate("uid => s.rest('DELETE', `/autocrud/invoices/${uid}`)", uid)
    assert deleted["status"] == 204
    wait_changes(page, "inv", 3)
    assert changes(page, "inv") == [("invoices", "insert", uid), ("invoices", "update", uid),
                                    ("invoices", "delete", uid)]
    assert frames(page, "inv")[2]["data"]["row"]["title"] == "A-2"  # [0] is `connected`
    assert page.evaluate("() => authoric.state.errors") == []


@pytest.fixture
def killable(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    """A server process of its own (a replica: same database and secrets), killed and
    restarted by the test."""
    proc = start_server(database_url, data_dir)
    yield proc
    proc.stop()


def test_page_reconnects_by_itself_after_a_server_restart_and_misses_nothing(
        shop: AppWorld, page: Page, killable: ServerProcess, database_url: str,
        data_dir: Path) -> None:
    user, clerk = member(shop)  # writes through the session's server: the other replica
    sent: list[Request] = []
    page.on("request", lambda r: sent.append(r) if "/subscribe" in r.url else None)
    start_session(page, killable.url, shop, user, "/autocrud/invoices/subscribe", "inv")
    before = insert(clerk, shop, "invoices", "before")
    wait_changes(page, "inv", 1)
    killable.stop(signal.SIGKILL)
    away = [insert(clerk, shop, "invoices", f"away-{i}") for i in range(3)]
    port = int(killable.url.rsplit(":", 1)[1])
    restarted = start_server(database_url, data_dir, port=port)
    try:
        wait_changes(page, "inv", 4)
        after = insert(clerk, shop, "invoices", "after")
        wait_changes(page, "inv", 5)
        # Before this server stops too: the page would then reconnect again, from the last id.
        resumed = [r.headers.get("last-event-id") for r in sent]
    finally:
        restarted.stop()
    assert [uid for _, _, uid in changes(page, "inv")] == [before, *away, after]
    ids = [int(f["id"]) for f in frames(page, "inv") if f["id"]]
    assert ids == sorted(set(ids))  # none twice, in order
    assert resumed[0] is None and resumed[-1] == frames(page, "inv")[1]["id"]


def test_reauth_closes_the_stream_and_the_page_refreshes_its_token_and_reopens(
        shop: AppWorld, page: Page) -> None:
    # A modest lifetime: the stream must live long enough to be opened, and no test waits
    # on how long exactly.
    expect(shop.admin.patch(shop.base, json={"settings": {"accessTokenTtl": 15}}), 200)
    user, clerk = member(shop)
    start_session(page, shop.server.url, shop, user, "/autocrud/notes/subscribe", "notes")
    first = insert(clerk, shop, "notes", "first")
    wait_changes(page, "notes", 1)
    wait_frame(page, "notes", "reauth")
    page.wait_for_function("() => authoric.state.refreshes >= 1 && authoric.state.opens >= 2",
                           timeout=WAIT_MS * 2, polling=200)
    clerk_again = shop.login(user)  # the first token may have expired by now
    second = insert(clerk_again, shop, "notes", "second")
    wait_changes(page, "notes", 2)
    assert [uid for _, _, uid in changes(page, "notes")] == [first, second]
    assert any(f["data"] == {"reason": "token_expired"} for f in frames(page, "notes")
               if f["event"] == "reauth")


# -- eventsource, several tables on one connection ---------------------------------------------

def test_multi_table_stream_gets_three_tables_in_commit_order_and_resumes_the_set_from_one_id(
        shop: AppWorld, page: Page) -> None:
    _, clerk = member(shop)
    page.evaluate("""([base, app, tables, token]) => {
        window.multi = authoric.followTables(base, app, tables, token, 'multi');
    }""", [shop.server.url, shop.name, list(TABLES), clerk.token])
    wait_frame(page, "multi", "connected")
    assert frames(page, "multi")[0]["data"] == {"tables": list(TABLES), "live": True}
    order = ["notes", "invoices", "vendors", "invoices", "vendors", "notes"]
    written = [(t, "insert", insert(clerk, shop, t, f"{t}-{i}")) for i, t in enumerate(order)]
    wait_changes(page, "multi", len(written))
    assert changes(page, "multi") == written
    ids = [int(f["id"]) for f in frames(page, "multi") if f["event"] == "message"]
    assert ids == sorted(set(ids))
    page.evaluate("() => multi.close()")
    missed = [(t, "insert", insert(clerk, shop, t, f"missed-{t}")) for t in TABLES]
    page.evaluate("""([base, app, tables, token, last]) => {
        window.again = authoric.followTables(base, app, tables, token, 'again', last);
    }""", [shop.server.url, shop.name, list(TABLES), clerk.token, str(ids[-1])])
    wait_changes(page, "again", len(missed))
    fence = insert(clerk, shop, "vendors", "fence")
    wait_changes(page, "again", len(missed) + 1)
    assert changes(page, "again") == [*missed, ("vendors", "insert", fence)]
    page.evaluate("() => again.close()")


# -- an origin the app does not list -------------------------------------------------------------

def test_page_on_an_origin_the_app_does_not_list_gets_nothing(
        shop: AppWorld, browser: Browser, page: Page, page_port: int) -> None:
    _, clerk = member(shop)
    context = browser.new_context()
    stranger = context.new_page()
    try:
        stranger.goto(f"http://localhost:{page_port}/index.html")
        stranger.wait_for_function("window.authoric !== undefined", timeout=WAIT_MS)
        api = f"{shop.server.url}/{shop.name}/openapi.json"
        assert page.evaluate("url => authoric.tryFetch(url)", api)["ok"] is True  # listed origin
        blocked = stranger.evaluate("url => authoric.tryFetch(url)", api)
        assert blocked["ok"] is False and "Failed to fetch" in blocked["error"]
        stranger.evaluate("""([base, app, tables, token]) => {
            window.multi = authoric.followTables(base, app, tables, token, 'stranger');
        }""", [shop.server.url, shop.name, list(TABLES), clerk.token])
        stranger.wait_for_function("() => authoric.state.errors.length > 0", timeout=WAIT_MS)
        insert(clerk, shop, "notes", "unseen")
        stranger.evaluate("() => multi.close()")
        assert frames(stranger, "stranger") == []
    finally:
        context.close()
    # What the browser saw: the server sent that origin no CORS header at all.
    response = httpx.get(f"{shop.server.url}/{shop.name}/openapi.json",
                         headers={"Origin": f"http://localhost:{page_port}"})
    assert not any(h.startswith("access-control-") for h in response.headers)
