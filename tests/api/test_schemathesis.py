"""Property-based API tests with Schemathesis against a live server: the platform document
(`/openapi.json`) and one app's document (`/{app}/openapi.json`).

For every generated request: no 5xx, responses conform to the documented schemas (and, for the
app document, to the documented status codes and content types), every error carries the
contract's envelope, and the same request without credentials, with a bogus token or with a
token of another app is refused with 401.

The platform document is FastAPI's. It declares the admin and session routes' request bodies
(their Pydantic models), the generic row writes' as an object of any columns (the app's
document has each table's), and no security scheme. The platform is fuzzed twice: with its
bodies as declared (valid and invalid ones), and with hand-tuned bodies whose names hit the
pinned app's tables and roles, so requests reach past validation. `{app}` is pinned to a
throwaway app (so requests reach past the app lookup). Runs are bounded: a few examples per
operation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis import checks as st_checks

from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess

EXAMPLES = 12
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                         suppress_health_check=list(HealthCheck),
                         phases=[Phase.explicit, Phase.generate])


@dataclass(frozen=True)
class Fuzzed:
    base_url: str
    good: Callable[[str], dict[str, str]]  # path → headers that authenticate the right caller
    needs_auth: Callable[[str], bool]  # path → whether the route takes credentials
    refused: list[dict[str, str]]  # headers that must be refused with 401 where it does


def assert_envelope(status: int, body: Any, text: str) -> None:
    if status < 400:
        return
    assert isinstance(body, dict) and set(body) == {"error"}, text
    error = body["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message", "details"}, text
    assert isinstance(error["code"], str) and isinstance(error["message"], str), text
    assert isinstance(error["details"], dict), text
    assert "Traceback" not in text, text


def json_or_none(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def exercise(case: schemathesis.Case, fuzzed: Fuzzed, checks: list[Any],
             probe_auth: bool = True) -> None:
    path = case.operation.path
    response = case.call_and_validate(base_url=fuzzed.base_url, headers=fuzzed.good(path),
                                      checks=checks)
    assert_envelope(response.status_code, json_or_none(response), response.text)
    if not probe_auth or not fuzzed.needs_auth(path):
        return
    for headers in fuzzed.refused:
        probe = case.call(base_url=fuzzed.base_url, headers=headers)
        assert probe.status_code == 401, (case.method, case.formatted_path, headers,
                                          probe.status_code, probe.text)
        body = json_or_none(probe)
        assert_envelope(probe.status_code, body, probe.text)
        assert body["error"]["code"] in ("UNAUTHENTICATED", "TOKEN_EXPIRED"), probe.text


def fuzz(schema: Any, fuzzed: Fuzzed, checks: list[Any],
         mode: GenerationMode = GenerationMode.POSITIVE) -> None:
    """Run every operation of `schema` for a bounded number of examples; report all failures.

    (Schemathesis' pytest integration, `from_fixture`, does not work with pytest 9, so the
    operations are driven here with Hypothesis directly.)
    """
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert operations
    for operation in operations:

        @FUZZ_SETTINGS
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case: schemathesis.Case) -> None:
            # Invalid requests may miss the route altogether (a `/` in a path parameter), so
            # credentials are probed with valid ones only.
            exercise(case, fuzzed, checks, probe_auth=mode == GenerationMode.POSITIVE)

        try:
            run()
        except Exception as exc:  # collect, so one run reports every operation that fails
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)


# The app document ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FuzzApp:
    world: AppWorld
    token: str  # a member's access token
    uids: dict[str, list[str]]  # table → uids of rows the member can reach


@pytest.fixture(scope="module")
def fuzz_world(server: ServerProcess, http: httpx.Client) -> FuzzApp:
    """An app with two tables, a few rows, and the access token of a member of one org."""
    world = AppWorld.create(server, http)
    world.table("vendors", [{"name": "name", "type": "text", "required": True, "unique": True},
                            {"name": "rating", "type": "integer"}])
    world.table("invoices", [
        {"name": "number", "type": "text", "required": True},
        {"name": "vendor", "type": "reference", "references": "vendors"},
        {"name": "amount", "type": "numeric"},
        {"name": "status", "type": "text", "default": "received"},
        {"name": "paid", "type": "boolean"},
        {"name": "due", "type": "date"},
        {"name": "seen", "type": "timestamp"},
        {"name": "ref", "type": "uuid"},
        {"name": "meta", "type": "json"},
    ])
    org = world.org("North")
    world.role("clerk", ["vendors:*", "invoices:*"], redact={"invoices": ["amount"]})
    world.role("boss", ["invoices:read", "invoices:read_list"])
    clerk = world.caller(org, ["clerk", "boss"])
    vendor = expect(clerk.post(world.rows("vendors"), json={"name": "Acme", "rating": 3}), 201)
    invoices = [expect(clerk.post(world.rows("invoices"), json={
        "number": f"A-{i}", "vendor_uid": vendor["uid"], "amount": "1.50"}), 201)["uid"]
        for i in range(3)]
    assert clerk.token
    return FuzzApp(world, clerk.token, {"vendors": [vendor["uid"]], "invoices": invoices})


@pytest.fixture(scope="module")
def other_app_token(server: ServerProcess, http: httpx.Client) -> str:
    other = AppWorld.create(server, http)
    other.role("anyone", ["*:*"])
    token = other.caller(other.org("South"), ["anyone"]).token
    assert token
    return token


@pytest.fixture(scope="module")
def app_fuzz(fuzz_world: FuzzApp, other_app_token: str) -> Fuzzed:
    token = fuzz_world.token
    return Fuzzed(
        base_url=fuzz_world.world.server.url,
        good=lambda path: {"Authorization": f"Bearer {token}"},
        needs_auth=lambda path: True,
        refused=[{}, {"Authorization": "Bearer not-a-token"},
                 {"Authorization": f"Bearer {other_app_token}"}],
    )


@pytest.fixture(scope="module")
def app_schema(fuzz_world: FuzzApp, app_fuzz: Fuzzed) -> Any:
    url = f"{app_fuzz.base_url}/{fuzz_world.world.name}/openapi.json"
    doc = expect(httpx.get(url, headers=app_fuzz.good(url)), 200)
    expect(httpx.get(url), 401, "UNAUTHENTICATED")
    # Row routes get real row uids (and one that names no row), so updates reach a row.
    for table, uids in fuzz_world.uids.items():
        item = doc["paths"][f"{fuzz_world.world.rows(table)}/{{uid}}"]
        for parameter in item["parameters"]:
            if parameter["name"] == "uid":
                parameter["schema"] = {"enum": [*uids, NO_ROW]}
    # A stream never ends, so the subscribe route is left to the realtime tests.
    return schemathesis.openapi.from_dict(doc).exclude(path_regex=r"/subscribe$")


APP_CHECKS = [st_checks.not_a_server_error, st_checks.response_schema_conformance,
              st_checks.status_code_conformance, st_checks.content_type_conformance]


def test_the_app_api_keeps_its_document_and_refuses_missing_or_bad_credentials(
        app_schema: Any, app_fuzz: Fuzzed) -> None:
    fuzz(app_schema, app_fuzz, APP_CHECKS)


def test_invalid_requests_to_the_app_api_get_a_client_error_envelope_never_a_5xx(
        app_schema: Any, app_fuzz: Fuzzed) -> None:
    fuzz(app_schema, app_fuzz, [st_checks.not_a_server_error], GenerationMode.NEGATIVE)


# The platform document -----------------------------------------------------------------------

# Names: mostly legal ones (so requests get past validation), sometimes anything.
_NAME = {"anyOf": [{"type": "string", "pattern": "^[a-z][a-z0-9_]{0,12}$"},
                   {"type": "string", "maxLength": 70}]}
_COLUMN = {"type": "object", "properties": {
    "name": _NAME,
    "type": {"enum": ["text", "integer", "numeric", "boolean", "timestamp", "date", "uuid",
                      "json", "reference", "blob"]},
    "required": {"type": "boolean"}, "unique": {"type": "boolean"}, "default": {},
    "references": {"enum": ["things", "scratch", "nope"]}}, "required": ["name", "type"]}
_OPERATIONS = {"type": "object", "properties": {
    op: {"type": "boolean"} for op in ("list", "read", "create", "update", "delete")}}
_PERMISSION = {"anyOf": [
    {"type": "string", "pattern": r"^(things|scratch|\*):(read_list|read|create|update|delete|\*)$"},
    {"type": "string"}]}
_THING = {"type": "object", "properties": {"label": {"type": ["string", "null"]}},
          "additionalProperties": False}
# A uid that names no row, next to real ones (row routes get both).
NO_ROW = "00000000-0000-7000-8000-000000000000"
JSON, CSV = "application/json", "text/csv"
REQUEST_BODIES: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("post", "/admin/apps"): (JSON, {"type": "object", "properties": {"name": _NAME},
                                     "required": ["name"]}),
    ("patch", "/admin/apps/{app}"): (JSON, {"type": "object", "properties": {"settings": {
        "type": "object", "properties": {"accessTokenTtl": {"type": "integer"},
                                         "refreshTokenTtl": {"type": "integer"}}}}}),
    ("post", "/admin/apps/{app}/tables"): (JSON, {"type": "object", "properties": {
        "name": _NAME, "columns": {"type": "array", "items": _COLUMN, "maxItems": 4},
        "operations": _OPERATIONS, "softDelete": {"type": "boolean"}}, "required": ["name"]}),
    ("patch", "/admin/apps/{app}/tables/{table}"): (JSON, {"type": "object", "properties": {
        "operations": _OPERATIONS, "addColumns": {"type": "array", "items": _COLUMN},
        "dropColumns": {"type": "array", "items": _NAME}}}),
    ("post", "/admin/apps/{app}/orgs"): (JSON, {"type": "object", "properties": {"name": _NAME},
                                                "required": ["name"]}),
    ("post", "/admin/apps/{app}/users"): (JSON, {"type": "object", "properties": {
        "email": {"type": "string", "format": "email"}, "password": {"type": "string"}},
        "required": ["email", "password"]}),
    ("put", "/admin/apps/{app}/orgs/{org}/members/{user}"): (JSON, {
        "type": "object", "properties": {"roles": {"type": "array", "items": _NAME}},
        "required": ["roles"]}),
    ("put", "/admin/apps/{app}/roles/{role}"): (JSON, {"type": "object", "properties": {
        "permissions": {"type": "array", "items": _PERMISSION},
        "rowPolicies": {"type": "object", "properties": {"things": {"type": "object"}}},
        "redact": {"type": "object", "properties": {"things": {
            "type": "array", "items": {"enum": ["label", "nope"]}}}}}}),
    ("post", "/{app}/auth/token"): (JSON, {"type": "object", "properties": {
        "email": {"type": "string", "format": "email"}, "password": {"type": "string"},
        "org": {"type": "string", "format": "uuid"}}, "required": ["email", "password"]}),
    ("post", "/{app}/auth/refresh"): (JSON, {"type": "object", "properties": {
        "refresh_token": {"type": "string"}}}),
    ("post", "/{app}/auth/logout"): (JSON, {"type": "object", "properties": {
        "refresh_token": {"type": "string"}}}),
    ("post", "/{app}/autocrud/{table}"): (JSON, _THING),
    ("patch", "/{app}/autocrud/{table}/{uid}"): (JSON, _THING),
    ("patch", "/{app}/autocrud/{table}"): (JSON, {"type": "object", "properties": {
        "set": _THING}, "required": ["set"]}),
    ("post", "/{app}/autocrud/{table}/import"): (CSV, {
        "type": "string", "pattern": "^label\\r?\\n([a-z,\"]{0,6}\\r?\\n){0,4}$"}),
}
# Parameters the platform document leaves out or types loosely.
_LABEL_FILTER = {"name": "label", "in": "query", "required": True, "schema": {"type": "string"}}
EXTRA_PARAMETERS: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("patch", "/{app}/autocrud/{table}"): [_LABEL_FILTER],
    ("delete", "/{app}/autocrud/{table}"): [_LABEL_FILTER],
}


@dataclass(frozen=True)
class Pins:
    """Real values for path parameters, so requests reach past the lookups."""

    app: str
    org: str
    bystander: str  # a user whose membership the fuzzing may change or remove
    thing: str  # a row of `things`


def platform_document(raw: dict[str, Any], pins: Pins,
                      bodies: dict[tuple[str, str], tuple[str, dict[str, Any]]] | None = None,
                      ) -> dict[str, Any]:
    """The platform document with request bodies replaced by `bodies` (default: the hand-tuned
    REQUEST_BODIES) and some path parameters pinned:
    `{app}` everywhere, `{table}` to `things` on autocrud routes and to `scratch` on admin
    routes, and the membership route to a bystander's membership."""
    doc = copy.deepcopy(raw)
    paths: dict[str, Any] = {}
    for template, item in doc["paths"].items():
        pinned = {"app": pins.app}
        if template.startswith("/{app}/autocrud/"):
            pinned["table"] = "things"
        elif "{table}" in template:
            pinned["table"] = "scratch"
        if template.endswith("/members/{user}"):
            pinned.update(org=pins.org, user=pins.bystander)
        for method, operation in item.items():
            body = (REQUEST_BODIES if bodies is None else bodies).get((method, template))
            if body is not None:
                media_type, schema = body
                operation["requestBody"] = {"required": True,
                                            "content": {media_type: {"schema": schema}}}
            operation["parameters"] = [p for p in operation.get("parameters", [])
                                       if p["name"] not in pinned]
            operation["parameters"] += EXTRA_PARAMETERS.get((method, template), [])
            for parameter in operation["parameters"]:
                if parameter["name"] == "role":
                    parameter["schema"] = _NAME
                if parameter["name"] == "uid":
                    parameter["schema"] = {"enum": [pins.thing, NO_ROW]}
        for name, value in pinned.items():
            template = template.replace(f"{{{name}}}", value)
        paths[template] = item
    doc["paths"] = paths
    return doc


