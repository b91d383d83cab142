"""The platform routes' request bodies, as a client meets them: declared in `/openapi.json`,
parsed strictly, and refused with the contract's codes (415, 400, 422 naming the field, 401 before
any of them for a caller without the admin token), never a 5xx and never half-written.

Callers: anyone (the platform document), the platform admin, a caller without credentials.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema_rs
import pytest

from authoric.catalog.types import MAX_JSON_DEPTH
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess

# Every platform route that takes a JSON body.
BODY_ROUTES = [
    ("post", "/admin/apps"),
    ("patch", "/admin/apps/{app}"),
    ("post", "/admin/apps/{app}/tables"),
    ("patch", "/admin/apps/{app}/tables/{table}"),
    ("post", "/admin/apps/{app}/orgs"),
    ("post", "/admin/apps/{app}/users"),
    ("put", "/admin/apps/{app}/orgs/{org}/members/{user}"),
    ("put", "/admin/apps/{app}/roles/{role}"),
    ("post", "/{app}/auth/token"),
    ("post", "/{app}/auth/refresh"),
    ("post", "/{app}/auth/logout"),
]

# The generic row writes: a JSON object of the app's columns (the app's own document declares
# which), on the REST routes and the operator's rows routes.
ROW_BODY_ROUTES = [
    ("post", "/{app}/autocrud/{table}"),
    ("patch", "/{app}/autocrud/{table}"),
    ("patch", "/{app}/autocrud/{table}/{uid}"),
    ("post", "/admin/apps/{app}/tables/{table}/rows"),
    ("patch", "/admin/apps/{app}/tables/{table}/rows/{uid}"),
]
BULK_UPDATE = ("patch", "/{app}/autocrud/{table}")  # the columns in {"set": ...}
WRITE_METHODS = ("post", "put", "patch")
# Actions that take no body at all (contract section 8: rotate a webhook's secret; the
# console's test send). Every other write route declares the body it takes.
BODYLESS_ACTIONS = [
    ("post", "/admin/apps/{app}/webhooks/{uid}/secret"),
    ("post", "/admin/apps/{app}/webhooks/{uid}/test"),
]


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture(scope="module")
def platform_doc(server: ServerProcess) -> dict[str, Any]:
    return dict(expect(httpx.get(f"{server.url}/openapi.json"), 200))


def _body_schema(doc: dict[str, Any], method: str, path: str) -> Any:
    body = doc["paths"][path][method]["requestBody"]
    assert body["required"] is True
    return body["content"]["application/json"]["schema"]


def _validator(doc: dict[str, Any], method: str, path: str) -> Any:
    return jsonschema_rs.Draft202012Validator(_body_schema(doc, method, path))


def _fields(response: httpx.Response) -> list[str]:
    body = expect(response, 422, "VALIDATION_FAILED")
    return [e["field"] for e in body["error"]["details"]["errors"]]


# The platform document ------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_anyone_reads_in_the_platform_document_the_body_each_route_takes(
        platform_doc: dict[str, Any], method: str, path: str) -> None:
    schema = _body_schema(platform_doc, method, path)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["properties"]
    errors = platform_doc["paths"][path][method]["responses"]
    for status in ("400", "415", "422"):
        error = errors[status]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/ErrorBody"}, (status, error)


@pytest.mark.parametrize(("method", "path"), ROW_BODY_ROUTES)
def test_anyone_reads_in_the_platform_document_that_each_row_write_takes_an_object_of_columns(
        platform_doc: dict[str, Any], method: str, path: str) -> None:
    schema = _body_schema(platform_doc, method, path)
    assert schema["type"] == "object" and "/{app}/openapi.json" in schema["description"]
    columns = schema["properties"]["set"] if (method, path) == BULK_UPDATE else schema
    assert columns["type"] == "object" and columns["additionalProperties"] is True
    errors = platform_doc["paths"][path][method]["responses"]
    for status in ("400", "415", "422"):
        error = errors[status]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/ErrorBody"}, (status, error)


def test_every_write_route_in_the_platform_document_declares_the_body_it_takes(
        platform_doc: dict[str, Any]) -> None:
    undeclared = [(method, path) for path, operations in platform_doc["paths"].items()
                  for method, operation in operations.items()
                  if method in WRITE_METHODS and not operation.get("requestBody", {}).get(
                      "content")]
    assert undeclared == BODYLESS_ACTIONS
    for method, path in BODY_ROUTES + ROW_BODY_ROUTES:
        assert "application/json" in platform_doc["paths"][path][method]["requestBody"]["content"]
    for path in ("/{app}/autocrud/{table}/import", "/admin/apps/{app}/tables/{table}/rows/import"):
        assert "text/csv" in platform_doc["paths"][path]["post"]["requestBody"]["content"]


def test_row_bodies_that_fit_the_platform_document_are_written_by_member_and_operator(
        world: AppWorld, platform_doc: dict[str, Any]) -> None:
    world.table("notes", [{"name": "body", "type": "text"}, {"name": "n", "type": "integer"}])
    world.role("writer", ["notes:*"])
    org = world.org("North")
    member = world.caller(org, ["writer"])
    fits = {route: _validator(platform_doc, *route) for route in ROW_BODY_ROUTES}
    rows, admin_rows = world.rows("notes"), f"{world.base}/tables/notes/rows"

    body: dict[str, Any] = {"body": "first", "n": 1}
    fits[("post", "/{app}/autocrud/{table}")].validate(body)
    uid = expect(member.post(rows, json=body), 201)["uid"]
    body = {"n": 2}
    fits[("patch", "/{app}/autocrud/{table}/{uid}")].validate(body)
    expect(member.patch(f"{rows}/{uid}", json=body), 200)
    assert not fits[BULK_UPDATE].is_valid({"body": "every"})  # as the server refuses it
    expect(member.patch(rows, params={"n": 2}, json={"body": "every"}), 422, "VALIDATION_FAILED")
    body = {"set": {"body": "every"}}
    fits[BULK_UPDATE].validate(body)
    expect(member.patch(rows, params={"n": 2}, json=body), 200)
    row = expect(member.get(f"{rows}/{uid}"), 200)
    assert (row["body"], row["n"]) == ("every", 2)

    body = {"org": org, "body": "by the operator"}
    fits[("post", "/admin/apps/{app}/tables/{table}/rows")].validate(body)
    made = expect(world.admin.post(admin_rows, json=body), 201)
    body = {"n": 7}
    fits[("patch", "/admin/apps/{app}/tables/{table}/rows/{uid}")].validate(body)
    assert expect(world.admin.patch(f"{admin_rows}/{made['uid']}", json=body), 200)["n"] == 7


def test_the_operator_creating_a_row_without_its_org_is_refused_as_the_document_says(
        world: AppWorld, platform_doc: dict[str, Any]) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    world.org("North")
    admin_rows = f"{world.base}/tables/notes/rows"
    body = {"body": "whose?"}
    assert not _validator(platform_doc, "post", "/admin/apps/{app}/tables/{table}/rows").is_valid(
        body)
    expect(world.admin.post(admin_rows, json=body), 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(admin_rows), 200)["items"] == []


def test_the_platform_document_declares_the_settings_an_app_takes_allowed_origins_included(
        platform_doc: dict[str, Any]) -> None:
    settings = _body_schema(platform_doc, "patch", "/admin/apps/{app}")["properties"]["settings"]
    assert set(settings["properties"]) == {
        "accessTokenTtl", "refreshTokenTtl", "allowedOrigins", "signUp", "emailVerification",
        "orgCreation", "orgOwnerRoles", "passwordMinLength", "links", "mailFrom", "mailTemplates",
        "webhookRetryHours"}
    origins = settings["properties"]["allowedOrigins"]
    assert origins["type"] == "array" and "pattern" in origins["items"]
    # The answer of the app routes is declared too, settings included.
    answer = platform_doc["paths"]["/admin/apps/{app}"]["get"]["responses"]["200"]
    view = answer["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    stored = platform_doc["components"]["schemas"][view]["properties"]["settings"]["$ref"]
    assert "allowedOrigins" in platform_doc["components"]["schemas"][stored.rsplit("/", 1)[1]][
        "properties"]


def test_bodies_from_the_docs_fit_their_declared_schemas(platform_doc: dict[str, Any]) -> None:
    examples = {
        ("post", "/admin/apps"): {"name": "acme"},
        ("patch", "/admin/apps/{app}"): {"settings": {
            "accessTokenTtl": 900, "refreshTokenTtl": 2592000,
            "allowedOrigins": ["https://app.example.com"]}},
        ("post", "/admin/apps/{app}/tables"): {
            "name": "invoices",
            "columns": [{"name": "invoice_number", "type": "text", "required": True,
                         "unique": True},
                        {"name": "vendor", "type": "reference", "references": "vendors"},
                        {"name": "status", "type": "text", "default": "received"},
                        {"name": "amount", "type": "numeric"}],
            "operations": {"list": True, "read": True, "create": True, "update": True,
                           "delete": True},
            "softDelete": False},
        ("patch", "/admin/apps/{app}/tables/{table}"): {
            "operations": {"delete": False}, "addColumns": [{"name": "n", "type": "integer"}],
            "dropColumns": ["status"]},
        ("post", "/admin/apps/{app}/orgs"): {"name": "Northwind"},
        ("post", "/admin/apps/{app}/users"): {"email": "a@x.io", "password": "long enough"},
        ("put", "/admin/apps/{app}/orgs/{org}/members/{user}"): {"roles": ["clerk"]},
        ("put", "/admin/apps/{app}/roles/{role}"): {
            "permissions": ["invoices:read_list", "invoices:read", "vendors:*"],
            "rowPolicies": {"invoices": {"status": {"ne": "draft"}}},
            "redact": {"invoices": ["amount"]}},
        ("post", "/{app}/auth/token"): {"email": "a@x.io", "password": "pw", "org": "0199"},
        ("post", "/{app}/auth/refresh"): {"refresh_token": "x.y.z"},
        ("post", "/{app}/auth/logout"): {"refresh_token": "x.y.z"},
    }
    assert set(examples) == set(BODY_ROUTES)
    for (method, path), body in examples.items():
        _validator(platform_doc, method, path).validate(body)


# Bad bodies, as the admin sends them ----------------------------------------------------------

@pytest.fixture
def org_and_user(world: AppWorld) -> tuple[str, str]:
    world.table("notes", [{"name": "body", "type": "text"}])
    return world.org("North"), world.user()["uid"]


def _urls(world: AppWorld, org: str, user: str) -> dict[tuple[str, str], str]:
    return {
        ("post", "/admin/apps"): "/admin/apps",
        ("patch", "/admin/apps/{app}"): world.base,
        ("post", "/admin/apps/{app}/tables"): f"{world.base}/tables",
        ("patch", "/admin/apps/{app}/tables/{table}"): f"{world.base}/tables/notes",
        ("post", "/admin/apps/{app}/orgs"): f"{world.base}/orgs",
        ("post", "/admin/apps/{app}/users"): f"{world.base}/users",
        ("put", "/admin/apps/{app}/orgs/{org}/members/{user}"):
            f"{world.base}/orgs/{org}/members/{user}",
        ("put", "/admin/apps/{app}/roles/{role}"): f"{world.base}/roles/clerk",
        ("post", "/{app}/auth/token"): f"/{world.name}/auth/token",
        ("post", "/{app}/auth/refresh"): f"/{world.name}/auth/refresh",
        ("post", "/{app}/auth/logout"): f"/{world.name}/auth/logout",
    }


def test_admin_gets_415_for_a_body_that_is_not_application_json_on_every_route(
        world: AppWorld, org_and_user: tuple[str, str]) -> None:
    for (method, _), url in _urls(world, *org_and_user).items():
        response = world.admin.request(method.upper(), url, content=b'{"name": "x"}',
                                       headers={"Content-Type": "text/plain"})
        expect(response, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe\x00"])
def test_admin_gets_400_for_bytes_that_are_not_json_on_every_route(
        world: AppWorld, org_and_user: tuple[str, str], raw: bytes) -> None:
    for (method, _), url in _urls(world, *org_and_user).items():
        response = world.admin.request(method.upper(), url, content=raw,
                                       headers={"Content-Type": "application/json"})
        expect(response, 400, "BAD_REQUEST")


@pytest.mark.parametrize("raw", [b"[" * 100_000 + b"]" * 100_000,
                                 b'{"name": ' + b"[" * 1000 + b"]" * 1000 + b"}"])
def test_admin_gets_422_for_json_nested_past_the_parser_on_every_route(
        world: AppWorld, org_and_user: tuple[str, str], raw: bytes) -> None:
    for (method, _), url in _urls(world, *org_and_user).items():
        response = world.admin.request(method.upper(), url, content=raw,
                                       headers={"Content-Type": "application/json"})
        body = expect(response, 422, "VALIDATION_FAILED")
        assert body["error"]["details"].get("reason") == "too_deep", (method, url, body)


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("post", "/admin/apps", {"name": ["acme"]}, "name"),
    ("patch", "/admin/apps/{app}", {"settings": {"accessTokenTtl": "900"}},
     "settings.accessTokenTtl"),
    ("patch", "/admin/apps/{app}", {"settings": {"allowedOrigins": ["https://a.io/x"]}},
     "settings.allowedOrigins.0"),
    ("post", "/admin/apps/{app}/tables", {"name": "t", "columns": [{"name": "x", "type": "text",
                                                                    "unique": "yes"}]},
     "columns.0.unique"),
    ("patch", "/admin/apps/{app}/tables/{table}", {"addColumns": [{"type": "text"}]},
     "addColumns.0.name"),
    ("post", "/admin/apps/{app}/orgs", {"name": "N", "country": "NL"}, "country"),
    ("post", "/admin/apps/{app}/users", {"email": "a@b.io"}, "password"),
    ("put", "/admin/apps/{app}/orgs/{org}/members/{user}", {"roles": [True]}, "roles.0"),
    ("put", "/admin/apps/{app}/roles/{role}", {"redact": {"notes": "body"}}, "redact.notes"),
    ("post", "/{app}/auth/token", {"email": "a@b.io", "password": ["pw"]}, "password"),
    ("post", "/{app}/auth/refresh", {"refresh_token": None}, "refresh_token"),
    ("post", "/{app}/auth/logout", {"token": "x"}, "token"),
])
def test_admin_gets_422_naming_the_field_for_a_body_of_the_wrong_shape_and_nothing_changes(
        world: AppWorld, org_and_user: tuple[str, str], platform_doc: dict[str, Any],
        method: str, path: str, body: dict[str, Any], field: str) -> None:
    url = _urls(world, *org_and_user)[(method, path)]
    before = [expect(world.admin.get(world.base + suffix), 200)
              for suffix in ("", "/tables", "/orgs", "/users", "/roles")]
    assert not _validator(platform_doc, method, path).is_valid(body)
    assert field in _fields(world.admin.request(method.upper(), url, json=body))
    after = [expect(world.admin.get(world.base + suffix), 200)
             for suffix in ("", "/tables", "/orgs", "/users", "/roles")]
    assert after == before


def test_a_caller_without_the_admin_token_gets_401_whatever_body_it_sends(
        world: AppWorld, http: httpx.Client) -> None:
    for raw, content_type in ((b"{not json", "application/json"), (b"x", "text/plain"),
                              (b'{"name": 5}', "application/json")):
        for headers in ({}, {"Authorization": "Bearer not-the-admin-token"}):
            response = http.post(f"{world.base}/orgs", content=raw,
                                 headers={**headers, "Content-Type": content_type})
            expect(response, 401, "UNAUTHENTICATED")


def test_admin_gets_422_for_a_json_column_default_nested_past_the_cap_and_no_table_is_made(
        world: AppWorld) -> None:
    deep: Any = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    response = world.admin.post(f"{world.base}/tables", json={"name": "docs", "columns": [
        {"name": "doc", "type": "json", "default": deep}]})
    expect(response, 422, "VALIDATION_FAILED")
    expect(world.admin.get(f"{world.base}/tables/docs"), 404, "NOT_FOUND")


def test_a_member_gets_422_for_a_json_value_nested_past_the_cap_and_the_table_keeps_answering(
        world: AppWorld) -> None:
    world.table("docs", [{"name": "doc", "type": "json"}])
    world.role("writer", ["docs:*"])
    member = world.caller(world.org("North"), ["writer"])
    deep: Any = "leaf"
    for _ in range(300):
        deep = [deep]
    expect(member.post(world.rows("docs"), json={"doc": deep}), 422, "VALIDATION_FAILED")
    assert expect(member.get(world.rows("docs")), 200)["items"] == []
    # The row body around the value is one level more, and bodies are capped at the same depth.
    at_cap: Any = "leaf"
    for _ in range(MAX_JSON_DEPTH - 1):
        at_cap = [at_cap]
    row = expect(member.post(world.rows("docs"), json={"doc": at_cap}), 201)
    assert expect(member.get(f"{world.rows('docs')}/{row['uid']}"), 200)["doc"] == at_cap


# allowedOrigins --------------------------------------------------------------------------------

def test_admin_sets_allowed_origins_and_sees_them_stored_as_browsers_send_them(
        world: AppWorld) -> None:
    assert expect(world.admin.get(world.base), 200)["settings"]["allowedOrigins"] == []
    app = expect(world.admin.patch(world.base, json={"settings": {"allowedOrigins": [
        "https://App.Example.com", "http://localhost:5173"]}}), 200)
    assert app["settings"]["allowedOrigins"] == ["https://app.example.com",
                                                 "http://localhost:5173"]
    # Changing another setting keeps them.
    app = expect(world.admin.patch(world.base, json={"settings": {"accessTokenTtl": 60}}), 200)
    assert app["settings"]["allowedOrigins"] == ["https://app.example.com",
                                                 "http://localhost:5173"]
    assert app["settings"]["accessTokenTtl"] == 60
    app = expect(world.admin.patch(world.base, json={"settings": {"allowedOrigins": ["*"]}}), 200)
    assert app["settings"]["allowedOrigins"] == ["*"]
    assert expect(world.admin.get(world.base), 200)["settings"]["allowedOrigins"] == ["*"]


@pytest.mark.parametrize("origins", [["app.example.com"], ["https://app.example.com/"],
                                     ["*", "https://app.example.com"], "*", [None]])
def test_admin_gets_422_for_allowed_origins_that_are_not_origins_and_nothing_changes(
        world: AppWorld, origins: Any) -> None:
    before = expect(world.admin.get(world.base), 200)
    response = world.admin.patch(world.base, json={"settings": {"allowedOrigins": origins}})
    assert any(f.startswith("settings.allowedOrigins") for f in _fields(response))
    assert expect(world.admin.get(world.base), 200) == before

