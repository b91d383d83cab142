"""OpenAPI documents (contract section 6): the platform's, and each app's own.

Callers: anyone (platform document), the platform admin and an app's users (app document),
and callers without a token or with a token of another app (refused).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema_rs
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess

ROW_ROUTES = {"": {"get", "post"}, "/{uid}": {"get", "patch", "delete"}, "/subscribe": {"get"}}


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    """Whatever a test does, the server never logs a traceback (an unexpected error)."""
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def shop(world: AppWorld) -> tuple[AppWorld, Caller]:
    world.table("vendors", [{"name": "name", "type": "text", "required": True}])
    world.table("invoices", [
        {"name": "invoice_number", "type": "text", "required": True, "unique": True},
        {"name": "vendor", "type": "reference", "references": "vendors"},
        {"name": "status", "type": "text", "default": "received"},
        {"name": "amount", "type": "numeric"},
        {"name": "qty", "type": "integer"},
        {"name": "paid", "type": "boolean"},
        {"name": "due_at", "type": "timestamp"},
        {"name": "due_on", "type": "date"},
        {"name": "ref", "type": "uuid"},
        {"name": "meta", "type": "json"},
    ])
    world.role("writer", ["*:*"])
    return world, world.caller(world.org("Northwind"), ["writer"])


@pytest.fixture
def admin_client(server: ServerProcess, http: httpx.Client) -> Caller:
    return Caller(http, server.admin_token)


def _doc(caller: Caller, world: AppWorld) -> dict[str, Any]:
    return dict(expect(caller.get(f"/{world.name}/openapi.json"), 200))


def _validator(doc: dict[str, Any], schema_name: str) -> Any:
    """A validator for one component schema, with the document's `$ref`s resolvable."""
    root = {"$ref": f"#/components/schemas/{schema_name}", "components": doc["components"]}
    return jsonschema_rs.Draft202012Validator(root, validate_formats=True)


# Platform document -----------------------------------------------------------------------

def test_anyone_gets_the_platform_document_describing_admin_session_and_table_routes(
        http: httpx.Client) -> None:
    doc = expect(http.get("/openapi.json"), 200)
    assert doc["openapi"].startswith("3.")
    paths = doc["paths"]
    for path, methods in {
        "/admin/apps": {"get", "post"},
        "/admin/apps/{app}": {"get", "patch", "delete"},
        "/admin/apps/{app}/tables": {"get", "post"},
        "/admin/apps/{app}/tables/{table}": {"get", "patch", "delete"},
        "/admin/apps/{app}/orgs": {"get", "post"},
        "/admin/apps/{app}/users": {"get", "post"},
        "/admin/apps/{app}/orgs/{org}/members/{user}": {"put", "delete"},
        "/admin/apps/{app}/roles": {"get"},
        "/admin/apps/{app}/roles/{role}": {"get", "put", "delete"},
        "/{app}/auth/token": {"post"},
        "/{app}/auth/refresh": {"post"},
        "/{app}/auth/logout": {"post"},
        "/{app}/openapi.json": {"get"},
        "/{app}/autocrud/{table}": {"get", "post"},
        "/{app}/autocrud/{table}/{uid}": {"get", "patch", "delete"},
    }.items():
        assert path in paths, path
        assert methods <= set(paths[path]), (path, set(paths[path]))


# App document: who may get it ------------------------------------------------------------

def test_admin_and_a_member_of_the_app_get_the_same_app_document(
        shop: tuple[AppWorld, Caller]) -> None:
    world, member = shop
    as_admin, as_member = _doc(world.admin, world), _doc(member, world)
    assert as_admin == as_member
    assert as_admin["openapi"].startswith("3.")
    assert world.name in as_admin["info"]["title"]


def test_a_member_without_any_permission_gets_a_document_with_no_tables(
        shop: tuple[AppWorld, Caller]) -> None:
    world, _ = shop
    world.role("nobody", [])
    member = world.caller(world.orgs["Northwind"], ["nobody"])
    doc = _doc(member, world)
    assert doc["paths"] == {}
    assert set(doc["components"]["schemas"]) == {"Error"}
    assert "invoices" not in json.dumps(doc) and "vendors" not in json.dumps(doc)


