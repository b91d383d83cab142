"""Sessions (contract section 3) and who the token routes and table routes let in (section 1).

Callers: users logging in, holders of refresh tokens, and holders of tokens that are expired,
tampered with, unsigned (`alg: none`), of another app, or of the wrong type.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    """Whatever a test does, the server never logs a traceback (an unexpected error)."""
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


def _with_notes(world: AppWorld) -> AppWorld:
    world.table("notes", [{"name": "body", "type": "text"}])
    world.role("writer", ["notes:*"])
    world.org("Northwind")
    return world


@pytest.fixture
def notes(world: AppWorld) -> AppWorld:
    return _with_notes(world)


@dataclass
class Clocked:
    """A server of its own whose clock (for token expiry) the test moves forward."""

    server: ServerProcess
    client: httpx.Client
    clock_file: Path

    def notes(self) -> AppWorld:
        return _with_notes(AppWorld.create(self.server, self.client))

    def advance(self, seconds: float) -> None:
        offset = float(self.clock_file.read_text() or 0)
        self.clock_file.write_text(str(offset + seconds))


@pytest.fixture(scope="module")
def clocked_server(database_url: str, tmp_path_factory: pytest.TempPathFactory,
                   ) -> Iterator[tuple[ServerProcess, Path]]:
    data = tmp_path_factory.mktemp("clocked")
    clock_file = data / "clock-offset"
    clock_file.write_text("0")
    proc = start_server(database_url, data, AUTHORIC_TEST_CLOCK_FILE=str(clock_file))
    yield proc, clock_file
    proc.stop()


@pytest.fixture
def clocked(clocked_server: tuple[ServerProcess, Path]) -> Iterator[Clocked]:
    proc, clock_file = clocked_server
    clock_file.write_text("0")
    with httpx.Client(base_url=proc.url, timeout=30) as client:
        yield Clocked(proc, client, clock_file)


def _post(world: AppWorld, route: str, body: Any) -> httpx.Response:
    return world.admin.client.post(f"/{world.name}/auth/{route}", json=body)


def _member(world: AppWorld) -> tuple[dict[str, Any], Caller]:
    org = world.orgs["Northwind"]
    user = world.user()
    world.member(org, user["uid"], ["writer"])
    return user, world.login(user, org)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _parts(token: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    head, body, sig = token.split(".")
    decode = lambda s: json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))  # noqa: E731
    return decode(head), decode(body), sig


def _forge(header: dict[str, Any], payload: dict[str, Any], key: bytes | None) -> str:
    signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    sig = "" if key is None else _b64(hmac.new(key, signing.encode(), hashlib.sha256).digest())
    return f"{signing}.{sig}"


def _with_token(caller: Caller, token: str) -> Caller:
    return Caller(caller.client, token)


# Login -----------------------------------------------------------------------------------

def test_user_logs_in_and_gets_an_rfc6749_token_pair_that_works(notes: AppWorld) -> None:
    user, _ = _member(notes)
    pair = expect(_post(notes, "token", {"email": user["email"], "password": user["password"],
                                         "org": notes.orgs["Northwind"]}), 200)
    assert set(pair) == {"access_token", "refresh_token", "token_type", "expires_in"}
    assert pair["token_type"] == "Bearer" and pair["expires_in"] == 900
    member = Caller(notes.admin.client, pair["access_token"])
    expect(member.post(notes.rows("notes"), json={"body": "hi"}), 201)


def test_user_logging_in_with_a_differently_cased_email_gets_in(notes: AppWorld) -> None:
    user, _ = _member(notes)
    expect(_post(notes, "token", {"email": user["email"].upper(), "password": user["password"]}),
           200)


def _without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    details = {k: v for k, v in body["error"]["details"].items() if k != "requestId"}
    return {"error": {**body["error"], "details": details}}


def test_wrong_email_and_wrong_password_get_the_identical_401(notes: AppWorld) -> None:
    user, _ = _member(notes)
    org = notes.orgs["Northwind"]
    wrong_password = _post(notes, "token", {"email": user["email"], "password": "not it at all",
                                            "org": org})
    wrong_email = _post(notes, "token", {"email": "nobody@example.com",
                                         "password": user["password"], "org": org})
    expect(wrong_password, 401, "UNAUTHENTICATED")
    expect(wrong_email, 401, "UNAUTHENTICATED")
    # Each answer carries its own request id; everything else must be identical.
    assert _without_request_id(wrong_password.json()) == _without_request_id(wrong_email.json())
    assert wrong_password.headers.get("www-authenticate") == wrong_email.headers.get(
        "www-authenticate")


def test_user_of_another_app_cannot_log_into_this_one(notes: AppWorld,
                                                      server: ServerProcess) -> None:
    other = AppWorld.create(server, notes.admin.client)
    org = other.org("Elsewhere")
    other.role("r", [])
    stranger = other.user()
    other.member(org, stranger["uid"], ["r"])
    expect(_post(notes, "token", {"email": stranger["email"], "password": stranger["password"]}),
           401, "UNAUTHENTICATED")


def test_user_with_exactly_one_membership_may_omit_org(notes: AppWorld) -> None:
    user, _ = _member(notes)
    pair = expect(_post(notes, "token", {"email": user["email"], "password": user["password"]}),
                  200)
    member = Caller(notes.admin.client, pair["access_token"])
    row = expect(member.post(notes.rows("notes"), json={"body": "x"}), 201)
    # The token is bound to that one org: a colleague there sees the row.
    _, colleague = _member(notes)
    expect(colleague.get(f"{notes.rows('notes')}/{row['uid']}"), 200)


def test_user_with_two_memberships_gets_422_when_omitting_org(notes: AppWorld) -> None:
    user, _ = _member(notes)
    notes.member(notes.org("Contoso"), user["uid"], ["writer"])
    resp = _post(notes, "token", {"email": user["email"], "password": user["password"]})
    expect(resp, 422, "VALIDATION_FAILED")
    assert "org" in json.dumps(resp.json()["error"]["details"])


def test_user_logging_into_an_org_they_do_not_belong_to_gets_401(notes: AppWorld) -> None:
    user, _ = _member(notes)
    elsewhere = notes.org("Contoso")
    for org in (elsewhere, "not-a-uid"):
        expect(_post(notes, "token", {"email": user["email"], "password": user["password"],
                                      "org": org}), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("body", [{}, {"email": "a@b.io"}, {"password": "long enough"},
                                  {"email": 5, "password": "x"}, ["a@b.io", "pw"]])
def test_login_without_email_and_password_strings_gets_422(notes: AppWorld, body: Any) -> None:
    expect(_post(notes, "token", body), 422, "VALIDATION_FAILED")


def test_login_with_a_non_json_body_gets_415_or_400(notes: AppWorld) -> None:
    url = f"/{notes.name}/auth/token"
    client = notes.admin.client
    expect(client.post(url, data={"email": "a@b.io", "password": "x"}), 415,
           "UNSUPPORTED_MEDIA_TYPE")
    expect(client.post(url, content="{not json", headers={"Content-Type": "application/json"}),
           400, "BAD_REQUEST")


def test_login_to_an_app_that_does_not_exist_gets_404(http: httpx.Client) -> None:
    expect(http.post("/no_such_app_here/auth/token",
                     json={"email": "a@b.io", "password": "long enough"}), 404, "NOT_FOUND")


# Refresh and logout ----------------------------------------------------------------------

def test_refresh_returns_a_new_pair_and_the_old_refresh_token_stops_working(
        notes: AppWorld) -> None:
    _, member = _member(notes)
    pair = expect(_post(notes, "refresh", {"refresh_token": member.refresh_token}), 200)
    assert set(pair) == {"access_token", "refresh_token", "token_type", "expires_in"}
    assert pair["refresh_token"] != member.refresh_token
    expect(_with_token(member, pair["access_token"]).get(notes.rows("notes")), 200)
    expect(_post(notes, "refresh", {"refresh_token": member.refresh_token}),
           401, "UNAUTHENTICATED")


def test_reusing_a_spent_refresh_token_revokes_the_whole_family(notes: AppWorld) -> None:
    _, member = _member(notes)
    first = member.refresh_token
    second = expect(_post(notes, "refresh", {"refresh_token": first}), 200)["refresh_token"]
    third = expect(_post(notes, "refresh", {"refresh_token": second}), 200)["refresh_token"]
    # A thief replays the first token: refused, and the legitimate newest one dies with it.
    expect(_post(notes, "refresh", {"refresh_token": first}), 401, "UNAUTHENTICATED")
    expect(_post(notes, "refresh", {"refresh_token": third}), 401, "UNAUTHENTICATED")


def test_reuse_in_one_session_leaves_the_users_other_sessions_alone(notes: AppWorld) -> None:
    user, laptop = _member(notes)
    phone = notes.login(user, notes.orgs["Northwind"])
    expect(_post(notes, "refresh", {"refresh_token": laptop.refresh_token}), 200)
    expect(_post(notes, "refresh", {"refresh_token": laptop.refresh_token}), 401)
    expect(_post(notes, "refresh", {"refresh_token": phone.refresh_token}), 200)


def test_logout_is_204_and_the_refresh_token_then_fails(notes: AppWorld) -> None:
    _, member = _member(notes)
    resp = _post(notes, "logout", {"refresh_token": member.refresh_token})
    assert resp.status_code == 204 and resp.content == b""
    expect(_post(notes, "refresh", {"refresh_token": member.refresh_token}),
           401, "UNAUTHENTICATED")


def test_logout_after_a_refresh_revokes_the_newest_refresh_token_too(notes: AppWorld) -> None:
    _, member = _member(notes)
    newer = expect(_post(notes, "refresh", {"refresh_token": member.refresh_token}),
                   200)["refresh_token"]
    assert _post(notes, "logout", {"refresh_token": newer}).status_code == 204
    expect(_post(notes, "refresh", {"refresh_token": newer}), 401, "UNAUTHENTICATED")


def test_access_token_used_as_a_refresh_token_gets_401(notes: AppWorld) -> None:
    _, member = _member(notes)
    expect(_post(notes, "refresh", {"refresh_token": member.token}), 401, "UNAUTHENTICATED")


def test_refresh_token_of_another_app_gets_401(notes: AppWorld, server: ServerProcess) -> None:
    other = AppWorld.create(server, notes.admin.client)
    org = other.org("Elsewhere")
    other.role("r", [])
    stranger = other.caller(org, ["r"])
    expect(_post(notes, "refresh", {"refresh_token": stranger.refresh_token}),
           401, "UNAUTHENTICATED")
    # The refusal did not spend it: it still works where it belongs.
    expect(_post(other, "refresh", {"refresh_token": stranger.refresh_token}), 200)


@pytest.mark.parametrize("body", [{}, {"refresh_token": 5}, ["token"]])
def test_refresh_without_a_refresh_token_string_gets_422(notes: AppWorld, body: Any) -> None:
    expect(_post(notes, "refresh", body), 422, "VALIDATION_FAILED")


def test_refresh_with_garbage_gets_401(notes: AppWorld) -> None:
    expect(_post(notes, "refresh", {"refresh_token": "not.a.jwt"}), 401, "UNAUTHENTICATED")
    expect(_post(notes, "refresh", {"refresh_token": ""}), 401, "UNAUTHENTICATED")


# Access tokens on table routes -----------------------------------------------------------

def test_caller_without_a_token_gets_401(notes: AppWorld, http: httpx.Client) -> None:
    expect(http.get(notes.rows("notes")), 401, "UNAUTHENTICATED")
    expect(http.get(notes.rows("notes"), headers={"Authorization": "Basic YTpi"}),
           401, "UNAUTHENTICATED")
    expect(http.post(notes.rows("notes"), json={"body": "x"}), 401, "UNAUTHENTICATED")


def test_holder_of_an_expired_access_token_gets_401_token_expired_and_can_refresh(
        clocked: Clocked) -> None:
    notes = clocked.notes()
    expect(notes.admin.patch(notes.base, json={"settings": {"accessTokenTtl": 60}}), 200)
    _, member = _member(notes)
    expect(member.get(notes.rows("notes")), 200)
    clocked.advance(61)  # the server's clock: no waiting, no race with a busy machine
    expect(member.get(notes.rows("notes")), 401, "TOKEN_EXPIRED")
    expect(member.post(notes.rows("notes"), json={"body": "late"}), 401, "TOKEN_EXPIRED")
    pair = expect(_post(notes, "refresh", {"refresh_token": member.refresh_token}), 200)
    assert pair["expires_in"] == 60
    fresh = _with_token(member, pair["access_token"])
    expect(fresh.get(notes.rows("notes")), 200)
    # Halfway through its life it works. The server's clock still runs in real time between
    # steps, and `exp` is whole seconds, so the margin left here is ~29 s, not one.
    clocked.advance(30)
    expect(fresh.get(notes.rows("notes")), 200)
    clocked.advance(31)
    expect(fresh.get(notes.rows("notes")), 401, "TOKEN_EXPIRED")


def test_holder_of_a_refresh_token_past_its_lifetime_gets_401(clocked: Clocked) -> None:
    notes = clocked.notes()
    expect(notes.admin.patch(notes.base, json={"settings": {"refreshTokenTtl": 3600}}), 200)
    _, member = _member(notes)
    clocked.advance(3601)
    expect(_post(notes, "refresh", {"refresh_token": member.refresh_token}), 401)


def test_expired_refresh_tokens_are_deleted_at_a_later_login(clocked: Clocked,
                                                             database_url: str) -> None:
    notes = clocked.notes()
    expect(notes.admin.patch(notes.base, json={"settings": {"refreshTokenTtl": 3600}}), 200)
    clocked.advance(-7200)  # issued "two hours ago": expired by the database's own clock
    user, _ = _member(notes)
    assert _refresh_rows(database_url, user["uid"]) == 1
    clocked.advance(7200)
    _member(notes)  # anyone's login clears out a batch of expired rows
    assert _refresh_rows(database_url, user["uid"]) == 0


def _refresh_rows(database_url: str, user_uid: str) -> int:
    async def count() -> int:
        conn = await asyncpg.connect(database_url)
        try:
            return int(await conn.fetchval(
                "SELECT count(*) FROM authoric.refresh_tokens WHERE user_uid = $1",
                uuid.UUID(user_uid)))
        finally:
            await conn.close()

    return asyncio.run(count())


def test_holder_of_a_token_with_a_tampered_signature_gets_401(notes: AppWorld) -> None:
    _, member = _member(notes)
    assert member.token is not None
    head, body, sig = member.token.split(".")
    flipped = ("B" if sig[0] == "A" else "A") + sig[1:]  # the first char: all 6 bits count
    expect(_with_token(member, f"{head}.{body}.{flipped}").get(notes.rows("notes")),
           401, "UNAUTHENTICATED")


def test_member_who_edits_the_org_claim_of_their_token_gets_401(notes: AppWorld) -> None:
    _, member = _member(notes)
    other_org = notes.org("Contoso")
    assert member.token is not None
    header, payload, sig = _parts(member.token)
    payload["org"] = other_org
    signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    expect(_with_token(member, f"{signing}.{sig}").get(notes.rows("notes")),
           401, "UNAUTHENTICATED")


def test_holder_of_an_alg_none_token_gets_401(notes: AppWorld) -> None:
    _, member = _member(notes)
    assert member.token is not None
    _, payload, _ = _parts(member.token)
    for alg in ("none", "None", "NONE"):
        token = _forge({"alg": alg, "typ": "JWT"}, payload, key=None)
        expect(_with_token(member, token).get(notes.rows("notes")), 401, "UNAUTHENTICATED")


def test_holder_of_a_token_signed_with_another_key_gets_401(notes: AppWorld) -> None:
    _, member = _member(notes)
    assert member.token is not None
    header, payload, _ = _parts(member.token)
    token = _forge(header, {**payload, "exp": int(time.time()) + 3600}, key=b"guessed secret")
    expect(_with_token(member, token).get(notes.rows("notes")), 401, "UNAUTHENTICATED")


def test_holder_of_a_token_of_another_app_gets_401(notes: AppWorld, server: ServerProcess) -> None:
    other = AppWorld.create(server, notes.admin.client)
    other.table("notes", [{"name": "body", "type": "text"}])
    org = other.org("Northwind")
    other.role("writer", ["notes:*"])
    stranger = other.caller(org, ["writer"])
    expect(stranger.get(other.rows("notes")), 200)
    expect(stranger.get(notes.rows("notes")), 401, "UNAUTHENTICATED")
    expect(stranger.post(notes.rows("notes"), json={"body": "x"}), 401, "UNAUTHENTICATED")


def test_holder_of_a_refresh_token_used_as_an_access_token_gets_401(notes: AppWorld) -> None:
    _, member = _member(notes)
    assert member.refresh_token is not None
    expect(_with_token(member, member.refresh_token).get(notes.rows("notes")),
           401, "UNAUTHENTICATED")


@pytest.mark.parametrize("token", ["garbage", "a.b.c", "x" * 5000, "eyJhbGciOiJIUzI1NiJ9..."])
def test_holder_of_a_malformed_token_gets_401(notes: AppWorld, http: httpx.Client,
                                              token: str) -> None:
    expect(http.get(notes.rows("notes"), headers={"Authorization": f"Bearer {token}"}),
           401, "UNAUTHENTICATED")


def test_app_user_token_on_admin_routes_gets_401(notes: AppWorld) -> None:
    _, member = _member(notes)
    expect(member.get("/admin/apps"), 401, "UNAUTHENTICATED")
    expect(member.get(f"{notes.base}/tables"), 401, "UNAUTHENTICATED")


def test_admin_token_on_a_table_route_gets_401(notes: AppWorld) -> None:
    expect(notes.admin.get(notes.rows("notes")), 401, "UNAUTHENTICATED")
