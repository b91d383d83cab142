"""The audit log (contract section 2a): `GET /admin/apps/{app}/audit?limit=&after=`.

Callers: the operator changing an app, its tables, columns, orgs, users, members and roles,
writing rows and impersonating members; then reading the log back, page by page. And every
section 2a route called without the admin token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.console_world import Shop, build_shop, error
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


def _actions(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["action"], e["target"]) for e in entries]


def test_every_admin_change_is_recorded_newest_first(world: AppWorld) -> None:
    admin, base = world.admin, world.base
    expect(admin.patch(base, json={"settings": {"accessTokenTtl": 600}}), 200)
    world.table("vendors", [{"name": "name", "type": "text"}])
    expect(admin.patch(f"{base}/tables/vendors", json={"addColumns": [
        {"name": "city", "type": "text"}]}), 200)
    expect(admin.patch(f"{base}/tables/vendors", json={"dropColumns": ["city"]}), 200)
    org = world.org("North")
    user = world.user(password="a secret passphrase")
    world.role("clerk", ["vendors:*"])
    world.member(org, user["uid"], ["clerk"])
    expect(admin.delete(f"{base}/orgs/{org}/members/{user['uid']}"), 204)
    expect(admin.delete(f"{base}/roles/clerk"), 204)
    expect(admin.delete(f"{base}/users/{user['uid']}"), 204)
    expect(admin.delete(f"{base}/orgs/{org}"), 204)
    expect(admin.delete(f"{base}/tables/vendors"), 204)
    entries = expect(admin.get(f"{base}/audit"), 200)["items"]
    assert _actions(entries) == list(reversed([
        ("app.create", world.name),
        ("app.update", world.name),
        ("table.create", "tables/vendors"),
        ("table.update", "tables/vendors"),
        ("table.update", "tables/vendors"),
        ("org.create", f"orgs/{org}"),
        ("user.create", f"users/{user['uid']}"),
        ("role.put", "roles/clerk"),
        ("member.put", f"orgs/{org}/members/{user['uid']}"),
        ("member.delete", f"orgs/{org}/members/{user['uid']}"),
        ("role.delete", "roles/clerk"),
        ("user.delete", f"users/{user['uid']}"),
        ("org.delete", f"orgs/{org}"),
        ("table.delete", "tables/vendors"),
    ]))
    by_action: dict[str, dict[str, Any]] = {}
    for entry in reversed(entries):  # the oldest entry of each action
        by_action.setdefault(entry["action"], entry)
    assert by_action["user.create"]["details"] == {"uid": user["uid"], "email": user["email"]}
    assert by_action["member.put"]["details"]["roles"] == ["clerk"]
    assert by_action["table.update"]["details"] == {"addColumns": [
        {"name": "city", "type": "text"}]}
    assert by_action["app.update"]["details"] == {"settings": {"accessTokenTtl": 600}}
    assert by_action["role.put"]["details"]["permissions"] == ["vendors:*"]
    ids = [int(e["id"]) for e in entries]
    assert ids == sorted(ids, reverse=True)
    assert all(e["at"].endswith("Z") for e in entries)
    assert "a secret passphrase" not in json.dumps(entries)


def test_admin_row_writes_and_imports_are_recorded_without_values(world: AppWorld) -> None:
    shop = build_shop(world)
    row = shop.admin_invoice(shop.north, note="a confidential note")
    expect(shop.admin.patch(f"{shop.admin_rows()}/{row['uid']}",
                            json={"amount": "777.77"}), 200)
    expect(shop.admin.delete(f"{shop.admin_rows()}/{row['uid']}"), 204)
    expect(shop.admin.post(f"{shop.admin_rows()}/import", params={"org": shop.south},
                           content=b"number\nSECRET-NUMBER\n", headers={"Content-Type": "text/csv"}),
           201)
    entries = shop.audit()[:4]
    target = f"tables/invoices/rows/{row['uid']}"
    assert _actions(entries) == [("row.import", "tables/invoices/rows"), ("row.delete", target),
                                 ("row.update", target), ("row.create", target)]
    assert entries[0]["details"] == {"org": shop.south, "inserted": 1}
    assert entries[2]["details"] == {"org": shop.north, "columns": ["amount"]}
    assert entries[3]["details"]["org"] == shop.north
    text = json.dumps(entries)
    assert "confidential" not in text and "777.77" not in text and "SECRET-NUMBER" not in text


def test_rest_writes_of_members_are_not_admin_changes(world: AppWorld) -> None:
    shop = build_shop(world)
    before = shop.audit()
    shop.invoice()
    assert shop.audit() == before


def test_refused_admin_requests_are_not_recorded(world: AppWorld) -> None:
    shop = build_shop(world)
    before = shop.audit()
    error(shop.admin.post(f"{shop.base}/tables", json={"name": "Bad Name"}), 422,
          "VALIDATION_FAILED")
    error(shop.admin.post(f"{shop.base}/users", json={"email": "x@y.z", "password": "short"}),
          422, "VALIDATION_FAILED")
    error(shop.admin.post(shop.admin_rows(), json={"org": shop.north}), 422, "VALIDATION_FAILED")
    error(shop.admin.delete(f"{shop.base}/roles/nosuch"), 404, "NOT_FOUND")
    assert shop.audit() == before


def test_operator_pages_through_the_log_with_limit_and_after(world: AppWorld) -> None:
    for n in range(6):
        world.org(f"Org{n}")
    everything = expect(world.admin.get(f"{world.base}/audit"), 200)["items"]
    pages: list[list[str]] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 3, **({"after": after} if after else {})}
        page = expect(world.admin.get(f"{world.base}/audit", params=params), 200)
        pages.append([e["id"] for e in page["items"]])
        after = page["next"]
        if after is None:
            break
    assert [i for p in pages for i in p] == [e["id"] for e in everything]
    assert [len(p) for p in pages] == [3, 3, 1]  # six orgs and the app itself


@pytest.mark.parametrize("params", [{"limit": "0"}, {"limit": "1001"}, {"limit": "x"},
                                    {"limit": "\u00b2"}, {"limit": "\u0665"}, {"after": "\u00b2"},
                                    {"after": "x"}, {"after": "-1"}])
def test_operator_gets_400_for_a_bad_limit_or_cursor(world: AppWorld, params: dict[str, str]) -> None:
    error(world.admin.get(f"{world.base}/audit", params=params), 400, "BAD_REQUEST")


def test_one_apps_log_is_not_visible_from_another(world: AppWorld) -> None:
    other = AppWorld.create(world.server, world.admin.client)
    other.org("Hidden")
    assert _actions(expect(world.admin.get(f"{world.base}/audit"), 200)["items"]) == [
        ("app.create", world.name)]


def test_deleting_an_app_works_and_its_log_goes_with_its_routes(world: AppWorld) -> None:
    shop = build_shop(world)
    shop.admin_invoice(shop.north)
    shop.impersonate(shop.member(shop.north, ["viewer"]), shop.north)
    expect(world.admin.delete(world.base), 204)
    error(world.admin.get(f"{world.base}/audit"), 404, "NOT_FOUND")
    # The name is free again, and the new app starts with a log of its own.
    expect(world.admin.post("/admin/apps", json={"name": world.name}), 201)
    assert _actions(expect(world.admin.get(f"{world.base}/audit"), 200)["items"]) == [
        ("app.create", world.name)]


# -- every section 2a route wants the admin token ----------------------------------------------

def _routes(shop: Shop, row_uid: str, user: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    rows = shop.admin_rows()
    csv = {"content": b"number\nX\n", "headers": {"Content-Type": "text/csv"}}
    return [
        ("GET", rows, {}),
        ("POST", rows, {"json": {"org": shop.north, "number": "X"}}),
        ("GET", f"{rows}/{row_uid}", {}),
        ("PATCH", f"{rows}/{row_uid}", {"json": {"note": "x"}}),
        ("DELETE", f"{rows}/{row_uid}", {}),
        ("POST", f"{rows}/import?org={shop.north}", csv),
        ("POST", f"{shop.base}/impersonate", {"json": {"user": user["uid"], "org": shop.north}}),
        ("POST", f"{shop.base}/roles/viewer/preview", {"json": {
            "draft": {}, "user": user["uid"], "org": shop.north, "table": "invoices"}}),
        ("GET", f"{shop.base}/audit", {}),
    ]


def test_member_token_impersonation_token_or_no_token_gets_401_on_every_console_route(
        world: AppWorld) -> None:
    shop = build_shop(world)
    row = shop.invoice(note="untouched")
    user = shop.member(shop.north, ["viewer"])
    callers = [Caller(shop.admin.client), shop.north_clerk, shop.impersonate(user, shop.north),
               Caller(shop.admin.client, "not-the-admin-token")]
    before = shop.audit()
    for caller in callers:
        for method, path, kw in _routes(shop, row["uid"], user):
            error(caller.request(method, path, **kw), 401, "UNAUTHENTICATED")
    assert shop.audit() == before
    assert [(r["uid"], r["note"]) for r in shop.admin_list()] == [(row["uid"], "untouched")]
