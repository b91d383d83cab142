"""An org run by its members (section 3a): roles' `grants`, the member routes, the ceiling.

Callers: the operator defining roles; an owner, a lead (who manages clerks), a clerk and a
member of another org, each with their own access token, over real HTTP against the
session's server.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.sse import SSEClient, db_fetch


def role(world: AppWorld, name: str, permissions: list[str], grants: list[str] | None = None,
         **extra: Any) -> dict[str, Any]:
    body = {"permissions": permissions, "grants": grants or [], **extra}
    return expect(world.admin.put(f"{world.base}/roles/{name}", json=body), 200)


def saas(world: AppWorld) -> dict[str, Any]:
    """Notes, and the roles of a small SaaS: an owner hands out anything, a lead manages
    clerks, a clerk writes notes."""
    world.table("notes", [{"name": "text", "type": "text"}])
    role(world, "owner", ["*:*"], ["owner", "lead", "clerk"])
    role(world, "lead", ["notes:*", "org.members:*"], ["clerk"])
    role(world, "clerk", ["notes:*"])
    org = world.org("Acme")
    people = {name: world.user() for name in ("owner", "lead", "clerk")}
    for name, user in people.items():
        world.member(org, user["uid"], [name])
    return {"org": org, "people": people,
            **{name: world.login(user, org) for name, user in people.items()}}


def members_path(world: AppWorld, user: str = "") -> str:
    return f"/{world.name}/org/members" + (f"/{user}" if user else "")


def test_the_operator_saves_a_roles_grants_and_org_permissions_and_reads_them_back(
        world: AppWorld) -> None:
    saved = role(world, "lead", ["org.members:*", "org.keys:read_list", "*:read"],
                 ["clerk", "viewer", "clerk"])
    assert saved["grants"] == ["clerk", "viewer"]
    got = expect(world.admin.get(f"{world.base}/roles/lead"), 200)
    assert got["grants"] == ["clerk", "viewer"]
    assert got["permissions"] == ["org.members:*", "org.keys:read_list", "*:read"]
    listed = expect(world.admin.get(f"{world.base}/roles"), 200)["items"]
    assert [r["grants"] for r in listed if r["name"] == "lead"] == [["clerk", "viewer"]]


@pytest.mark.parametrize("body", [
    {"permissions": ["org.bogus:read"]},
    {"permissions": ["org.members:approve"]},
    {"permissions": [], "grants": ["Not A Role"]},
    {"permissions": [], "grants": "clerk"},
])
def test_the_operator_gets_422_for_a_bad_org_permission_or_grant(world: AppWorld,
                                                                  body: dict[str, Any]) -> None:
    expect(world.admin.put(f"{world.base}/roles/x", json=body), 422, "VALIDATION_FAILED")


def test_a_table_cannot_be_named_like_an_org_resource(world: AppWorld) -> None:
    expect(world.admin.post(f"{world.base}/tables", json={
        "name": "org.members", "columns": [{"name": "a", "type": "text"}]}), 422)


def test_a_lead_lists_the_orgs_members_with_roles_and_join_times(world: AppWorld) -> None:
    s = saas(world)
    page = expect(s["lead"].get(members_path(world)), 200)
    by_user = {m["user"]: m for m in page["items"]}
    assert {u["uid"]: by_user[u["uid"]]["roles"] for u in s["people"].values()} == {
        s["people"][n]["uid"]: [n] for n in ("owner", "lead", "clerk")}
    assert all(m["email"] and m["joinedAt"].endswith("Z") for m in page["items"])
    assert page["next"] is None
    first = expect(s["lead"].get(members_path(world), params={"limit": 2}), 200)
    rest = expect(s["lead"].get(members_path(world), params={"after": first["next"]}), 200)
    assert [m["user"] for m in first["items"] + rest["items"]] == sorted(by_user)


def test_a_role_granted_an_action_on_every_table_gets_no_org_resource_with_it(
        world: AppWorld) -> None:
    """`*:read_list`, `*:create`, `*:delete` are every table's: a wide reader or writer role
    lists no members, invites nobody, makes no keys. Only `*:*` includes the org's own."""
    s = saas(world)
    role(world, "wide", ["*:read_list", "*:read", "*:create", "*:update", "*:delete"],
         ["clerk"])
    wide_user = world.user()
    world.member(s["org"], wide_user["uid"], ["wide"])
    wide = world.login(wide_user, s["org"])
    expect(wide.get(world.rows("notes")), 200)  # every table's actions, as granted
    refused = expect(wide.get(members_path(world)), 403, "FORBIDDEN")
    assert refused["error"]["details"]["permission"] == "org.members:read_list"
    expect(wide.delete(members_path(world, s["people"]["clerk"]["uid"])), 403, "FORBIDDEN")
    expect(wide.post(f"/{world.name}/org/invitations",
                     json={"email": f"new-{wide_user['uid']}@example.com", "roles": []}),
           403, "FORBIDDEN")
    expect(wide.post(f"/{world.name}/org/keys", json={"name": "job", "roles": []}),
           403, "FORBIDDEN")
    expect(wide.get(f"/{world.name}/org/keys"), 403, "FORBIDDEN")
    # The owner's `*:*` still includes both.
    expect(s["owner"].get(members_path(world)), 200)
    expect(s["owner"].get(f"/{world.name}/org/keys"), 200)