@pytest.fixture(scope="module")
def platform_world(server: ServerProcess, http: httpx.Client) -> tuple[AppWorld, Pins, str]:
    """A throwaway app to fuzz the platform routes on; and a member's access token there."""
    world = AppWorld.create(server, http)
    world.table("things", [{"name": "label", "type": "text"}])
    world.table("scratch", [{"name": "note", "type": "text"}])
    world.role("member", ["things:*"])
    org = world.org("North")
    member = world.caller(org, ["member"])
    thing = expect(member.post(world.rows("things"), json={"label": "one"}), 201)
    bystander = world.user()
    world.member(org, bystander["uid"], ["member"])
    assert member.token
    return world, Pins(world.name, org, bystander["uid"], thing["uid"]), member.token


@pytest.fixture(scope="module")
def platform_fuzz(platform_world: tuple[AppWorld, Pins, str], other_app_token: str) -> Fuzzed:
    world, pins, member_token = platform_world
    admin = {"Authorization": f"Bearer {world.server.admin_token}"}
    member = {"Authorization": f"Bearer {member_token}"}

    def good(path: str) -> dict[str, str]:
        return member if path.startswith(f"/{pins.app}/autocrud/") else admin

    def needs_auth(path: str) -> bool:
        # Sessions and the load balancer's probes are open to anyone.
        return not path.startswith(f"/{pins.app}/auth/") and path not in ("/healthz", "/readyz")

    return Fuzzed(
        base_url=world.server.url, good=good, needs_auth=needs_auth,
        refused=[{}, {"Authorization": "Bearer not-a-token"},
                 {"Authorization": f"Bearer {other_app_token}"}],
    )