def _tables(doc: dict[str, Any]) -> set[str]:
    return {name for name in doc["components"]["schemas"] if "." not in name and name != "Error"}


@pytest.mark.parametrize("permissions", [["invoices:read_list"], ["invoices:read"],
                                         ["invoices:*"]])
def test_a_member_who_may_read_one_table_sees_only_that_table(
        shop: tuple[AppWorld, Caller], permissions: list[str]) -> None:
    world, _ = shop
    world.role("invoice_reader", permissions)
    member = world.caller(world.orgs["Northwind"], ["invoice_reader"])
    doc = _doc(member, world)
    assert _tables(doc) == {"invoices"}
    assert {p.split("/")[3] for p in doc["paths"] if "/autocrud/" in p} == {"invoices"}
    multi = doc["paths"][f"/{world.name}/subscribe"]["get"]["parameters"][0]  # section 5b
    assert multi["schema"]["items"]["enum"] == ["invoices"]
    assert "vendors" not in json.dumps(doc)  # nor in the multi-table stream's `tables`


@pytest.mark.parametrize("permissions", [["vendors:create"], ["vendors:update", "vendors:delete"]])
def test_a_member_who_may_only_write_a_table_does_not_see_it(
        shop: tuple[AppWorld, Caller], permissions: list[str]) -> None:
    world, _ = shop
    world.role("vendor_writer", ["invoices:read", *permissions])
    member = world.caller(world.orgs["Northwind"], ["vendor_writer"])
    assert _tables(_doc(member, world)) == {"invoices"}


def test_a_member_with_two_roles_sees_the_tables_either_lets_it_read(
        shop: tuple[AppWorld, Caller]) -> None:
    world, _ = shop
    world.role("reads_invoices", ["invoices:read_list"])
    world.role("reads_vendors", ["vendors:read"])
    member = world.caller(world.orgs["Northwind"], ["reads_invoices", "reads_vendors"])
    assert _tables(_doc(member, world)) == {"invoices", "vendors"}


def test_the_admin_sees_every_table_whatever_the_members_may_read(
        shop: tuple[AppWorld, Caller]) -> None:
    world, _ = shop
    world.role("nobody", [])
    world.caller(world.orgs["Northwind"], ["nobody"])
    assert _tables(_doc(world.admin, world)) == {"invoices", "vendors"}


def test_a_members_document_follows_a_role_change_on_the_next_request(
        shop: tuple[AppWorld, Caller]) -> None:
    world, _ = shop
    world.role("clerk", ["vendors:read"])
    member = world.caller(world.orgs["Northwind"], ["clerk"])
    assert _tables(_doc(member, world)) == {"vendors"}
    world.role("clerk", ["invoices:read_list"])
    assert _tables(_doc(member, world)) == {"invoices"}
    world.role("clerk", [])
    assert _tables(_doc(member, world)) == set()


@pytest.mark.parametrize("header", [None, "Bearer not-a-token", "Bearer wrong-admin-token"])
def test_caller_without_a_valid_token_gets_401_for_the_app_document(
        shop: tuple[AppWorld, Caller], http: httpx.Client, header: str | None) -> None:
    world, _ = shop
    headers = {"Authorization": header} if header else {}
    expect(http.get(f"/{world.name}/openapi.json", headers=headers), 401, "UNAUTHENTICATED")


def test_member_of_another_app_gets_401_for_this_apps_document(
        shop: tuple[AppWorld, Caller], server: ServerProcess, http: httpx.Client) -> None:
    world, _ = shop
    other = AppWorld.create(server, http)
    other.role("r", [])
    stranger = other.caller(other.org("Elsewhere"), ["r"])
    expect(stranger.get(f"/{world.name}/openapi.json"), 401, "UNAUTHENTICATED")
    assert "invoices" not in _doc(stranger, other)["components"]["schemas"]


def test_refresh_token_used_for_the_app_document_gets_401(shop: tuple[AppWorld, Caller]) -> None:
    world, member = shop
    assert member.refresh_token is not None
    expect(Caller(member.client, member.refresh_token).get(f"/{world.name}/openapi.json"),
           401, "UNAUTHENTICATED")