def test_a_clerk_without_the_permission_cannot_list_or_change_members(world: AppWorld) -> None:
    s = saas(world)
    expect(s["clerk"].get(members_path(world)), 403, "FORBIDDEN")
    lead_uid = s["people"]["lead"]["uid"]
    refused = expect(s["clerk"].delete(members_path(world, lead_uid)), 403, "FORBIDDEN")
    assert refused["error"]["details"]["permission"] == "org.members:delete"


def test_a_lead_assigns_roles_within_their_grants_and_not_beyond(world: AppWorld) -> None:
    s = saas(world)
    newcomer = world.user()
    world.member(s["org"], newcomer["uid"], [])
    got = expect(s["lead"].put(members_path(world, newcomer["uid"]), json={"roles": ["clerk"]}), 200)
    assert got == {"org": s["org"], "user": newcomer["uid"], "roles": ["clerk"]}
    refused = expect(s["lead"].put(members_path(world, newcomer["uid"]),
                                   json={"roles": ["clerk", "lead"]}), 403, "FORBIDDEN")
    details = refused["error"]["details"]
    assert (details["reason"], details["roles"]) == ("role_not_grantable", ["lead"])
    expect(s["lead"].put(members_path(world, newcomer["uid"]), json={"roles": ["nope"]}), 422)
    roles = {m["user"]: m["roles"] for m in
             expect(world.admin.get(f"{world.base}/orgs/{s['org']}/members"), 200)["items"]}
    assert roles[newcomer["uid"]] == ["clerk"]


def test_a_lead_cannot_remove_or_demote_an_owner(world: AppWorld) -> None:
    s = saas(world)
    owner = s["people"]["owner"]["uid"]
    for response in (s["lead"].delete(members_path(world, owner)),
                     s["lead"].put(members_path(world, owner), json={"roles": ["clerk"]})):
        body = expect(response, 403, "FORBIDDEN")
        assert body["error"]["details"]["reason"] == "role_not_grantable"
    expect(s["owner"].get(world.rows("notes")), 200)  # the owner is untouched


def test_a_member_cannot_change_or_remove_their_own_roles(world: AppWorld) -> None:
    s = saas(world)
    for caller, name in ((s["owner"], "owner"), (s["lead"], "lead")):
        me = s["people"][name]["uid"]
        for response in (caller.put(members_path(world, me), json={"roles": ["owner"]}),
                         caller.put(members_path(world, me), json={"roles": [name]}),
                         caller.delete(members_path(world, me))):
            body = expect(response, 403, "FORBIDDEN")
            assert body["error"]["details"]["reason"] == "role_not_grantable"


def test_a_member_of_org_a_acting_on_org_b_members_by_uid_gets_404(world: AppWorld) -> None:
    s = saas(world)
    other = world.org("Globex")
    stranger = world.user()
    world.member(other, stranger["uid"], ["clerk"])
    for response in (s["owner"].put(members_path(world, stranger["uid"]), json={"roles": ["clerk"]}),
                     s["owner"].delete(members_path(world, stranger["uid"])),
                     s["owner"].delete(members_path(world, "not-a-uid"))):
        expect(response, 404, "NOT_FOUND")
    memberships = expect(world.admin.get(f"{world.base}/users/{stranger['uid']}/memberships"), 200)
    assert memberships["items"] == [{"org": other, "orgName": "Globex", "roles": ["clerk"]}]


def test_a_removed_clerk_is_refused_at_once_and_their_open_stream_closes(
        world: AppWorld) -> None:
    s = saas(world)
    clerk: Caller = s["clerk"]
    with SSEClient(world.server.url, f"{world.rows('notes')}/subscribe", clerk.token) as stream:
        stream.wait_connected()
        expect(s["lead"].delete(members_path(world, s["people"]["clerk"]["uid"])), 204)
        stream.wait_ended(timeout=15)  # no change in the org is needed for it to end
    expect(clerk.get(world.rows("notes")), 401, "UNAUTHENTICATED")
    expect(clerk.post(f"/{world.name}/auth/refresh",
                      json={"refresh_token": clerk.refresh_token}), 401)