@pytest.fixture(scope="module")
def platform_schema(platform_world: tuple[AppWorld, Pins, str], platform_fuzz: Fuzzed) -> Any:
    _, pins, _ = platform_world
    raw = expect(httpx.get(f"{platform_fuzz.base_url}/openapi.json"), 200)
    # Deleting the pinned app would end the run early (app deletion has its own scenarios);
    # a stream never ends (subscribe has its own tests).
    return (schemathesis.openapi.from_dict(platform_document(raw, pins))
            .exclude(method="DELETE", path=f"/admin/apps/{pins.app}")
            .exclude(path_regex=r"/subscribe$"))


# FastAPI documents only the success status (and a 422 shape of its own), so status codes and
# content types of errors are checked through the envelope instead.
PLATFORM_CHECKS = [st_checks.not_a_server_error, st_checks.response_schema_conformance]


def test_the_platform_api_never_fails_and_refuses_missing_or_bad_credentials(
        platform_schema: Any, platform_fuzz: Fuzzed) -> None:
    fuzz(platform_schema, platform_fuzz, PLATFORM_CHECKS)


# The autocrud bodies depend on the app, so the platform document cannot declare them.
AUTOCRUD_BODIES = {key: body for key, body in REQUEST_BODIES.items()
                   if key[1].startswith("/{app}/autocrud/")}


