"""Forgotten, reset and changed passwords (contract section 3), and no account enumeration.

Callers: people who forgot their password (known and unknown emails), holders of reset links
(fresh, used, expired), signed-in users changing their password (right and wrong current
one), and the tokens a reset or a change leaves behind."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.accounts import (
    account_caller,
    mails_to,
    new_email,
    open_sign_up,
    signed_up,
    token_in,
    without_request_id,
)
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient


def _forgot(world: AppWorld, email: str) -> httpx.Response:
    return world.admin.client.post(f"/{world.name}/auth/password/forgot", json={"email": email})


def _reset(world: AppWorld, token: str, password: str) -> httpx.Response:
    return world.admin.client.post(f"/{world.name}/auth/password/reset",
                                   json={"token": token, "password": password})


def _login(world: AppWorld, email: str, password: str, org: str | None = None) -> httpx.Response:
    body = {"email": email, "password": password} | ({"org": org} if org else {})
    return world.admin.client.post(f"/{world.name}/auth/token", json=body)


def test_forgot_answers_the_same_for_a_known_and_an_unknown_email(world: AppWorld) -> None:
    user = world.user()
    known, unknown = _forgot(world, user["email"]), _forgot(world, new_email())
    assert known.status_code == unknown.status_code == 202
    assert without_request_id(known.json()) == without_request_id(unknown.json())
    assert len(mails_to(world, user["email"])) == 1


def test_sign_up_answers_the_same_for_a_taken_and_a_free_email(world: AppWorld) -> None:
    open_sign_up(world)
    taken = world.user()["email"]
    client = world.admin.client
    answers = [client.post(f"/{world.name}/auth/signup",
                           json={"email": email, "password": "a long password"})
               for email in (taken, new_email())]
    assert answers[0].status_code == answers[1].status_code == 202
    assert without_request_id(answers[0].json()) == without_request_id(answers[1].json())


@pytest.fixture(scope="module")
def counting(database_url: str, tmp_path_factory: pytest.TempPathFactory,
             ) -> Iterator[ServerProcess]:
    """A server whose answers say how many statements each request sent to PostgreSQL; its
    throttle's purge of old counts runs once an hour, so the first request alone sends it."""
    proc = start_server(database_url, tmp_path_factory.mktemp("counting"),
                        AUTHORIC_TEST_COUNT_ROUND_TRIPS="1", AUTHORIC_RATE_LIMIT_WINDOW="3600")
    yield proc
    proc.stop()


def test_sign_up_forgot_and_resend_cost_the_same_round_trips_for_known_and_unknown_emails(
        counting: ServerProcess) -> None:
    """What a request costs the database is what its time leaks: a known address (which gets
    a mail) and an unknown one (which does not) send the same statements, and get the same
    status and body. A verified address asking for a verify mail is "unknown" to resend."""
    with httpx.Client(base_url=counting.url, timeout=30) as client:
        world = AppWorld.create(counting, client)
        open_sign_up(world)
        verified, unverified = world.user()["email"], new_email()
        expect(client.post(f"/{world.name}/auth/signup",
                           json={"email": unverified, "password": "a long password"}), 202)
        expect(_forgot(world, new_email()), 202)  # the throttle's hourly purge goes here

        def cost(path: str, email: str, **more: str) -> tuple[int, Any, int]:
            answer = client.post(f"/{world.name}/auth/{path}", json={"email": email, **more})
            return (answer.status_code, without_request_id(answer.json()),
                    int(answer.headers["X-Authoric-Round-Trips"]))

        forgot = [cost("password/forgot", email) for email in (verified, new_email())]
        resend = [cost("verify/resend", email) for email in (unverified, verified, new_email())]
        assert forgot == forgot[:1] * 2 and resend == resend[:1] * 3, (forgot, resend)
        assert [m["subject"].startswith("Reset") for m in mails_to(world, verified)] == [True]
        assert len(mails_to(world, unverified)) == 2  # the sign-up's and the resent one

        free = new_email()
        signed = [cost("signup", email, password="a long password") for email in (verified, free)]
        assert signed == signed[:1] * 2, signed
        assert mails_to(world, verified)[0]["subject"].startswith("Your")  # newest first
        expect(client.post(f"/{world.name}/auth/verify",
                           json={"token": token_in(mails_to(world, free)[0])}), 200)