def test_every_member_change_is_in_the_audit_log_with_its_actor(world: AppWorld) -> None:
    s = saas(world)
    newcomer = world.user()
    world.member(s["org"], newcomer["uid"], [])  # the operator's
    expect(s["lead"].put(members_path(world, newcomer["uid"]), json={"roles": ["clerk"]}), 200)
    expect(s["lead"].delete(members_path(world, newcomer["uid"])), 204)
    audit = f"{world.base}/audit"
    by_members = expect(world.admin.get(audit, params={"actor": "member"}), 200)["items"]
    lead = {"kind": "member", "user": s["people"]["lead"]["uid"], "org": s["org"]}
    assert [(e["action"], e["actor"]) for e in by_members] == [
        ("member.delete", lead), ("member.put", lead)]
    assert by_members[1]["details"]["roles"] == ["clerk"]
    operators = expect(world.admin.get(audit, params={"actor": "operator"}), 200)["items"]
    assert operators and all(e["actor"] == {"kind": "operator"} for e in operators)
    assert f"orgs/{s['org']}/members/{newcomer['uid']}" in {e["target"] for e in operators}
    expect(world.admin.get(audit, params={"actor": "robot"}), 400, "BAD_REQUEST")


def test_two_concurrent_grants_cannot_together_exceed_the_ceiling(
        world: AppWorld, database_url: str) -> None:
    """The owner takes the lead's role away while the lead promotes a newcomer. Whichever
    commits first, the end state is one that the two could reach one after the other: if the
    newcomer is a clerk, the lead's promotion committed while the lead was still a lead."""
    s = saas(world)
    lead_uid = s["people"]["lead"]["uid"]
    for _ in range(6):
        world.member(s["org"], lead_uid, ["lead"])
        lead = world.login(s["people"]["lead"], s["org"])
        newcomer = world.user()
        world.member(s["org"], newcomer["uid"], [])
        with concurrent.futures.ThreadPoolExecutor(2) as pool, \
                httpx.Client(base_url=world.server.url, timeout=30) as a, \
                httpx.Client(base_url=world.server.url, timeout=30) as b:
            demote = pool.submit(Caller(a, s["owner"].token).put, members_path(world, lead_uid),
                                 json={"roles": ["clerk"]})
            promote = pool.submit(Caller(b, lead.token).put, members_path(world, newcomer["uid"]),
                                  json={"roles": ["clerk"]})
            assert demote.result().status_code == 200
            promoted = promote.result()
        roles = db_fetch(database_url, "SELECT roles FROM authoric.members WHERE user_uid = $1",
                         newcomer["uid"])[0]["roles"]
        # A promotion answered 200 wrote the role; a refused one wrote nothing.
        assert (promoted.status_code == 200) == (roles == ["clerk"]), promoted.text
        assert promoted.status_code in (200, 403), promoted.text


def test_a_lead_whose_role_is_taken_away_while_they_wait_is_judged_on_the_new_roles(
        world: AppWorld, database_url: str) -> None:
    """The lead's promotion reaches the database while the owner's demotion of the lead holds
    the lead's membership: the promotion waits for it, reads the lead's new roles, and is
    refused; the newcomer stays without a role."""
    import asyncio

    import asyncpg

    s = saas(world)
    lead_uid, newcomer = s["people"]["lead"]["uid"], world.user()
    world.member(s["org"], newcomer["uid"], [])

    async def scenario() -> tuple[int, list[str]]:
        conn = await asyncpg.connect(database_url)
        try:
            tx = conn.transaction()
            await tx.start()
            # The owner's demotion, in progress: the lead's membership row is held.
            await conn.execute("UPDATE authoric.members SET roles = '{clerk}' "
                               "WHERE user_uid = $1", lead_uid)
            await conn.execute("UPDATE authoric.apps SET version = version + 1 "
                               "WHERE name = $1", world.name)
            loop = asyncio.get_running_loop()
            promotion = loop.run_in_executor(None, lambda: s["lead"].put(
                members_path(world, newcomer["uid"]), json={"roles": ["clerk"]}))
            # The promotion is waiting on the lead's locked membership.
            for _ in range(200):
                waiting = await conn.fetchval(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE NOT l.granted AND l.locktype = 'transactionid' "
                    "AND a.datname = current_database()")
                if waiting:
                    break
                await asyncio.sleep(0.05)
            assert waiting, "the promotion never waited on the lead's membership"
            await tx.commit()
            answered = await promotion
            roles = await conn.fetchval("SELECT roles FROM authoric.members WHERE user_uid = $1",
                                        newcomer["uid"])
            return answered.status_code, list(roles)
        finally:
            await conn.close()

    status, roles = asyncio.run(scenario())
    assert (status, roles) == (403, [])


def test_an_api_key_is_no_bearer_on_the_org_routes(world: AppWorld) -> None:
    s = saas(world)
    key = expect(world.admin.post(f"{world.base}/orgs/{s['org']}/keys",
                                  json={"name": "job", "roles": ["owner"]}), 201)["key"]
    as_key = Caller(world.admin.client, key)
    expect(as_key.get(members_path(world)), 401, "UNAUTHENTICATED")
    expect(as_key.get(f"/{world.name}/org/keys"), 401, "UNAUTHENTICATED")
