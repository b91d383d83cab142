"""State machine: members holding random grants run their org (section 3a, 3b), and every
answer, and every membership, is what a plain-Python model of the contract says.

Each example is a new app whose four roles get random `org.members` / `org.keys`
permissions and random `grants`; the operator makes three people members with random roles.
Then, in random order, random members (or people removed meanwhile) invite addresses (new or
known) with random roles, accept invitations from the mailbox, change each other's roles,
remove each other and create keys. The model predicts each status (401, 403 with or without
`role_not_grantable`, 404, 409, 201/200/204) from the contract alone; after every step the
org's memberships (read as the operator) must equal the model's. Since the model only ever
gives a role through the operator or an actor whose grants include it, that equality is the
invariant "nobody holds a role that the operator, or someone whose grants include it, did
not give them".

Bounded (a handful of examples of a dozen steps) so that it runs well under a minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.accounts import mails_to, new_email, token_in
from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess

ROLES = ("owner", "admin", "clerk", "viewer")
PERMISSIONS = ("org.members:*", "org.members:read_list", "org.members:create",
               "org.members:update", "org.members:delete", "org.keys:create", "*:*")
PASSWORD = "a long password"
roles_st = st.frozensets(st.sampled_from(ROLES))


def allows(permissions: set[str], action: str) -> bool:
    resource, _, verb = action.partition(":")
    return any(p in (action, f"{resource}:*", "*:*", f"*:{verb}") for p in permissions)


@dataclass
class Person:
    email: str
    uid: str | None = None  # once they have an account
    roles: frozenset[str] | None = None  # None: not a member of the org
    caller: Caller | None = None  # a token of their current membership
    password: str = PASSWORD


@dataclass
class Model:
    permissions: dict[str, set[str]]
    grants: dict[str, frozenset[str]]
    people: list[Person] = field(default_factory=list)
    invited: dict[str, frozenset[str]] = field(default_factory=dict)  # email → roles

    def perms(self, person: Person) -> set[str]:
        return {p for r in person.roles or () for p in self.permissions[r]}

    def grantable(self, person: Person) -> frozenset[str]:
        return frozenset(g for r in person.roles or () for g in self.grants[r])


class TenancyMachine(RuleBasedStateMachine):
    server: ServerProcess  # set on the subclass the test makes

    def __init__(self) -> None:
        super().__init__()
        self.client = httpx.Client(base_url=self.server.url, timeout=30)
        self.world = AppWorld.create(self.server, self.client)
        self.model: Model
        self.org = ""

    def teardown(self) -> None:
        self.client.close()

    @initialize(config=st.fixed_dictionaries({r: st.tuples(
                    st.sets(st.sampled_from(PERMISSIONS), max_size=3), roles_st) for r in ROLES}),
                starting=st.lists(roles_st, min_size=3, max_size=3))
    def start(self, config: dict[str, tuple[set[str], frozenset[str]]],
              starting: list[frozenset[str]]) -> None:
        world = self.world
        for name, (permissions, grants) in config.items():
            expect(world.admin.put(f"{world.base}/roles/{name}", json={
                "permissions": sorted(permissions), "grants": sorted(grants)}), 200)
        self.model = Model({r: set(p) for r, (p, _) in config.items()},
                           {r: g for r, (_, g) in config.items()})
        self.org = world.org("Acme")
        for roles in starting:  # the operator's: above every ceiling
            user = world.user()
            world.member(self.org, user["uid"], sorted(roles))
            self.model.people.append(Person(user["email"], user["uid"], roles,
                                            world.login(user, self.org), user["password"]))

    def _actor(self, i: int) -> Person:
        return self.model.people[i % len(self.model.people)]

    def _signed_in(self, i: int) -> Person | None:
        """The i-th person who holds (or held) a token: the starting three always do."""
        people = [p for p in self.model.people if p.caller is not None]
        return people[i % len(people)]

    def _call(self, actor: Person, method: str, path: str, **kw: Any) -> httpx.Response:
        assert actor.caller is not None
        return actor.caller.request(method, f"/{self.world.name}{path}", **kw)

    def _expect_refusal(self, answer: httpx.Response, actor: Person, action: str,
                        beyond: bool, missing: bool = False) -> bool:
        """Check a refusal the model predicts; True when the request should have passed."""
        if actor.roles is None:
            expect(answer, 401, "UNAUTHENTICATED")
        elif not allows(self.model.perms(actor), action):
            body = expect(answer, 403, "FORBIDDEN")
            assert body["error"]["details"].get("reason") != "role_not_grantable"
        elif missing:
            expect(answer, 404, "NOT_FOUND")
        elif beyond:
            body = expect(answer, 403, "FORBIDDEN")
            assert body["error"]["details"]["reason"] == "role_not_grantable"
        else:
            return True
        return False

    @rule(i=st.integers(0, 20), known=st.integers(0, 20), fresh=st.booleans(), roles=roles_st)
    def invite(self, i: int, known: int, fresh: bool, roles: frozenset[str]) -> None:
        actor = self._signed_in(i)
        assert actor is not None
        invitee = Person(new_email()) if fresh else self._actor(known)
        answer = self._call(actor, "POST", "/org/invitations",
                            json={"email": invitee.email, "roles": sorted(roles)})
        if self._expect_refusal(answer, actor, "org.members:create",
                                beyond=not roles <= self.model.grantable(actor)):
            if invitee.roles is not None:
                expect(answer, 409, "CONFLICT")
                return
            body = expect(answer, 201)
            assert (body["email"], body["roles"]) == (invitee.email, sorted(roles))
            self.model.invited[invitee.email] = roles
            if invitee not in self.model.people:
                self.model.people.append(invitee)

    @rule(k=st.integers(0, 20))
    def accept(self, k: int) -> None:
        if not self.model.invited:
            return
        email = sorted(self.model.invited)[k % len(self.model.invited)]
        person = next(p for p in self.model.people if p.email == email)
        token = token_in(mails_to(self.world, email)[0])  # the newest link
        pair = expect(self.client.post(f"/{self.world.name}/auth/invitations/accept",
                                       json={"token": token, "password": person.password}), 200)
        roles = self.model.invited.pop(email)
        person.roles, person.caller = roles, Caller(self.client, pair["access_token"])
        if person.uid is None:
            me = expect(person.caller.get(f"/{self.world.name}/auth/me"), 200)
            person.uid = me["user"]["uid"]

    @rule(i=st.integers(0, 20), j=st.integers(0, 20), roles=roles_st)
    def change_roles(self, i: int, j: int, roles: frozenset[str]) -> None:
        actor, target = self._signed_in(i), self._actor(j)
        assert actor is not None
        if target.uid is None:
            return
        answer = self._call(actor, "PUT", f"/org/members/{target.uid}",
                            json={"roles": sorted(roles)})
        grants = self.model.grantable(actor)
        beyond = target is actor or not (target.roles or frozenset()) | roles <= grants
        if self._expect_refusal(answer, actor, "org.members:update", beyond,
                                missing=target.roles is None):
            assert expect(answer, 200)["roles"] == sorted(roles)
            target.roles = roles

    @rule(i=st.integers(0, 20), j=st.integers(0, 20))
    def remove(self, i: int, j: int) -> None:
        actor, target = self._signed_in(i), self._actor(j)
        assert actor is not None
        if target.uid is None:
            return
        answer = self._call(actor, "DELETE", f"/org/members/{target.uid}")
        grants = self.model.grantable(actor)
        beyond = target is actor or not (target.roles or frozenset()) <= grants
        if self._expect_refusal(answer, actor, "org.members:delete", beyond,
                                missing=target.roles is None):
            expect(answer, 204)
            target.roles = None

    @rule(i=st.integers(0, 20), roles=roles_st)
    def create_key(self, i: int, roles: frozenset[str]) -> None:
        actor = self._signed_in(i)
        assert actor is not None
        answer = self._call(actor, "POST", "/org/keys",
                            json={"name": "job", "roles": sorted(roles)})
        if self._expect_refusal(answer, actor, "org.keys:create",
                                beyond=not roles <= self.model.grantable(actor)):
            body = expect(answer, 201)
            assert body["key"].startswith("ak_") and body["roles"] == sorted(roles)

    @invariant()
    def memberships_are_the_models(self) -> None:
        if not self.org:
            return
        items = expect(self.world.admin.get(f"{self.world.base}/orgs/{self.org}/members"),
                       200)["items"]
        held = {m["user"]: frozenset(m["roles"]) for m in items}
        expected = {p.uid: p.roles for p in self.model.people if p.roles is not None}
        assert held == expected


def test_members_with_random_grants_hand_out_only_what_they_may(server: ServerProcess) -> None:
    machine = type("TenancyOnTheServer", (TenancyMachine,), {"server": server})
    test = machine.TestCase
    test.settings = settings(max_examples=5, stateful_step_count=12, deadline=None,
                             suppress_health_check=list(HealthCheck))
    test("runTest").runTest()
