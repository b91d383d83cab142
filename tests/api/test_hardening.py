"""Hardening: forged and misused tokens, mass assignment, hostile identifiers, bounded queries
and bodies, statement timeouts, login throttling, policies that fail closed, and redacted
columns that cannot be probed through filters or ordering.

Tokens are forged with the server's real signing secret (read from its data directory), so a
refusal proves the check itself, not a bad signature.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncpg
import httpx
import jwt
import pytest

from authoric.query.filters import MAX_DEPTH, MAX_NODES
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server

# Helpers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secret(server: ServerProcess, data_dir: Path) -> str:
    """The server's JWT signing secret (kept in its data directory)."""
    return (data_dir / "jwt_secret").read_text().strip()


def claims_of(token: str) -> dict[str, Any]:
    return dict(jwt.decode(token, options={"verify_signature": False}))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_made(header: dict[str, Any], payload: dict[str, Any], key: bytes | None) -> str:
    """A JWT built by hand: HMAC-SHA256 over the signing input with `key`, or no signature."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    signature = b"" if key is None else hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def forge(secret: str, claims: dict[str, Any], *, drop: tuple[str, ...] = (),
          headers: dict[str, Any] | None = None, algorithm: str = "HS256",
          **changes: Any) -> str:
    payload = {k: v for k, v in {**claims, **changes}.items() if k not in drop}
    return jwt.encode(payload, secret, algorithm=algorithm, headers=headers)


def with_token(caller: Caller, token: str) -> Caller:
    return Caller(caller.client, token)


def run_sql(database_url: str, statement: str, *args: Any) -> Any:
    async def run() -> Any:
        conn = await asyncpg.connect(database_url)
        try:
            return await conn.execute(statement, *args)
        finally:
            await conn.close()

    return asyncio.run(run())


def assert_clean_error(response: httpx.Response) -> None:
    """An error envelope with nothing of the server's insides in it."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    for leak in ("Traceback", "File \"", "asyncpg", "sqlalchemy", "psycopg", 'line '):
        assert leak not in response.text, response.text


@pytest.fixture
def notes(world: AppWorld) -> tuple[AppWorld, Caller, str]:
    """An app with a `notes` table and a member of org `North` holding every permission on it."""
    world.table("notes", [{"name": "title", "type": "text", "required": True},
                          {"name": "n", "type": "integer"}])
    org = world.org("North")
    world.role("writer", ["notes:*"])
    return world, world.caller(org, ["writer"]), org


@pytest.fixture(scope="module")
def shared(server: ServerProcess, http: httpx.Client) -> tuple[AppWorld, Caller, str]:
    """Like `notes`, built once for the tests that write nothing."""
    world = AppWorld.create(server, http)
    world.table("notes", [{"name": "title", "type": "text", "required": True},
                          {"name": "n", "type": "integer"}])
    org = world.org("North")
    world.role("writer", ["notes:*"])
    return world, world.caller(org, ["writer"]), org


def titles(caller: Caller, world: AppWorld) -> list[str]:
    items = expect(caller.get(world.rows("notes"), params={"limit": 1000}), 200)["items"]
    return sorted(r["title"] for r in items)


# Tokens ----------------------------------------------------------------------------------


def test_a_token_forged_with_the_real_secret_and_every_claim_right_is_accepted(
        shared: tuple[AppWorld, Caller, str], secret: str) -> None:
    world, caller, _ = shared
    assert caller.token
    forged = forge(secret, claims_of(caller.token))
    expect(with_token(caller, forged).get(world.rows("notes")), 200)