def test_admin_gets_404_for_the_document_of_an_app_that_does_not_exist(admin_client: Caller) -> None:
    expect(admin_client.get("/no_such_app_z/openapi.json"), 404, "NOT_FOUND")


# App document: what it says --------------------------------------------------------------

def test_the_app_document_has_one_row_schema_and_the_routes_for_each_table(
        shop: tuple[AppWorld, Caller]) -> None:
    world, _ = shop
    doc = _doc(world.admin, world)
    schemas = doc["components"]["schemas"]
    assert {"vendors", "invoices"} <= set(schemas)
    invoices = schemas["invoices"]["properties"]
    assert list(invoices) == ["uid", "invoice_number", "vendor_uid", "status", "amount", "qty",
                              "paid", "due_at", "due_on", "ref", "meta", "createdAt", "updatedAt"]
    for table in ("vendors", "invoices"):
        for suffix, methods in ROW_ROUTES.items():
            path = f"/{world.name}/autocrud/{table}{suffix}"
            assert path in doc["paths"], path
            assert methods <= set(doc["paths"][path]), (path, set(doc["paths"][path]))
    assert not any("/autocrud/" not in p for p in doc["paths"]
                   if p != f"/{world.name}/subscribe")  # the multi-table stream (5b)


def test_real_rows_match_the_documented_row_schema_and_bodies_the_input_schema(
        shop: tuple[AppWorld, Caller]) -> None:
    world, member = shop
    doc = _doc(member, world)
    vendor = expect(member.post(world.rows("vendors"), json={"name": "Acme"}), 201)
    body = {"invoice_number": "A-1", "vendor_uid": vendor["uid"], "amount": "8760.00",
            "qty": 2**62, "paid": False, "due_at": "2026-01-31T12:00:00Z",
            "due_on": "2026-01-31", "ref": vendor["uid"], "meta": {"any": ["thing"]}}
    assert _validator(doc, "invoices.create").is_valid(body)
    row = expect(member.post(world.rows("invoices"), json=body), 201)
    row_schema = _validator(doc, "invoices")
    row_schema.validate(row)
    row_schema.validate(expect(member.get(f"{world.rows('invoices')}/{row['uid']}"), 200))
    _validator(doc, "vendors").validate(vendor)
    assert set(row) == set(doc["components"]["schemas"]["invoices"]["properties"])
    # A numeric is documented as a string, as rows carry it.
    assert not row_schema.is_valid({**row, "amount": 8760})


def test_the_input_schema_refuses_what_the_server_refuses(shop: tuple[AppWorld, Caller]) -> None:
    world, member = shop
    doc = _doc(member, world)
    create = _validator(doc, "invoices.create")
    for bad in ({"status": "x"},  # the required invoice_number is missing
                {"invoice_number": "A-1", "colour": "red"},  # unknown column
                {"invoice_number": 5}):  # wrong type
        assert not create.is_valid(bad), bad
        expect(member.post(world.rows("invoices"), json=bad), 422, "VALIDATION_FAILED")
    # `status` has a default, so it is not required on create.
    assert create.is_valid({"invoice_number": "A-2"})
    expect(member.post(world.rows("invoices"), json={"invoice_number": "A-2"}), 201)


def test_the_app_document_follows_table_changes_on_the_next_request(
        shop: tuple[AppWorld, Caller]) -> None:
    world, member = shop
    expect(world.admin.patch(f"{world.base}/tables/invoices", json={
        "dropColumns": ["meta"], "addColumns": [{"name": "notes", "type": "text"}]}), 200)
    world.table("tags", [{"name": "label", "type": "text"}])
    doc = _doc(member, world)
    props = doc["components"]["schemas"]["invoices"]["properties"]
    assert "notes" in props and "meta" not in props
    assert "tags" in doc["components"]["schemas"]
    assert f"/{world.name}/autocrud/tags" in doc["paths"]
    assert world.admin.delete(f"{world.base}/tables/tags").status_code == 204
    doc = _doc(member, world)
    assert "tags" not in doc["components"]["schemas"]
    assert f"/{world.name}/autocrud/tags" not in doc["paths"]


def test_an_app_without_tables_has_a_document_with_no_table_routes(world: AppWorld) -> None:
    doc = _doc(world.admin, world)
    assert doc["paths"] == {}
