"""Platform administration of apps and tables (contract section 2), over real HTTP.

Who is calling is in each test's name: the platform admin, a caller with a wrong or missing
admin token, or an app user presenting its own token where only the admin token is accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect, unique
from tests.servers import ServerProcess

RESERVED = ["uid", "order", "limit", "after", "filter", "lastEventId", "subscribe", "import",
            "expand", "count"]


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    """Whatever a test does, the server never logs a traceback (an unexpected error)."""
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def admin(server: ServerProcess, http: httpx.Client) -> Caller:
    return Caller(http, server.admin_token)


def _app_names(admin: Caller) -> list[str]:
    return [a["name"] for a in expect(admin.get("/admin/apps"), 200)["items"]]


# Apps ------------------------------------------------------------------------------------
# Contract sections 3 and 8: the settings an app starts with besides its token lifetimes.
DEFAULT_ACCOUNT_AND_WEBHOOK_SETTINGS = {
    "signUp": "closed", "emailVerification": "required", "orgCreation": "operator",
    "orgOwnerRoles": [], "passwordMinLength": 8,
    "links": {"verify": None, "reset": None, "invite": None}, "mailFrom": None,
    "mailTemplates": {}, "webhookRetryHours": 72}


def test_admin_creates_an_app_and_sees_it_with_default_settings(admin: Caller) -> None:
    name = unique("acme")
    app = expect(admin.post("/admin/apps", json={"name": name}), 201)
    assert app["name"] == name
    assert set(app) == {"uid", "name", "createdAt", "settings"}
    assert app["createdAt"].endswith("Z")
    assert app["settings"] == {"accessTokenTtl": 900, "refreshTokenTtl": 2592000,
                               "allowedOrigins": [], **DEFAULT_ACCOUNT_AND_WEBHOOK_SETTINGS}
    assert expect(admin.get(f"/admin/apps/{name}"), 200) == app
    assert name in _app_names(admin)


def test_admin_gets_409_creating_an_app_whose_name_is_taken(admin: Caller) -> None:
    name = unique("dup")
    expect(admin.post("/admin/apps", json={"name": name}), 201)
    expect(admin.post("/admin/apps", json={"name": name}), 409, "CONFLICT")
    assert _app_names(admin).count(name) == 1


@pytest.mark.parametrize("name", ["Acme", "1acme", "acme-corp", "", "a" * 64, "acme corp", None, 7])
def test_admin_gets_422_for_an_app_name_outside_the_name_pattern(admin: Caller, name: Any) -> None:
    expect(admin.post("/admin/apps", json={"name": name}), 422, "VALIDATION_FAILED")


def test_admin_gets_422_for_an_app_name_that_would_shadow_the_admin_routes(admin: Caller) -> None:
    expect(admin.post("/admin/apps", json={"name": "admin"}), 422, "VALIDATION_FAILED")


def test_admin_deletes_an_app_and_it_is_gone_with_its_rows(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    org = world.org("O")
    world.role("writer", ["notes:*"])
    member = world.caller(org, ["writer"])
    expect(member.post(world.rows("notes"), json={"body": "hello"}), 201)
    resp = world.admin.delete(world.base)
    assert resp.status_code == 204 and resp.content == b""
    expect(world.admin.get(world.base), 404, "NOT_FOUND")
    assert world.name not in _app_names(world.admin)
    expect(member.get(world.rows("notes")), 404, "NOT_FOUND")
    # The name is free again, and the new app starts empty.
    expect(world.admin.post("/admin/apps", json={"name": world.name}), 201)
    assert expect(world.admin.get(f"{world.base}/tables"), 200) == {"items": []}


def test_admin_changes_token_lifetimes_and_new_logins_use_them(world: AppWorld) -> None:
    app = expect(world.admin.patch(world.base, json={"settings": {"accessTokenTtl": 60}}), 200)
    assert app["settings"] == {"accessTokenTtl": 60, "refreshTokenTtl": 2592000,
                               "allowedOrigins": [], **DEFAULT_ACCOUNT_AND_WEBHOOK_SETTINGS}
    assert expect(world.admin.get(world.base), 200)["settings"]["accessTokenTtl"] == 60
    org = world.org("O")
    world.role("r", [])
    user = world.user()
    world.member(org, user["uid"], ["r"])
    pair = expect(world.admin.client.post(f"/{world.name}/auth/token", json={
        "email": user["email"], "password": user["password"]}), 200)
    assert pair["expires_in"] == 60


@pytest.mark.parametrize("body", [
    {"settings": {"accessTokenTtl": 0}},
    {"settings": {"accessTokenTtl": -5}},
    {"settings": {"accessTokenTtl": "soon"}},
    {"settings": {"sessionColour": "blue"}},
    {"name": "renamed"},
])
def test_admin_gets_422_for_invalid_app_settings_and_nothing_changes(
        world: AppWorld, body: dict[str, Any]) -> None:
    before = expect(world.admin.get(world.base), 200)
    expect(world.admin.patch(world.base, json=body), 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(world.base), 200) == before


@pytest.mark.parametrize("method,suffix,body", [
    ("GET", "", None), ("PATCH", "", {"settings": {"accessTokenTtl": 60}}), ("DELETE", "", None),
    ("GET", "/tables", None), ("POST", "/tables", {"name": "t", "columns": []}),
    ("GET", "/tables/t", None), ("GET", "/orgs", None), ("POST", "/orgs", {"name": "O"}),
    ("GET", "/users", None), ("POST", "/users", {"email": "a@b.io", "password": "long enough"}),
    ("GET", "/roles", None), ("PUT", "/roles/r", {"permissions": []}),
])
def test_admin_gets_404_for_any_route_of_an_app_that_does_not_exist(
        admin: Caller, method: str, suffix: str, body: Any) -> None:
    expect(admin.request(method, f"/admin/apps/{unique('ghost')}{suffix}", json=body),
           404, "NOT_FOUND")


# Who may call /admin ---------------------------------------------------------------------

@pytest.mark.parametrize("header", [None, "Bearer wrong-token", "Basic dGVzdDp0ZXN0",
                                    "Bearer", "test-admin-token"])
def test_caller_without_the_admin_token_gets_401_from_admin_routes(
        http: httpx.Client, header: str | None) -> None:
    headers = {"Authorization": header} if header is not None else {}
    expect(http.get("/admin/apps", headers=headers), 401, "UNAUTHENTICATED")
    expect(http.post("/admin/apps", json={"name": unique("x")}, headers=headers),
           401, "UNAUTHENTICATED")


def test_app_user_with_a_valid_token_gets_401_from_admin_routes(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    org = world.org("O")
    world.role("boss", ["*:*"])
    member = world.caller(org, ["boss"])
    expect(member.get(world.rows("notes")), 200)  # the token itself is good
    for method, path in [("GET", "/admin/apps"), ("GET", world.base),
                         ("GET", f"{world.base}/tables"), ("DELETE", world.base),
                         ("PUT", f"{world.base}/roles/boss")]:
        expect(member.request(method, path, json={"permissions": ["*:*"]}), 401, "UNAUTHENTICATED")
    assert expect(world.admin.get(world.base), 200)["name"] == world.name


def test_admin_gets_415_and_400_for_a_body_that_is_not_json(admin: Caller) -> None:
    name = unique("x")
    expect(admin.post("/admin/apps", content=f'{{"name": "{name}"}}',
                      headers={"Content-Type": "text/plain"}), 415, "UNSUPPORTED_MEDIA_TYPE")
    expect(admin.post("/admin/apps", content='{"name": ',
                      headers={"Content-Type": "application/json"}), 400, "BAD_REQUEST")
    assert name not in _app_names(admin)


# Tables ----------------------------------------------------------------------------------

INVOICES = [
    {"name": "invoice_number", "type": "text", "required": True, "unique": True},
    {"name": "vendor", "type": "reference", "references": "vendors"},
    {"name": "status", "type": "text", "default": "received"},
    {"name": "amount", "type": "numeric"},
]


def test_admin_creates_tables_and_gets_the_definition_with_defaults_filled_in(
        world: AppWorld) -> None:
    world.table("vendors", [{"name": "name", "type": "text"}])
    created = world.table("invoices", INVOICES)
    assert created["name"] == "invoices"
    assert created["operations"] == {"list": True, "read": True, "create": True, "update": True,
                                     "delete": True}
    assert created["softDelete"] is False
    by_name = {c["name"]: c for c in created["columns"]}
    assert [c["name"] for c in created["columns"]] == [c["name"] for c in INVOICES]
    assert by_name["invoice_number"]["required"] is True and by_name["invoice_number"]["unique"]
    assert by_name["amount"]["required"] is False and by_name["amount"]["unique"] is False
    assert by_name["vendor"]["references"] == "vendors"
    assert by_name["status"]["default"] == "received"
    assert expect(world.admin.get(f"{world.base}/tables/invoices"), 200) == created
    listed = expect(world.admin.get(f"{world.base}/tables"), 200)["items"]
    assert [t["name"] for t in listed] == ["vendors", "invoices"]
    assert listed[1] == created


def test_admin_creates_a_table_with_operations_and_soft_delete_as_given(world: AppWorld) -> None:
    created = world.table("logs", [{"name": "line", "type": "text"}],
                          operations={"update": False, "delete": False}, softDelete=True)
    assert created["operations"] == {"list": True, "read": True, "create": True, "update": False,
                                     "delete": False}
    assert created["softDelete"] is True


def test_admin_gets_409_creating_a_table_whose_name_is_taken(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    expect(world.admin.post(f"{world.base}/tables", json={
        "name": "notes", "columns": [{"name": "other", "type": "integer"}]}), 409, "CONFLICT")
    got = expect(world.admin.get(f"{world.base}/tables/notes"), 200)
    assert [c["name"] for c in got["columns"]] == ["body"]


def test_the_same_table_name_is_fine_in_two_different_apps(world: AppWorld, server: ServerProcess,
                                                          http: httpx.Client) -> None:
    other = AppWorld.create(server, http)
    world.table("notes", [{"name": "body", "type": "text"}])
    other.table("notes", [{"name": "title", "type": "text"}])
    assert expect(world.admin.get(f"{world.base}/tables/notes"), 200)["columns"][0]["name"] == "body"


@pytest.mark.parametrize("name", RESERVED)
def test_admin_gets_422_for_a_table_named_with_a_reserved_word(world: AppWorld, name: str) -> None:
    expect(world.admin.post(f"{world.base}/tables", json={
        "name": name, "columns": [{"name": "x", "type": "text"}]}), 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(f"{world.base}/tables"), 200)["items"] == []


@pytest.mark.parametrize("name", RESERVED)
def test_admin_gets_422_for_a_column_named_with_a_reserved_word(world: AppWorld, name: str) -> None:
    expect(world.admin.post(f"{world.base}/tables", json={
        "name": "things", "columns": [{"name": name, "type": "text"}]}), 422, "VALIDATION_FAILED")
    expect(world.admin.get(f"{world.base}/tables/things"), 404, "NOT_FOUND")


@pytest.mark.parametrize("column", ["createdAt", "updatedAt", "created_at", "org_uid"])
def test_admin_gets_422_for_a_column_that_would_clash_with_platform_fields(
        world: AppWorld, column: str) -> None:
    expect(world.admin.post(f"{world.base}/tables", json={
        "name": "things", "columns": [{"name": column, "type": "text"}]}), 422, "VALIDATION_FAILED")


@pytest.mark.parametrize("name", ["Invoices", "2024_sales", "sales-2024", "sales 2024", "_x", "",
                                  "a" * 64, "naïve", "x;drop table y"])
def test_admin_gets_422_for_table_and_column_names_outside_the_pattern(
        world: AppWorld, name: str) -> None:
    expect(world.admin.post(f"{world.base}/tables", json={
        "name": name, "columns": [{"name": "x", "type": "text"}]}), 422, "VALIDATION_FAILED")
    expect(world.admin.post(f"{world.base}/tables", json={
        "name": "things", "columns": [{"name": name, "type": "text"}]}), 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(f"{world.base}/tables"), 200)["items"] == []


def test_names_of_the_longest_allowed_length_work_end_to_end(world: AppWorld) -> None:
    table, column = "t" * 63, "c" * 63
    world.table(table, [{"name": column, "type": "text", "unique": True}])
    org = world.org("O")
    world.role("r", [f"{table}:*"])
    member = world.caller(org, ["r"])
    row = expect(member.post(world.rows(table), json={column: "v"}), 201)
    assert row[column] == "v"
    expect(member.post(world.rows(table), json={column: "v"}), 409, "CONFLICT")
    one = f"{world.rows(table)}/{row['uid']}"
    assert expect(member.patch(one, json={column: "w"}), 200)[column] == "w"
    assert expect(member.get(world.rows(table), params={column: "w"}), 200)["items"][0][
        "uid"] == row["uid"]
    expect(member.delete(one), 204)
    expect(member.get(one), 404, "NOT_FOUND")


@pytest.mark.parametrize("columns", [
    [{"name": "x", "type": "text"}, {"name": "x", "type": "integer"}],
    [{"name": "x", "type": "money"}],
    [{"name": "x", "type": "reference"}],
    [{"name": "x", "type": "text", "references": "things"}],
    [{"name": "x", "type": "reference", "references": "nowhere"}],
    [{"name": "x", "type": "integer", "default": "ten"}],
    [{"name": "x", "type": "boolean", "default": "yes"}],
    [{"name": "x", "type": "text", "colour": "red"}],
    [{"name": "vendor", "type": "reference", "references": "vendors"},
     {"name": "vendor_uid", "type": "text"}],
    "not a list",
])
def test_admin_gets_422_for_a_malformed_column_list_and_no_table_is_made(
        world: AppWorld, columns: Any) -> None:
    world.table("vendors", [{"name": "name", "type": "text"}])
    expect(world.admin.post(f"{world.base}/tables", json={"name": "things", "columns": columns}),
           422, "VALIDATION_FAILED")
    expect(world.admin.get(f"{world.base}/tables/things"), 404, "NOT_FOUND")


@pytest.mark.parametrize("body", [
    {"name": "things", "columns": [], "operations": {"list": "sometimes"}},
    {"name": "things", "columns": [], "operations": {"archive": True}},
    {"name": "things", "columns": [], "softDelete": "sometimes"},
    {"name": "things", "columns": [], "owner": "me"},
    ["things"],
])
def test_admin_gets_422_for_a_malformed_table_definition(world: AppWorld, body: Any) -> None:
    expect(world.admin.post(f"{world.base}/tables", json=body), 422, "VALIDATION_FAILED")
    expect(world.admin.get(f"{world.base}/tables/things"), 404, "NOT_FOUND")


def test_a_table_may_reference_itself(world: AppWorld) -> None:
    world.table("people", [{"name": "name", "type": "text"},
                           {"name": "manager", "type": "reference", "references": "people"}])
    org = world.org("O")
    world.role("r", ["people:*"])
    member = world.caller(org, ["r"])
    boss = expect(member.post(world.rows("people"), json={"name": "Ada"}), 201)
    clerk = expect(member.post(world.rows("people"),
                               json={"name": "Bob", "manager_uid": boss["uid"]}), 201)
    assert clerk["manager_uid"] == boss["uid"]


def test_admin_gets_404_for_a_table_that_does_not_exist(world: AppWorld) -> None:
    for method in ("GET", "PATCH", "DELETE"):
        expect(world.admin.request(method, f"{world.base}/tables/ghost",
                                   json={"operations": {"list": False}}), 404, "NOT_FOUND")


def test_admin_switches_operations_off_and_on_and_the_next_request_follows(
        world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    org = world.org("O")
    world.role("writer", ["notes:*"])
    member = world.caller(org, ["writer"])
    expect(member.post(world.rows("notes"), json={"body": "a"}), 201)
    changed = expect(world.admin.patch(f"{world.base}/tables/notes",
                                       json={"operations": {"create": False}}), 200)
    assert changed["operations"]["create"] is False and changed["operations"]["list"] is True
    expect(member.post(world.rows("notes"), json={"body": "b"}), 403, "TABLE_LOCKED")
    expect(member.get(world.rows("notes")), 200)
    expect(world.admin.patch(f"{world.base}/tables/notes", json={"operations": {"create": True}}),
           200)
    expect(member.post(world.rows("notes"), json={"body": "c"}), 201)
    assert [r["body"] for r in expect(member.get(world.rows("notes")), 200)["items"]] == ["a", "c"]


def test_admin_adds_columns_and_rows_show_them_as_null_until_written(world: AppWorld) -> None:
    world.table("vendors", [{"name": "name", "type": "text"}])
    world.table("notes", [{"name": "body", "type": "text"}])
    org = world.org("O")
    world.role("writer", ["notes:*", "vendors:*"])
    member = world.caller(org, ["writer"])
    old = expect(member.post(world.rows("notes"), json={"body": "old"}), 201)
    changed = expect(world.admin.patch(f"{world.base}/tables/notes", json={"addColumns": [
        {"name": "priority", "type": "integer", "default": 3},
        {"name": "vendor", "type": "reference", "references": "vendors"},
        {"name": "code", "type": "text", "unique": True},
    ]}), 200)
    assert [c["name"] for c in changed["columns"]] == ["body", "priority", "vendor", "code"]
    got = expect(member.get(f"{world.rows('notes')}/{old['uid']}"), 200)
    assert got["priority"] is None and got["vendor_uid"] is None and got["code"] is None
    vendor = expect(member.post(world.rows("vendors"), json={"name": "V"}), 201)
    new = expect(member.post(world.rows("notes"), json={
        "body": "new", "vendor_uid": vendor["uid"], "code": "A"}), 201)
    assert new["priority"] == 3 and new["vendor_uid"] == vendor["uid"]
    # The added constraints are real: uniqueness and the reference are enforced.
    expect(member.post(world.rows("notes"), json={"body": "x", "code": "A"}), 409, "CONFLICT")
    expect(member.post(world.rows("notes"), json={"body": "x", "vendor_uid": old["uid"]}),
           409, "CONFLICT")


def test_admin_drops_a_column_and_it_disappears_from_rows_and_writes(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}, {"name": "secret", "type": "text"}])
    org = world.org("O")
    world.role("writer", ["notes:*"])
    member = world.caller(org, ["writer"])
    row = expect(member.post(world.rows("notes"), json={"body": "b", "secret": "s"}), 201)
    changed = expect(world.admin.patch(f"{world.base}/tables/notes",
                                       json={"dropColumns": ["secret"]}), 200)
    assert [c["name"] for c in changed["columns"]] == ["body"]
    got = expect(member.get(f"{world.rows('notes')}/{row['uid']}"), 200)
    assert "secret" not in got and got["body"] == "b"
    expect(member.post(world.rows("notes"), json={"body": "c", "secret": "s"}),
           422, "VALIDATION_FAILED")
    expect(member.get(world.rows("notes"), params={"secret": "s"}), 400, "BAD_REQUEST")
    # A dropped name can be added again, fresh and empty.
    expect(world.admin.patch(f"{world.base}/tables/notes",
                             json={"addColumns": [{"name": "secret", "type": "integer"}]}), 200)
    assert expect(member.get(f"{world.rows('notes')}/{row['uid']}"), 200)["secret"] is None


def test_admin_gets_409_adding_a_column_whose_name_is_taken(world: AppWorld) -> None:
    world.table("vendors", [{"name": "name", "type": "text"}])
    world.table("notes", [{"name": "body", "type": "text"},
                          {"name": "vendor", "type": "reference", "references": "vendors"}])
    for column in ({"name": "body", "type": "integer"}, {"name": "vendor_uid", "type": "text"}):
        expect(world.admin.patch(f"{world.base}/tables/notes", json={"addColumns": [column]}),
               409, "CONFLICT")
    got = expect(world.admin.get(f"{world.base}/tables/notes"), 200)
    assert [(c["name"], c["type"]) for c in got["columns"]] == [("body", "text"),
                                                               ("vendor", "reference")]


@pytest.mark.parametrize("body", [
    {"dropColumns": ["ghost"]},
    {"dropColumns": "body"},
    {"addColumns": [{"name": "order", "type": "text"}]},
    {"addColumns": [{"name": "x", "type": "money"}]},
    {"addColumns": [{"name": "x", "type": "reference", "references": "nowhere"}]},
    {"operations": {"archive": False}},
    {"rename": "other"},
])
def test_admin_gets_422_for_an_invalid_table_change_and_nothing_changes(
        world: AppWorld, body: dict[str, Any]) -> None:
    before = world.table("notes", [{"name": "body", "type": "text"}])
    expect(world.admin.patch(f"{world.base}/tables/notes", json=body), 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(f"{world.base}/tables/notes"), 200) == before


def test_admin_deletes_a_table_and_its_rows_route_is_404(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    org = world.org("O")
    world.role("writer", ["notes:*"])
    member = world.caller(org, ["writer"])
    expect(member.post(world.rows("notes"), json={"body": "b"}), 201)
    resp = world.admin.delete(f"{world.base}/tables/notes")
    assert resp.status_code == 204 and resp.content == b""
    expect(world.admin.get(f"{world.base}/tables/notes"), 404, "NOT_FOUND")
    expect(member.get(world.rows("notes")), 404, "NOT_FOUND")
    expect(member.post(world.rows("notes"), json={"body": "b"}), 404, "NOT_FOUND")
    # Recreated under the same name, the table starts empty.
    world.table("notes", [{"name": "body", "type": "text"}])
    assert expect(member.get(world.rows("notes")), 200)["items"] == []


def test_admin_gets_409_deleting_a_table_another_table_references(world: AppWorld) -> None:
    world.table("vendors", [{"name": "name", "type": "text"}])
    world.table("invoices", INVOICES)
    expect(world.admin.delete(f"{world.base}/tables/vendors"), 409, "CONFLICT")
    expect(world.admin.get(f"{world.base}/tables/vendors"), 200)
    # Once the referencing column is dropped, the table may go.
    expect(world.admin.patch(f"{world.base}/tables/invoices", json={"dropColumns": ["vendor"]}), 200)
    assert world.admin.delete(f"{world.base}/tables/vendors").status_code == 204