@pytest.fixture(scope="module")
def hashing(database_url: str, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[ServerProcess]:
    """A server hashing passwords at the production cost (Argon2id, 64 MiB, three passes),
    where a missing dummy hash would show as a difference of a hash's time."""
    proc = start_server(database_url, tmp_path_factory.mktemp("hashing"),
                        AUTHORIC_TEST_CHEAP_PASSWORD_HASHING="false")
    yield proc
    proc.stop()


def test_a_stranger_timing_sign_up_and_forgot_cannot_tell_a_known_email_from_an_unknown_one(
        hashing: ServerProcess) -> None:
    """Times over repeated calls, interleaved, compared by their medians with a wide margin
    (3x): a taken email on sign-up hashes a dummy password as a free one hashes the real one,
    and forgot does the same work for both. Without the dummy hash a taken email answers in a
    few milliseconds against a hash's hundreds."""
    with httpx.Client(base_url=hashing.url, timeout=60) as client:
        world = AppWorld.create(hashing, client)
        open_sign_up(world)
        known = world.user()["email"]

        def timed(path: str, email: str, **more: str) -> float:
            started = time.perf_counter()
            answer = client.post(f"/{world.name}/auth/{path}", json={"email": email, **more})
            assert answer.status_code == 202, answer.text
            return time.perf_counter() - started

        for path, more in (("signup", {"password": "a long password"}),
                           ("password/forgot", {})):
            taken, free = [], []
            for _ in range(5):
                taken.append(timed(path, known, **more))
                free.append(timed(path, new_email(), **more))
            fast, slow = sorted((statistics.median(taken), statistics.median(free)))
            assert slow < 3 * fast, (path, taken, free)


def _a_writer_of_notes(world: AppWorld) -> tuple[dict[str, Any], str, Caller]:
    """A user who writes notes in an org: (user, org uid, their signed-in caller there)."""
    world.table("notes", [{"name": "body", "type": "text"}])
    world.role("writer", ["notes:*"])
    org = world.org("Northwind")
    user = world.user()
    world.member(org, user["uid"], ["writer"])
    return user, org, world.login(user, org)


def test_a_reset_link_sets_the_password_once_and_ends_every_session_and_token(
        world: AppWorld) -> None:
    user, org, member = _a_writer_of_notes(world)
    expect(member.get(world.rows("notes")), 200)
    expect(_forgot(world, user["email"]), 202)
    token = token_in(mails_to(world, user["email"])[0])
    expect(_reset(world, token, "a brand new password"), 200)
    expect(_reset(world, token, "yet another password"), 400, "BAD_REQUEST")
    expect(member.get(world.rows("notes")), 401, "UNAUTHENTICATED")  # issued before the reset
    expect(world.admin.client.post(f"/{world.name}/auth/refresh",
                                   json={"refresh_token": member.refresh_token}), 401)
    expect(_login(world, user["email"], user["password"], org), 401)
    again = expect(_login(world, user["email"], "a brand new password", org), 200)
    expect(Caller(world.admin.client, again["access_token"]).get(world.rows("notes")), 200)


def test_a_reset_ends_the_open_streams_of_tokens_issued_before_it(world: AppWorld) -> None:
    """Someone holding a stolen token keeps no stream open past the owner's reset: each
    stream gets `reauth` {"reason": "revoked"} and ends; a stream opened after it stays."""
    user, org, member = _a_writer_of_notes(world)
    url = world.server.url
    per_table = SSEClient(url, f"{world.rows('notes')}/subscribe", member.token)
    several = SSEClient(url, f"/{world.name}/subscribe", member.token,
                        params={"tables": "notes"})
    with per_table, several:
        for stream in (per_table, several):
            stream.wait_connected()
        expect(_forgot(world, user["email"]), 202)
        expect(_reset(world, token_in(mails_to(world, user["email"])[0]), "a brand new one"), 200)
        for stream in (per_table, several):
            stream.wait_ended()
            assert [f.data for f in stream.frames if f.event == "reauth"] == [
                {"reason": "revoked"}]
    again = expect(_login(world, user["email"], "a brand new one", org), 200)
    with SSEClient(url, f"{world.rows('notes')}/subscribe", again["access_token"]) as fresh:
        fresh.wait_connected()
        written = expect(Caller(world.admin.client, again["access_token"]).post(
            world.rows("notes"), json={"body": "after"}), 201)
        fresh.wait_for_change(written["uid"], "insert")


def test_a_reset_ends_account_tokens_too(world: AppWorld) -> None:
    open_sign_up(world)
    person = signed_up(world)
    caller = account_caller(world, person)
    expect(caller.get(f"/{world.name}/auth/me"), 200)
    expect(_forgot(world, person["email"]), 202)
    reset_mail = next(m for m in mails_to(world, person["email"]) if "Reset" in m["subject"])
    expect(_reset(world, token_in(reset_mail), "a brand new password"), 200)
    expect(caller.get(f"/{world.name}/auth/me"), 401, "UNAUTHENTICATED")


def test_a_reset_link_for_a_too_short_password_is_refused_and_stays_usable(
        world: AppWorld) -> None:
    user = world.user()
    expect(_forgot(world, user["email"]), 202)
    token = token_in(mails_to(world, user["email"])[0])
    expect(_reset(world, token, "short"), 422, "VALIDATION_FAILED")
    expect(_reset(world, token, "long enough now"), 200)


def test_only_the_newest_reset_link_works(world: AppWorld) -> None:
    user = world.user()
    expect(_forgot(world, user["email"]), 202)
    expect(_forgot(world, user["email"]), 202)
    newest, older = (token_in(m) for m in mails_to(world, user["email"]))
    expect(_reset(world, older, "long enough now"), 400)
    expect(_reset(world, newest, "long enough now"), 200)


def test_a_user_changing_their_password_keeps_this_session_and_ends_the_others(
        world: AppWorld) -> None:
    org = world.org("Northwind")
    user = world.user()
    world.member(org, user["uid"], [])
    here, elsewhere = world.login(user, org), world.login(user, org)
    path = f"/{world.name}/auth/password"
    expect(here.post(path, json={"current": "wrong", "password": "a new password"}), 401)
    expect(here.post(path, json={"current": user["password"], "password": "short"}), 422)
    expect(here.post(path, json={"current": user["password"], "password": "a new password"}),
           204)
    refresh = f"/{world.name}/auth/refresh"
    expect(world.admin.client.post(refresh, json={"refresh_token": elsewhere.refresh_token}), 401)
    expect(world.admin.client.post(refresh, json={"refresh_token": here.refresh_token}), 200)
    expect(_login(world, user["email"], "a new password", org), 200)


def test_a_password_change_ends_the_access_tokens_of_the_users_other_orgs(
        world: AppWorld) -> None:
    """A token stolen for another org of the user stops working at once, not at its expiry;
    the caller's own token goes on."""
    world.table("notes", [{"name": "body", "type": "text"}])
    world.role("writer", ["notes:*"])
    here_org, other_org = world.org("Northwind"), world.org("Southwind")
    user = world.user()
    for org in (here_org, other_org):
        world.member(org, user["uid"], ["writer"])
    here, there = world.login(user, here_org), world.login(user, other_org)
    expect(there.get(world.rows("notes")), 200)
    expect(here.post(f"/{world.name}/auth/password",
                     json={"current": user["password"], "password": "a new password"}), 204)
    expect(there.get(world.rows("notes")), 401, "UNAUTHENTICATED")
    expect(here.get(world.rows("notes")), 200)
    expect(here.get(f"/{world.name}/auth/me"), 200)


def test_a_password_change_with_an_account_token_ends_every_org_token(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    world.role("writer", ["notes:*"])
    open_sign_up(world, emailVerification="off")
    email = new_email()
    pair = expect(world.admin.client.post(f"/{world.name}/auth/signup", json={
        "email": email, "password": "a long password"}), 201)
    account = Caller(world.admin.client, pair["access_token"], pair["refresh_token"])
    me = expect(account.get(f"/{world.name}/auth/me"), 200)
    org = world.org("Northwind")
    world.member(org, me["user"]["uid"], ["writer"])
    member = Caller(world.admin.client, expect(_login(
        world, email, "a long password", org), 200)["access_token"])
    expect(member.get(world.rows("notes")), 200)
    expect(account.post(f"/{world.name}/auth/password",
                        json={"current": "a long password", "password": "a new password"}), 204)
    expect(member.get(world.rows("notes")), 401, "UNAUTHENTICATED")
    expect(account.get(f"/{world.name}/auth/me"), 200)


@pytest.fixture(scope="module")
def strict(database_url: str, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[ServerProcess]:
    """A server allowing 3 sign-in attempts per account a window."""
    proc = start_server(database_url, tmp_path_factory.mktemp("strict-logins"),
                        AUTHORIC_LOGIN_ACCOUNT_LIMIT="3")
    yield proc
    proc.stop()


def test_guesses_at_the_current_password_count_as_sign_in_attempts(
        strict: ServerProcess) -> None:
    """A stolen access token gives no more guesses at the password than the sign-in route:
    both count on the account's one counter, past which both answer 429."""
    with httpx.Client(base_url=strict.url, timeout=30) as client:
        world = AppWorld.create(strict, client)
        org = world.org("Northwind")
        user = world.user()
        world.member(org, user["uid"], [])
        stolen = world.login(user, org)  # attempt 1
        path = f"/{world.name}/auth/password"
        for _ in range(2):  # attempts 2 and 3
            expect(stolen.post(path, json={"current": "a guess", "password": "a new password"}),
                   401, "UNAUTHENTICATED")
        over = stolen.post(path, json={"current": user["password"], "password": "a new password"})
        expect(over, 429, "TOO_MANY_REQUESTS")
        assert int(over.headers["Retry-After"]) >= 1
        expect(_login(world, user["email"], user["password"], org), 429)


def test_a_password_change_needs_a_token(world: AppWorld) -> None:
    expect(world.admin.client.post(f"/{world.name}/auth/password",
                                   json={"current": "x", "password": "long enough"}), 401)