def _declared_document(platform_world: tuple[AppWorld, Pins, str], platform_fuzz: Fuzzed,
                       bodies_only: bool) -> dict[str, Any]:
    """The platform document with the admin and session bodies as the server declares them
    (and, with `bodies_only`, only the operations that take a body)."""
    _, pins, _ = platform_world
    raw = expect(httpx.get(f"{platform_fuzz.base_url}/openapi.json"), 200)
    for method, template in (("post", "/admin/apps"), ("put", "/admin/apps/{app}/roles/{role}"),
                             ("post", "/{app}/auth/token")):
        assert "requestBody" in raw["paths"][template][method], (method, template)
    doc = platform_document(raw, pins, AUTOCRUD_BODIES)
    if bodies_only:
        doc["paths"] = {path: ops for path, item in doc["paths"].items() if (ops := {
            method: op for method, op in item.items() if "requestBody" in op})}
    return doc


def _schema(doc: dict[str, Any], pins: Pins) -> Any:
    return (schemathesis.openapi.from_dict(doc)
            .exclude(method="DELETE", path=f"/admin/apps/{pins.app}")
            .exclude(path_regex=r"/subscribe$"))


def test_the_platform_api_keeps_its_declared_bodies_and_never_fails(
        platform_world: tuple[AppWorld, Pins, str], platform_fuzz: Fuzzed) -> None:
    doc = _declared_document(platform_world, platform_fuzz, bodies_only=False)
    fuzz(_schema(doc, platform_world[1]), platform_fuzz, PLATFORM_CHECKS)


def test_bodies_breaking_the_platforms_declared_schemas_get_a_client_error_never_a_5xx(
        platform_world: tuple[AppWorld, Pins, str], platform_fuzz: Fuzzed) -> None:
    doc = _declared_document(platform_world, platform_fuzz, bodies_only=True)
    fuzz(_schema(doc, platform_world[1]), platform_fuzz, [st_checks.not_a_server_error],
         GenerationMode.NEGATIVE)
