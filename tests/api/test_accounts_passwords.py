"""Forgotten, reset and changed passwords (contract section 3), and no account enumeration.

Callers: people who forgot their password (known and unknown emails), holders of reset links
(fresh, used, expired), signed-in users changing their password (right and wrong current
one), and the tokens a reset or a change leaves behind."""

from __future__ import annotations

import statistics
import time
from typing import Any

import httpx

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


def _median_seconds(call: object, times: int = 7) -> float:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        call()  # type: ignore[operator]
        spent.append(time.perf_counter() - started)
    return statistics.median(spent)


def test_forgot_and_sign_up_take_about_as_long_for_known_and_unknown_emails(
        world: AppWorld) -> None:
    """Wide margins on medians: a factor of three, plus 100 ms for forgot, whose answers take
    a few milliseconds either way, so that a busy machine's noise is not read as a leak. A
    hash skipped for one side would be a factor of ten or more at sign-up."""
    open_sign_up(world)
    known = world.user()["email"]
    client = world.admin.client

    def sign_up(email: str) -> object:
        return lambda: client.post(f"/{world.name}/auth/signup",
                                   json={"email": email, "password": "a long password"})

    known_time = _median_seconds(sign_up(known))
    unknown_time = _median_seconds(lambda: sign_up(new_email())())
    assert 1 / 3 < known_time / unknown_time < 3, (known_time, unknown_time)
    known_time = _median_seconds(lambda: _forgot(world, known))
    unknown_time = _median_seconds(lambda: _forgot(world, new_email()))
    assert known_time < 3 * unknown_time + 0.1, (known_time, unknown_time)
    assert unknown_time < 3 * known_time + 0.1, (known_time, unknown_time)


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


def test_a_password_change_needs_a_token(world: AppWorld) -> None:
    expect(world.admin.client.post(f"/{world.name}/auth/password",
                                   json={"current": "x", "password": "long enough"}), 401)