@pytest.mark.parametrize("algorithm", ["HS384", "HS512"])
def test_a_token_signed_with_another_hmac_algorithm_and_the_right_secret_is_refused(
        shared: tuple[AppWorld, Caller, str], secret: str, algorithm: str) -> None:
    world, caller, _ = shared
    assert caller.token
    forged = forge(secret, claims_of(caller.token), algorithm=algorithm)
    expect(with_token(caller, forged).get(world.rows("notes")), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("alg", ["none", "None", "NONE", "nOnE"])
def test_an_unsigned_alg_none_token_is_refused(shared: tuple[AppWorld, Caller, str],
                                               alg: str) -> None:
    world, caller, _ = shared
    assert caller.token
    unsigned = hand_made({"alg": alg, "typ": "JWT"}, claims_of(caller.token), None)
    expect(with_token(caller, unsigned).get(world.rows("notes")), 401, "UNAUTHENTICATED")
    # the same with a trailing signature-less dot dropped
    expect(with_token(caller, unsigned.rstrip(".")).get(world.rows("notes")), 401,
           "UNAUTHENTICATED")


@pytest.mark.parametrize("alg", ["RS256", "ES256", "PS256", "EdDSA", "HS256 "])
def test_an_asymmetric_algorithm_header_over_an_hmac_signature_is_refused(
        shared: tuple[AppWorld, Caller, str], secret: str, alg: str) -> None:
    """Algorithm confusion: the header claims a public-key algorithm, the signature is an HMAC
    with the server's secret (what a verifier using the key 'as given' would accept)."""
    world, caller, _ = shared
    assert caller.token
    token = hand_made({"alg": alg, "typ": "JWT"}, claims_of(caller.token), secret.encode())
    expect(with_token(caller, token).get(world.rows("notes")), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("header", [
    {"kid": "../../etc/passwd"},
    {"kid": "' OR '1'='1' --"},
    {"kid": "/dev/null"},
    {"jku": "http://127.0.0.1:1/jwks.json"},
    {"x5u": "http://127.0.0.1:1/cert.pem"},
    {"jwk": {"kty": "oct", "k": "c2VjcmV0"}},
    {"crit": ["exp"]},
    {"cty": "JWT"},
])
def test_a_token_with_key_selection_or_extension_headers_is_refused(
        shared: tuple[AppWorld, Caller, str], secret: str, header: dict[str, Any]) -> None:
    world, caller, _ = shared
    assert caller.token
    forged = forge(secret, claims_of(caller.token), headers=header)
    expect(with_token(caller, forged).get(world.rows("notes")), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("claim", ["exp", "iat", "iss", "aud", "sub", "org", "typ", "jti"])
def test_a_token_missing_a_claim_is_refused(shared: tuple[AppWorld, Caller, str], secret: str,
                                            claim: str) -> None:
    world, caller, _ = shared
    assert caller.token
    forged = forge(secret, claims_of(caller.token), drop=(claim,))
    expect(with_token(caller, forged).get(world.rows("notes")), 401, "UNAUTHENTICATED")


MISTYPED: list[tuple[str, Any]] = [
    ("org", "not-a-uuid"), ("org", 42), ("org", None), ("org", [str(uuid.uuid4())]),
    ("sub", "admin"), ("sub", 1), ("jti", "x"), ("jti", {}),
    ("aud", "wrong"), ("aud", "app:not-a-uuid"), ("aud", "app:"),
    ("iss", "someone-else"), ("typ", "refresh"), ("typ", "ACCESS"), ("typ", None), ("typ", 1),
    ("exp", "9999999999"), ("exp", None), ("iat", "now"),
]


@pytest.mark.parametrize(("claim", "value"), MISTYPED,
                         ids=[f"{c}={v!r}" for c, v in MISTYPED])
def test_a_token_with_a_mistyped_or_wrong_claim_is_refused(
        shared: tuple[AppWorld, Caller, str], secret: str, claim: str, value: Any) -> None:
    world, caller, _ = shared
    assert caller.token
    forged = forge(secret, claims_of(caller.token), **{claim: value})
    expect(with_token(caller, forged).get(world.rows("notes")), 401, "UNAUTHENTICATED")


def test_a_token_whose_audience_is_a_list_holding_the_right_app_is_refused(
        shared: tuple[AppWorld, Caller, str], secret: str) -> None:
    world, caller, _ = shared
    assert caller.token
    claims = claims_of(caller.token)
    forged = forge(secret, claims, aud=[claims["aud"]])
    expect(with_token(caller, forged).get(world.rows("notes")), 401, "UNAUTHENTICATED")


def test_a_token_for_a_user_or_org_without_membership_is_refused(
        shared: tuple[AppWorld, Caller, str], secret: str) -> None:
    world, caller, _ = shared
    assert caller.token
    claims = claims_of(caller.token)
    other_org = world.org(f"Elsewhere {uuid.uuid4()}")
    for changes in ({"sub": str(uuid.uuid4())}, {"org": str(uuid.uuid4())}, {"org": other_org}):
        forged = forge(secret, claims, **changes)
        expect(with_token(caller, forged).get(world.rows("notes")), 401, "UNAUTHENTICATED")


def test_an_expired_token_is_refused_as_expired(shared: tuple[AppWorld, Caller, str],
                                                secret: str) -> None:
    world, caller, _ = shared
    assert caller.token
    forged = forge(secret, claims_of(caller.token), exp=int(time.time()) - 5)
    expect(with_token(caller, forged).get(world.rows("notes")), 401, "TOKEN_EXPIRED")


def test_a_token_signed_with_another_secret_is_refused(shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    assert caller.token
    forged = forge("not-the-secret", claims_of(caller.token))
    expect(with_token(caller, forged).get(world.rows("notes")), 401, "UNAUTHENTICATED")


def test_a_token_of_another_app_is_refused(shared: tuple[AppWorld, Caller, str],
                                           server: ServerProcess, http: httpx.Client) -> None:
    _, caller, _ = shared
    other = AppWorld.create(server, http)
    other.table("notes", [{"name": "title", "type": "text"}])
    org = other.org("North")
    other.role("writer", ["notes:*"])
    other.caller(org, ["writer"])
    expect(caller.get(other.rows("notes")), 401, "UNAUTHENTICATED")
    expect(caller.post(other.rows("notes"), json={"title": "x"}), 401, "UNAUTHENTICATED")


def test_a_refresh_token_is_not_an_access_token(shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    assert caller.refresh_token
    expect(with_token(caller, caller.refresh_token).get(world.rows("notes")), 401,
           "UNAUTHENTICATED")


def test_an_access_token_is_not_a_refresh_token(shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    response = caller.client.post(f"/{world.name}/auth/refresh",
                                  json={"refresh_token": caller.token})
    expect(response, 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Token abc",
                                    "Bearer a.b.c", "Bearer a.b", "Bearer ....",
                                    "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"])
def test_malformed_authorization_headers_are_refused(shared: tuple[AppWorld, Caller, str],
                                                     header: str) -> None:
    world, caller, _ = shared
    response = caller.client.get(world.rows("notes"), headers={"Authorization": header})
    expect(response, 401, "UNAUTHENTICATED")
    assert_clean_error(response)


def test_the_admin_token_is_not_an_app_token_and_an_app_token_is_not_the_admin_token(
        shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    expect(world.admin.get(world.rows("notes")), 401, "UNAUTHENTICATED")
    expect(caller.get("/admin/apps"), 401, "UNAUTHENTICATED")


# Mass assignment -------------------------------------------------------------------------

SERVER_FIELDS: list[tuple[str, Any]] = [
    ("uid", "0190f1b2-0000-7000-8000-000000000001"),
    ("org", "0190f1b2-0000-7000-8000-000000000002"),
    ("org_uid", "0190f1b2-0000-7000-8000-000000000002"),
    ("orgUid", "0190f1b2-0000-7000-8000-000000000002"),
    ("createdAt", "2001-01-01T00:00:00Z"),
    ("updatedAt", "2001-01-01T00:00:00Z"),
    ("created_at", "2001-01-01T00:00:00Z"),
    ("updated_at", "2001-01-01T00:00:00Z"),
    ("deletedAt", "2001-01-01T00:00:00Z"),
]


@pytest.mark.parametrize(("field", "value"), SERVER_FIELDS, ids=[f for f, _ in SERVER_FIELDS])
def test_a_create_body_setting_a_server_field_is_refused_and_writes_nothing(
        notes: tuple[AppWorld, Caller, str], field: str, value: Any) -> None:
    world, caller, _ = notes
    response = caller.post(world.rows("notes"), json={"title": "smuggled", field: value})
    expect(response, 422, "VALIDATION_FAILED")
    assert field in json.dumps(response.json()["error"]["details"])
    assert titles(caller, world) == []


@pytest.mark.parametrize(("field", "value"), SERVER_FIELDS, ids=[f for f, _ in SERVER_FIELDS])
def test_an_update_body_setting_a_server_field_is_refused_and_changes_nothing(
        notes: tuple[AppWorld, Caller, str], field: str, value: Any) -> None:
    world, caller, _ = notes
    row = expect(caller.post(world.rows("notes"), json={"title": "kept", "n": 1}), 201)
    response = caller.patch(f"{world.rows('notes')}/{row['uid']}",
                            json={"title": "changed", field: value})
    expect(response, 422, "VALIDATION_FAILED")
    assert expect(caller.get(f"{world.rows('notes')}/{row['uid']}"), 200) == row


def test_a_row_cannot_be_moved_to_another_org(notes: tuple[AppWorld, Caller, str]) -> None:
    world, north, _ = notes
    south_org = world.org("South")
    south = world.caller(south_org, ["writer"])
    row = expect(north.post(world.rows("notes"), json={"title": "north's"}), 201)
    url = f"{world.rows('notes')}/{row['uid']}"
    for key in ("org", "org_uid", "orgUid"):
        expect(north.patch(url, json={key: south_org}), 422, "VALIDATION_FAILED")
    # the other org can neither see it nor reach it to pull it over
    assert titles(south, world) == []
    expect(south.get(url), 404, "NOT_FOUND")
    expect(south.patch(url, json={"title": "mine now"}), 404, "NOT_FOUND")
    expect(south.delete(url), 404, "NOT_FOUND")
    assert expect(north.get(url), 200) == row


@pytest.mark.parametrize(("field", "value"), SERVER_FIELDS, ids=[f for f, _ in SERVER_FIELDS])
def test_a_bulk_update_setting_a_server_field_is_refused_and_changes_nothing(
        notes: tuple[AppWorld, Caller, str], field: str, value: Any) -> None:
    world, caller, _ = notes
    row = expect(caller.post(world.rows("notes"), json={"title": "kept", "n": 1}), 201)
    response = caller.patch(world.rows("notes"), params={"title": "kept"},
                            json={"set": {"n": 2, field: value}})
    expect(response, 422, "VALIDATION_FAILED")
    assert expect(caller.get(f"{world.rows('notes')}/{row['uid']}"), 200) == row


@pytest.mark.parametrize("field", ["uid", "org", "org_uid", "createdAt", "updatedAt"])
def test_a_csv_import_naming_a_server_field_is_refused_and_writes_nothing(
        notes: tuple[AppWorld, Caller, str], field: str) -> None:
    world, caller, org = notes
    value = {"uid": "0190f1b2-0000-7000-8000-000000000001", "createdAt": "2001-01-01T00:00:00Z",
             "updatedAt": "2001-01-01T00:00:00Z"}.get(field, org)
    response = caller.post(f"{world.rows('notes')}/import",
                           content=f"title,{field}\nsmuggled,{value}\n".encode(),
                           headers={"Content-Type": "text/csv"})
    expect(response, 422, "VALIDATION_FAILED")
    assert titles(caller, world) == []


def test_a_bulk_update_cannot_move_rows_to_another_org(
        notes: tuple[AppWorld, Caller, str]) -> None:
    world, north, _ = notes
    south_org = world.org("South")
    south = world.caller(south_org, ["writer"])
    expect(north.post(world.rows("notes"), json={"title": "north's"}), 201)
    for key in ("org", "org_uid", "orgUid"):
        expect(north.patch(world.rows("notes"), params={"title": "north's"},
                           json={"set": {key: south_org}}), 422, "VALIDATION_FAILED")
    # nor can the other org reach them with a bulk write of its own
    assert expect(south.patch(world.rows("notes"), params={"title": "north's"},
                              json={"set": {"title": "mine"}}), 200) == {"count": 0}
    assert expect(south.delete(world.rows("notes"), params={"title": "north's"}), 200) == {
        "count": 0}
    assert titles(south, world) == []
    assert titles(north, world) == ["north's"]


def test_a_reference_cannot_point_into_another_org(world: AppWorld) -> None:
    world.table("vendors", [{"name": "name", "type": "text"}])
    world.table("invoices", [{"name": "vendor", "type": "reference", "references": "vendors"}])
    world.role("clerk", ["vendors:*", "invoices:*"])
    north = world.caller(world.org("North"), ["clerk"])
    south = world.caller(world.org("South"), ["clerk"])
    theirs = expect(south.post(world.rows("vendors"), json={"name": "S"}), 201)
    expect(north.post(world.rows("invoices"), json={"vendor_uid": theirs["uid"]}), 409,
           "CONFLICT")
    assert expect(north.get(world.rows("invoices")), 200)["items"] == []


# Identifiers -----------------------------------------------------------------------------

BAD_NAMES = [
    'bad"name', "bad'name", "b\u0430d",  # Cyrillic small a
    "\u0430bc", "caf\u00e9", "x" * 64, "Upper", "1abc", "_abc", "with space", "semi;colon",
    "a-b", "ab\n", "a\u200bb",  # zero-width space
    "ab\x00", "", "a" * 32 + "\u0430" * 16,
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=[repr(n)[:40] for n in BAD_NAMES])
def test_hostile_app_table_and_column_names_are_refused(world: AppWorld, name: str) -> None:
    admin = world.admin
    expect(admin.post("/admin/apps", json={"name": name}), 422, "VALIDATION_FAILED")
    expect(admin.post(f"{world.base}/tables",
                      json={"name": name, "columns": [{"name": "a", "type": "text"}]}),
           422, "VALIDATION_FAILED")
    expect(admin.post(f"{world.base}/tables",
                      json={"name": "t", "columns": [{"name": name, "type": "text"}]}),
           422, "VALIDATION_FAILED")
    assert expect(admin.get(f"{world.base}/tables"), 200)["items"] == []


@pytest.mark.parametrize("name", [n for n in BAD_NAMES if n not in ("", "ab\x00")],
                         ids=[repr(n)[:40] for n in BAD_NAMES if n not in ("", "ab\x00")])
def test_hostile_role_names_are_refused(world: AppWorld, name: str) -> None:
    response = world.admin.put(f"{world.base}/roles/{quote(name, safe='')}",
                               json={"permissions": []})
    expect(response, 422, "VALIDATION_FAILED")
    assert expect(world.admin.get(f"{world.base}/roles"), 200)["items"] == []


@pytest.mark.parametrize("permission", ['no"tes:read', "n\u0430tes:read", "notes:read;drop",
                                        "notes", "notes:all", ":read"])
def test_hostile_names_inside_a_role_are_refused(world: AppWorld, permission: str) -> None:
    expect(world.admin.put(f"{world.base}/roles/r", json={"permissions": [permission]}), 422,
           "VALIDATION_FAILED")
    expect(world.admin.put(f"{world.base}/roles/r", json={"rowPolicies": {
        "n\u0430tes": {}}}), 422, "VALIDATION_FAILED")
    expect(world.admin.put(f"{world.base}/roles/r", json={"redact": {'x"y': ["a"]}}), 422,
           "VALIDATION_FAILED")


URL_APPS = ["ab\x00", "Upper", "caf\u00e9", "x" * 64, "with space"]


@pytest.mark.parametrize("ref", URL_APPS, ids=[repr(n)[:40] for n in URL_APPS])
def test_a_url_naming_an_app_no_app_can_be_gets_404_like_any_unknown_app(
        shared: tuple[AppWorld, Caller, str], http: httpx.Client, ref: str) -> None:
    world, member, _ = shared
    app = quote(ref, safe="")
    # A member's token, the operator's token, and nobody's: the same 404 an unknown name
    # gets, never the database's refusal of the value (a NUL byte used to answer 422).
    expect(member.get(f"/{app}/autocrud/notes"), 404, "NOT_FOUND")
    expect(member.get(f"/{app}/autocrud/notes/subscribe"), 404, "NOT_FOUND")
    expect(world.admin.get(f"/admin/apps/{app}"), 404, "NOT_FOUND")
    expect(member.get(f"/{app}/openapi.json"), 404, "NOT_FOUND")
    expect(http.post(f"/{app}/auth/token", json={"email": "a@example.test", "password": "x"}),
           404, "NOT_FOUND")
    preflight = http.options(f"/{app}/autocrud/notes", headers={
        "Origin": "https://app.example.test", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in preflight.headers
    assert preflight.status_code < 500


def test_names_of_exactly_63_bytes_are_accepted(world: AppWorld) -> None:
    long = "t" + "x" * 62
    assert len(long.encode()) == 63
    world.table(long, [{"name": "c" + "y" * 62, "type": "text", "unique": True}])
    world.role("r" + "z" * 62, [f"{long}:*"])


# Query bounds ----------------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "x", "", "1.5", "1e3", "99999999999999999999"])
def test_a_limit_outside_1_to_1000_is_a_bad_request(shared: tuple[AppWorld, Caller, str],
                                                     limit: str) -> None:
    world, caller, _ = shared
    response = caller.get(world.rows("notes"), params={"limit": limit})
    expect(response, 400, "BAD_REQUEST")
    assert_clean_error(response)


def test_limits_1_and_1000_are_accepted(shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    for limit in ("1", "1000"):
        expect(caller.get(world.rows("notes"), params={"limit": limit}), 200)


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"title": "x"}
    for _ in range(depth):
        node = {"not": node}
    return node


def test_filter_nesting_up_to_the_cap_is_accepted_and_beyond_it_refused(
        shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    ok = caller.get(world.rows("notes"), params={"filter": json.dumps(_nested(MAX_DEPTH))})
    expect(ok, 200)
    for depth in (MAX_DEPTH + 1, 200):
        response = caller.get(world.rows("notes"), params={"filter": json.dumps(_nested(depth))})
        expect(response, 400, "BAD_REQUEST")
        assert_clean_error(response)


def test_a_filter_with_too_many_terms_is_refused(shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    wide = {"or": [{"n": i} for i in range(MAX_NODES + 1)]}
    expect(caller.get(world.rows("notes"), params={"filter": json.dumps(wide)}), 400,
           "BAD_REQUEST")


def test_a_body_nested_past_the_parser_limit_is_422_like_any_depth_past_the_limit(
        shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    deep = "[" * 100_000 + "]" * 100_000
    response = caller.post(world.rows("notes"), content=deep,
                           headers={"Content-Type": "application/json"})
    expect(response, 422, "VALIDATION_FAILED")
    assert_clean_error(response)


def test_a_filter_nested_past_the_parser_limit_is_a_bad_request_not_a_crash(
        shared: tuple[AppWorld, Caller, str]) -> None:
    world, caller, _ = shared
    deep_filter = '{"not":' * 2_000 + "{}" + "}" * 2_000
    response = caller.get(world.rows("notes"), params={"filter": deep_filter})
    expect(response, 400, "BAD_REQUEST")
    assert_clean_error(response)


@pytest.mark.parametrize("params", [
    {"order": "nope"}, {"order": "--title"}, {"order": "title;drop"},
    {"after": "not-a-cursor"}, {"after": b64(b'{"o": "uid", "v": 1, "u": "x"}')},
    {"filter": "{not json"}, {"filter": "[]"}, {"filter": '{"title": {"regex": ".*"}}'},
    {"title[regex]": ".*"}, {"nope": "1"}, {"n": "not-a-number"},
])
def test_malformed_list_parameters_are_bad_requests(shared: tuple[AppWorld, Caller, str],
                                                     params: dict[str, str]) -> None:
    world, caller, _ = shared
    response = caller.get(world.rows("notes"), params=params)
    expect(response, 400, "BAD_REQUEST")
    assert_clean_error(response)


# Request bodies over the limit -------------------------------------------------------------

BODY_LIMIT = 2048


@pytest.fixture(scope="module")
def small_bodies(database_url: str, data_dir: Path) -> Iterator[httpx.Client]:
    proc = start_server(database_url, data_dir, AUTHORIC_MAX_BODY_BYTES=str(BODY_LIMIT))
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            yield client
    finally:
        proc.stop()


def _chunks(total: int, size: int = 512) -> Iterator[bytes]:
    body = json.dumps({"title": "x" * total}).encode()
    for i in range(0, len(body), size):
        yield body[i:i + size]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_refused_with_413_and_writes_nothing(
        notes: tuple[AppWorld, Caller, str], small_bodies: httpx.Client, chunked: bool) -> None:
    world, caller, _ = notes
    there = Caller(small_bodies, caller.token)
    headers = {"Content-Type": "application/json"}
    big = BODY_LIMIT * 4
    content: Any = _chunks(big) if chunked else json.dumps({"title": "x" * big}).encode()
    response = there.post(world.rows("notes"), content=content, headers=headers)
    expect(response, 413, "PAYLOAD_TOO_LARGE")
    assert_clean_error(response)
    if chunked:
        assert "content-length" not in {k.lower() for k in response.request.headers}
    assert titles(caller, world) == []
    # the same server still takes a body under the limit
    expect(there.post(world.rows("notes"), json={"title": "small"}), 201)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_unauthenticated_and_admin_routes_refuse_big_bodies_too(
        world: AppWorld, small_bodies: httpx.Client, chunked: bool) -> None:
    big = {"email": "a@example.com", "password": "x" * BODY_LIMIT * 4}
    content: Any = (iter([json.dumps(big).encode()]) if chunked else json.dumps(big).encode())
    response = small_bodies.post(f"/{world.name}/auth/token", content=content,
                                 headers={"Content-Type": "application/json"})
    expect(response, 413, "PAYLOAD_TOO_LARGE")
    content = (iter([json.dumps(big).encode()]) if chunked else json.dumps(big).encode())
    response = small_bodies.post(f"{world.base}/users", content=content, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {world.server.admin_token}"})
    expect(response, 413, "PAYLOAD_TOO_LARGE")
    assert expect(world.admin.get(f"{world.base}/users"), 200)["items"] == []


# Statement timeout -----------------------------------------------------------------------

# Far above what the cheap requests below take on a machine under `stress --cpu 2` (tens of
# ms), far below the slow query (about 3 s here): the outcome never depends on load.
TIMEOUT_MS = 500


@pytest.fixture(scope="module")
def short_statements(database_url: str, data_dir: Path) -> Iterator[httpx.Client]:
    proc = start_server(database_url, data_dir, AUTHORIC_STATEMENT_TIMEOUT_MS=str(TIMEOUT_MS))
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            yield client
        assert "Traceback" not in proc.log(), proc.log()
    finally:
        proc.stop()


def test_a_query_that_outlives_the_statement_timeout_gets_a_clean_503(
        world: AppWorld, short_statements: httpx.Client, database_url: str) -> None:
    world.table("logs", [{"name": "line", "type": "text"}])
    org = world.org("North")
    world.role("reader", ["logs:*"])
    caller = world.caller(org, ["reader"])
    app_uid = uuid.UUID(expect(world.admin.get(f"/admin/apps/{world.name}"), 200)["uid"])
    run_sql(database_url,
            f'INSERT INTO "app_{app_uid.hex}"."logs" (uid, org_uid, line) '
            "SELECT gen_random_uuid(), $1, repeat(md5(i::text), 32) "
            "FROM generate_series(1, 100000) AS i", uuid.UUID(org))
    there = Caller(short_statements, caller.token)
    # a cheap request is served by the same server
    expect(there.get(world.rows("logs"), params={"limit": "1"}), 200)
    # 16 patterns that never match, each scanning 100 MB of text: seconds, against a 500 ms budget
    slow = {"filter": json.dumps({"or": [{"line": {"like": f"%{c}z%"}}
                                         for c in "0123456789abcdef"]}),
            "order": "-line", "limit": "1000"}
    response = there.get(world.rows("logs"), params=slow)
    expect(response, 503, "UNAVAILABLE")
    assert_clean_error(response)
    assert response.headers.get("Retry-After")


# Login throttling ------------------------------------------------------------------------

RATE = 3


@pytest.fixture(scope="module")
def throttled(database_url: str, data_dir: Path) -> Iterator[httpx.Client]:
    # A window far longer than the test: it opens at the first attempt and must not close
    # before the last one, however slow the machine.
    proc = start_server(database_url, data_dir, AUTHORIC_TOKEN_RATE_LIMIT=str(RATE),
                        AUTHORIC_RATE_LIMIT_WINDOW="3600")
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            yield client
    finally:
        proc.stop()


def test_token_requests_past_the_rate_limit_get_429_with_retry_after(
        world: AppWorld, throttled: httpx.Client) -> None:
    org = world.org("North")
    world.role("nobody", [])
    user = world.user()
    world.member(org, user["uid"], ["nobody"])
    url = f"/{world.name}/auth/token"
    for _ in range(RATE):
        expect(throttled.post(url, json={"email": user["email"], "password": "wrong password"}),
               401, "UNAUTHENTICATED")
    # past the limit even the right password is not tried
    response = throttled.post(url, json={"email": user["email"], "password": user["password"]})
    expect(response, 429)
    assert_clean_error(response)
    retry = response.headers.get("Retry-After")
    assert retry is not None and retry.isdigit() and 1 <= int(retry) <= 3600, retry
    # refresh shares the budget
    expect(throttled.post(f"/{world.name}/auth/refresh", json={"refresh_token": "x"}), 429)


# Policies that fail closed -----------------------------------------------------------------


@pytest.fixture
def invoices(world: AppWorld) -> tuple[AppWorld, str]:
    world.table("invoices", [{"name": "number", "type": "text"},
                             {"name": "status", "type": "text"},
                             {"name": "amount", "type": "numeric"}])
    return world, world.org("North")


def test_dropping_a_column_a_row_policy_names_is_refused_naming_the_role_and_access_holds(
        invoices: tuple[AppWorld, str]) -> None:
    world, org = invoices
    world.role("clerk", ["invoices:*"], row_policies={"invoices": {"status": {"ne": "draft"}}})
    clerk = world.caller(org, ["clerk"])
    expect(clerk.post(world.rows("invoices"), json={"number": "A-1", "status": "sent"}), 201)
    body = expect(world.admin.patch(f"{world.base}/tables/invoices",
                                    json={"dropColumns": ["status"]}), 422, "VALIDATION_FAILED")
    assert "policy" in body["error"]["message"]
    assert body["error"]["details"]["role"] == "clerk"
    items = expect(clerk.get(world.rows("invoices")), 200)["items"]
    assert [r["number"] for r in items] == ["A-1"]
    # once the role no longer needs the column, the drop goes through
    world.role("clerk", ["invoices:*"])
    expect(world.admin.patch(f"{world.base}/tables/invoices", json={"dropColumns": ["status"]}),
           200)
    items = expect(clerk.get(world.rows("invoices")), 200)["items"]
    assert [r["number"] for r in items] == ["A-1"] and "status" not in items[0]


@pytest.mark.parametrize("policy", [
    {"nope": "x"},
    {"status": {"regex": ".*"}},
    {"amount": {"like": "1%"}},
    {"amount": "not a number"},
    {"owner": {"eq": {"$principal": "password"}}},
    {"status": {"eq": {"$principal": "password"}}},
    {"or": []},
    _nested(MAX_DEPTH + 1),
])
def test_a_role_whose_row_policy_does_not_compile_against_its_table_is_refused(
        invoices: tuple[AppWorld, str], policy: dict[str, Any]) -> None:
    world, _ = invoices
    response = world.admin.put(f"{world.base}/roles/clerk", json={
        "permissions": ["invoices:*"], "rowPolicies": {"invoices": policy}})
    body = expect(response, 422, "VALIDATION_FAILED")
    assert body["error"]["details"].get("table") == "invoices", body
    expect(world.admin.get(f"{world.base}/roles/clerk"), 404, "NOT_FOUND")


def test_a_role_redacting_an_unknown_column_of_an_existing_table_is_refused(
        invoices: tuple[AppWorld, str]) -> None:
    world, _ = invoices
    response = world.admin.put(f"{world.base}/roles/viewer", json={
        "permissions": ["invoices:read"], "redact": {"invoices": ["amount", "nope"]}})
    body = expect(response, 422, "VALIDATION_FAILED")
    assert "nope" in json.dumps(body["error"]["details"])


def test_a_role_may_name_tables_that_do_not_exist_yet(invoices: tuple[AppWorld, str]) -> None:
    world, _ = invoices
    world.role("planner", ["later:*"], row_policies={"later": {"anything": "x"}},
               redact={"later": ["whatever"]})
    world.role("clerk", ["invoices:*"],
               row_policies={"invoices": {"number": {"eq": {"$principal": "email"}}}},
               redact={"invoices": ["amount"]})


# Redacted columns are not oracles -------------------------------------------------------------


@pytest.mark.parametrize("params", [
    {"amount": "10"},
    {"amount[gte]": "5"},
    {"amount[is_null]": "false"},
    {"filter": json.dumps({"amount": {"gt": 1}})},
    {"filter": json.dumps({"or": [{"number": "A-1"}, {"amount": {"lt": 100}}]})},
    {"filter": json.dumps({"not": {"amount": {"is_null": True}}})},
    {"filter": json.dumps({"and": [{"number": {"like": "%"}}, {"amount": {"in": ["10"]}}]})},
    {"order": "amount"},
    {"order": "-amount"},
])
def test_filtering_or_ordering_on_a_column_the_caller_sees_redacted_is_refused(
        invoices: tuple[AppWorld, str], params: dict[str, str]) -> None:
    world, org = invoices
    world.role("clerk", ["invoices:*"])
    world.role("viewer", ["invoices:read_list", "invoices:read"], redact={"invoices": ["amount"]})
    clerk = world.caller(org, ["clerk"])
    viewer = world.caller(org, ["viewer"])
    expect(clerk.post(world.rows("invoices"), json={"number": "A-1", "amount": "10"}), 201)
    items = expect(viewer.get(world.rows("invoices")), 200)["items"]
    assert items[0]["amount"] == "[redacted]"
    response = viewer.get(world.rows("invoices"), params=params)
    body = expect(response, 400, "BAD_REQUEST")
    assert "redacted" in body["error"]["message"]
    # the clerk, who reads amounts, may filter and order on them
    expect(clerk.get(world.rows("invoices"), params=params), 200)
