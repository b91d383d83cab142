"""The Python client's tenancy calls (contract sections 3a, 3b, 7) against a real server: a
lead invites a clerk who accepts from the mail, changes and removes members, and makes a key
a backend job uses as `Client(url, app, api_key=...)`; the async client lists the same.
"""

from __future__ import annotations

import asyncio

import pytest
from authoric_client import AsyncClient, AuthoricError, Client
from tests.accounts import mails_to, new_email, token_in
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess


def test_a_lead_runs_their_org_and_a_backend_job_uses_an_api_key(
        server: ServerProcess, world: AppWorld) -> None:
    world.table("invoices", [{"name": "number", "type": "text"}])
    expect(world.admin.put(f"{world.base}/roles/lead", json={
        "permissions": ["org.members:*", "org.keys:*", "invoices:*"], "grants": ["clerk"]}), 200)
    expect(world.admin.put(f"{world.base}/roles/clerk", json={"permissions": ["invoices:*"]}), 200)
    org = world.org("Acme")
    lead_user = world.user()
    world.member(org, lead_user["uid"], ["lead"])
    email = new_email()
    with Client(server.url, world.name) as db, Client(server.url, world.name) as clerk:
        db.auth.sign_in(lead_user["email"], lead_user["password"])
        sent = db.org.invitations.create(email, ["clerk"])
        assert (sent["email"], sent["roles"], sent["invitedBy"]) == (email, ["clerk"], lead_user["uid"])
        assert [i["uid"] for i in db.org.invitations.list()] == [sent["uid"]]
        with pytest.raises(AuthoricError) as beyond:
            db.org.invitations.create(new_email(), ["lead"])
        assert (beyond.value.status, beyond.value.details["reason"]) == (403, "role_not_grantable")

        clerk.auth.accept_invitation(token_in(mails_to(world, email)[0]), "a long password")
        clerk.table("invoices").create({"number": "C-1"})
        joined = next(m for m in db.org.members.list()["items"] if m["email"] == email)
        assert joined["roles"] == ["clerk"]
        assert db.org.members.update(joined["user"], [])["roles"] == []

        key = db.org.keys.create("nightly", ["clerk"])
        assert key["key"].startswith("ak_")
        with Client(server.url, world.name, api_key=key["key"]) as job:
            assert [r["number"] for r in job.table("invoices").list().items] == ["C-1"]
            assert [k["uid"] for k in db.org.keys.list()] == [key["uid"]]
            db.org.keys.revoke(key["uid"])
            with pytest.raises(AuthoricError) as revoked:
                job.table("invoices").list()
            assert revoked.value.status == 401

        db.org.members.remove(joined["user"])
        with pytest.raises(AuthoricError) as removed:
            clerk.table("invoices").list()
        assert removed.value.status == 401
        db.org.invitations.revoke(db.org.invitations.create(new_email(), [])["uid"])
        assert db.org.invitations.list() == []

    async def from_async() -> list[str]:
        async with AsyncClient(server.url, world.name) as adb:
            await adb.auth.sign_in(lead_user["email"], lead_user["password"])
            return [m["user"] for m in (await adb.org.members.list())["items"]]

    assert asyncio.run(from_async()) == [lead_user["uid"]]
