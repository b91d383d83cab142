"""Accounts through the Python client (contract sections 3 and 7): a person signs up, verifies
by the mailed token, signs in with an account token, creates an org, resets, changes their
password, lists sessions and switches org; blocking and async alike."""

from __future__ import annotations

import pytest
from authoric_client import AsyncClient, AuthoricError, Client
from tests.accounts import mails_to, new_email, open_sign_up, token_in
from tests.scenario import AppWorld, expect


def _token(world: AppWorld, email: str, subject: str) -> str:
    return token_in(next(m for m in mails_to(world, email) if subject in m["subject"]))


def test_a_person_signs_up_verifies_and_creates_an_org_with_the_blocking_client(
        world: AppWorld) -> None:
    open_sign_up(world, orgCreation="users")
    email = new_email()
    with Client(world.server.url, world.name) as db:
        assert db.auth.sign_up(email, "a long password") == {"status": "verification_sent"}
        with pytest.raises(AuthoricError) as refused:
            db.auth.sign_in(email, "a long password")
        assert refused.value.details["reason"] == "email_not_verified"
        db.auth.verify_email(_token(world, email, "Confirm"))
        db.auth.sign_in(email, "a long password")
        assert db.auth.me()["org"] is None
        org = db.orgs.create("Acme")
        assert db.auth.me()["org"] == org["uid"]


async def test_a_person_resets_changes_lists_sessions_and_switches_org_with_the_async_client(
        world: AppWorld) -> None:
    open_sign_up(world, emailVerification="off")
    email = new_email()
    async with AsyncClient(world.server.url, world.name) as db:
        assert "access_token" in await db.auth.sign_up(email, "a long password")
        await db.auth.request_password_reset(email)
        await db.auth.reset_password(_token(world, email, "Reset"), "a second password")
        await db.auth.sign_in(email, "a second password")
        await db.auth.change_password("a second password", "a third password")
        with pytest.raises(AuthoricError) as wrong:
            await db.auth.change_password("not it", "a fourth password")
        assert wrong.value.status == 401
        sessions = await db.auth.sessions()
        assert [s["current"] for s in sessions] == [True]
        me = await db.auth.me()
        org = world.org("North")
        world.role("viewer", [])
        world.member(org, me["user"]["uid"], ["viewer"])
        await db.auth.switch_org(org)
        assert (await db.auth.me())["roles"] == ["viewer"]
        other = [s for s in await db.auth.sessions() if not s["current"]]
        await db.auth.end_session(other[0]["id"])
        assert len(await db.auth.sessions()) == 1
    expect(world.admin.get(world.base), 200)
