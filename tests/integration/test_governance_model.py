"""State machine: what every principal can list and read equals what a plain-Python model of
the contract says, however roles, permissions, row policies, redaction and memberships change.

A Hypothesis RuleBasedStateMachine drives a real server over HTTP: the admin API puts and
deletes roles (permissions incl. `{table}:*`, `*:action`, `*:*`; row policies incl.
`$principal` uid, email and org references; redaction) and puts and deletes memberships
(several roles per member, or none); members create rows through autocrud (the model
predicts 401 / 403 FORBIDDEN / 201 and the row the writer gets back). After every step an
invariant asks, for every (user, org) principal and both tables, `GET /{app}/autocrud/{table}?limit=1000`
and `GET .../{uid}` of every row of every org, and compares each answer with the model:
- a principal whose membership is gone gets 401 (its roles are looked up per request), and a
  token from before a membership stays 401 when the membership is re-created: the member
  signs in again;
- no role granting the action → 403 FORBIDDEN;
- a row is visible iff it is in the principal's org and some role granting the action has
  no policy on the table or one the row matches (SQL three-valued: NULL never matches);
  an invisible row reads as 404;
- a column is "[redacted]" iff every role granting `read` on the table redacts it (all
  columns when none grants `read`);
- no answer ever holds a row of another org (asserted on its own, before the comparison).

The world makes each user a member of each org just long enough to get a token for it;
tokens stay valid across role changes because the server looks roles up per request, and a
user signs in again each time a membership is created (a token names its membership). Each
example starts from a clean app state (roles and memberships deleted, tables recreated).

Manual check that the machine has teeth (done once, on a copy of the tree run with
PYTHONPATH pointing at it, so nobody else's server saw the weakened code; not committed):
- `hidden &= ...` changed to `hidden |= ...` in policy/decision.py `_redacted`: FAILS.
  Shrunk to `start` (a role with things:read_list/read/create, one member, one thing):
  the writer gets its row back with every column "[redacted]" where the model shows values.
- the org clause dropped from `Decision.rows` (`clauses = [compiled.live()]`): FAILS.
  Shrunk to three steps (a thing created in org 1, user 0 made a member of org 0): the
  list of user 0 in org 0 holds the other org's row ("another org's row").
Both were found on the first run (then ~5 min of shrinking on a loaded 2-core machine).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.scenario import AppWorld, Caller, expect, unique
from tests.servers import ServerProcess

TABLES: dict[str, list[tuple[str, str]]] = {
    "things": [("title", "text"), ("owner", "uuid"), ("email", "text"), ("org_ref", "uuid"),
               ("amount", "integer"), ("secret", "text")],
    "notes": [("body", "text"), ("owner", "uuid")],
}
ROLE_NAMES = ("r1", "r2", "r3")
PERMISSIONS = ("things:read_list", "things:read", "things:create", "things:*",
               "notes:read_list", "notes:read", "notes:create", "notes:*",
               "*:read", "*:read_list", "*:create", "*:*")
POLICIES: dict[str, list[dict[str, Any]]] = {
    "things": [
        {"owner": {"eq": {"$principal": "uid"}}},
        {"email": {"$principal": "email"}},
        {"org_ref": {"eq": {"$principal": "org"}}},
        {"owner": {"ne": {"$principal": "uid"}}},
        {"amount": {"gt": 1}},
        {"amount": {"in": [1, 2]}},
        {"or": [{"amount": {"lt": 0}}, {"title": {"like": "a%"}}]},
        {"not": {"title": {"eq": "b"}}},
        {"and": [{"owner": {"eq": {"$principal": "uid"}}}, {"amount": {"gte": 0}}]},
        {"secret": {"is_null": True}},
    ],
    "notes": [
        {"owner": {"eq": {"$principal": "uid"}}},
        {"body": {"like": "a%"}},
        {"body": {"ne": "b"}},
    ],
}
TEXTS = ("a", "ab", "b", "c", None)
AMOUNTS = (-1, 0, 1, 2, 3, None)
SECRETS = ("s1", "s2", None)
N_USERS, N_ORGS = 3, 2


# ----------------------------------------------------------------------------------- the world

@dataclass
class World:
    """One app on the shared server: users and orgs made once, a token per (user, org)."""

    app: AppWorld
    users: list[dict[str, Any]]
    orgs: list[str]
    tokens: dict[tuple[int, int], Caller] = field(default_factory=dict)

    def reset(self) -> None:
        """Back to no roles, no memberships and empty tables."""
        admin, base = self.app.admin, self.app.base
        for user in self.users:
            for org in self.orgs:
                response = admin.delete(f"{base}/orgs/{org}/members/{user['uid']}")
                assert response.status_code in (204, 404), response.text
        for role in expect(admin.get(f"{base}/roles"), 200)["items"]:
            expect(admin.delete(f"{base}/roles/{role['name']}"), 204)
        existing = {t["name"] for t in expect(admin.get(f"{base}/tables"), 200)["items"]}
        for name, columns in TABLES.items():
            if name in existing:
                expect(admin.delete(f"{base}/tables/{name}"), 204)
            self.app.table(name, [{"name": c, "type": t} for c, t in columns])


def make_world(server: ServerProcess, http: httpx.Client) -> World:
    """A new app with N_USERS users, N_ORGS orgs and a token per (user, org), no memberships."""
    app = AppWorld.create(server, http)
    users = [app.user(f"{unique('member')}@example.com") for _ in range(N_USERS)]
    orgs = [app.org(unique("org")) for _ in range(N_ORGS)]
    w = World(app, users, orgs)
    for u, user in enumerate(users):
        for o, org in enumerate(orgs):
            app.member(org, user["uid"], [])
            w.tokens[(u, o)] = app.login(user, org)
            expect(app.admin.delete(f"{app.base}/orgs/{org}/members/{user['uid']}"), 204)
    return w


@pytest.fixture(scope="module")
def governed_world(server: ServerProcess, http: httpx.Client) -> Iterator[World]:
    w = make_world(server, http)
    yield w
    expect(w.app.admin.delete(f"/admin/apps/{w.app.name}"), 204)


# ----------------------------------------------------------------------------------- the model

def _and(values: list[bool | None]) -> bool | None:
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def _or(values: list[bool | None]) -> bool | None:
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


def like(pattern: str, value: str) -> bool:
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


def matches(node: dict[str, Any], row: dict[str, Any], principal: dict[str, str]) -> bool | None:
    """A row policy read in SQL's three-valued logic (None: unknown)."""
    results: list[bool | None] = []
    for key, value in node.items():
        if key in ("and", "or"):
            parts = [matches(v, row, principal) for v in value]
            results.append(_and(parts) if key == "and" else _or(parts))
        elif key == "not":
            inner = matches(value, row, principal)
            results.append(None if inner is None else not inner)
        elif isinstance(value, dict) and list(value) != ["$principal"]:
            results.append(_and([compare(op, row[key], v, principal) for op, v in value.items()]))
        else:
            results.append(compare("eq", row[key], value, principal))
    return _and(results)


def compare(op: str, x: Any, v: Any, principal: dict[str, str]) -> bool | None:
    if isinstance(v, dict):
        v = principal[v["$principal"]]
    if op == "is_null":
        return (x is None) == v
    if v is None:
        return (x is None) if op == "eq" else (x is not None)
    if x is None:
        return None
    if op == "in":
        return x in v
    if op == "like":
        return like(v, x)
    return {"eq": x == v, "ne": x != v, "lt": x < v, "lte": x <= v, "gt": x > v,
            "gte": x >= v}[op]


@dataclass
class Role:
    permissions: list[str]
    row_policies: dict[str, dict[str, Any]]
    redact: dict[str, list[str]]

    def grants(self, table: str, action: str) -> bool:
        return any(p in self.permissions for p in
                   (f"{table}:{action}", f"{table}:*", f"*:{action}", "*:*"))


@dataclass
class Answer:
    status: int
    code: str | None = None
    body: Any = None


class Model:
    """The contract, in plain Python."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.roles: dict[str, Role] = {}
        self.members: dict[tuple[int, int], list[str]] = {}
        self.rows: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}  # with "_org"

    def principal(self, u: int, o: int) -> dict[str, str]:
        user = self.world.users[u]
        return {"uid": user["uid"], "email": user["email"], "org": self.world.orgs[o]}

    def granting(self, u: int, o: int, table: str, action: str) -> list[Role]:
        names = self.members.get((u, o), [])
        return [self.roles[n] for n in names if n in self.roles and
                self.roles[n].grants(table, action)]

    def covers(self, u: int, o: int, table: str, action: str, row: dict[str, Any]) -> bool:
        """Whether `action` on `row` is within the principal's org and row policies."""
        if row["_org"] != self.world.orgs[o]:
            return False
        roles = self.granting(u, o, table, action)
        if any(table not in r.row_policies for r in roles):
            return True
        who = self.principal(u, o)
        return any(matches(r.row_policies[table], row, who) is True for r in roles)

    def redacted(self, u: int, o: int, table: str) -> set[str]:
        hidden = {c for c, _ in TABLES[table]}
        for role in self.granting(u, o, table, "read"):
            hidden &= set(role.redact.get(table, []))
        return hidden

    def shown(self, u: int, o: int, table: str, row: dict[str, Any]) -> dict[str, Any]:
        hidden = self.redacted(u, o, table)
        return {"uid": row["uid"], **{c: "[redacted]" if c in hidden else row[c]
                                      for c, _ in TABLES[table]}}

    def gate(self, u: int, o: int, table: str, action: str) -> Answer | None:
        if (u, o) not in self.members:
            return Answer(401, "UNAUTHENTICATED")
        if not self.granting(u, o, table, action):
            return Answer(403, "FORBIDDEN")
        return None

    def list(self, u: int, o: int, table: str) -> Answer:
        refused = self.gate(u, o, table, "read_list")
        if refused:
            return refused
        rows = sorted((r for r in self.rows[table] if self.covers(u, o, table, "read_list", r)),
                      key=lambda r: r["uid"])
        return Answer(200, body=[self.shown(u, o, table, r) for r in rows])

    def read(self, u: int, o: int, table: str, row: dict[str, Any]) -> Answer:
        refused = self.gate(u, o, table, "read")
        if refused:
            return refused
        if not self.covers(u, o, table, "read", row):
            return Answer(404, "NOT_FOUND")
        return Answer(200, body=self.shown(u, o, table, row))

    def create(self, u: int, o: int, table: str, row: dict[str, Any]) -> Answer:
        """The answer to a create (body: what the writer gets back, `uid` filled in later)."""
        refused = self.gate(u, o, table, "create")
        if refused:
            return refused
        if not self.covers(u, o, table, "create", row):
            return Answer(403, "FORBIDDEN")
        readable = (self.granting(u, o, table, "read")
                    and self.covers(u, o, table, "read", row))
        return Answer(201, body=self.shown(u, o, table, row) if readable else {})


def without_times(row: dict[str, Any]) -> dict[str, Any]:
    assert isinstance(row.get("createdAt"), str) and isinstance(row.get("updatedAt"), str), row
    return {k: v for k, v in row.items() if k not in ("createdAt", "updatedAt")}


def check(response: httpx.Response, expected: Answer, what: str) -> Any:
    body: Any = response.json() if response.content else None
    assert response.status_code == expected.status, (what, expected, response.text)
    if expected.code is not None:
        assert body["error"]["code"] == expected.code, (what, response.text)
    return body


# ---------------------------------------------------------------------------- the state machine

users = st.integers(0, N_USERS - 1)
orgs = st.integers(0, N_ORGS - 1)
principals = st.integers(0, N_USERS * N_ORGS - 1)
thing_picks = st.fixed_dictionaries({
    "title": st.integers(0, len(TEXTS)), "owner": st.integers(0, N_USERS),
    "email": st.integers(0, N_USERS), "org_ref": st.integers(0, N_ORGS),
    "amount": st.integers(0, len(AMOUNTS)), "secret": st.integers(0, len(SECRETS))})
note_picks = st.fixed_dictionaries({"body": st.integers(0, len(TEXTS)),
                                    "owner": st.integers(0, N_USERS)})


def role_bodies() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({
        "permissions": st.lists(st.sampled_from(PERMISSIONS), unique=True, min_size=1, max_size=4),
        "rowPolicies": st.fixed_dictionaries({}, optional={
            t: st.sampled_from(POLICIES[t]) for t in TABLES}),
        "redact": st.fixed_dictionaries({}, optional={
            t: st.lists(st.sampled_from([c for c, _ in TABLES[t]]), unique=True, max_size=3)
            for t in TABLES}),
    })


def start_arguments(bodies: st.SearchStrategy[dict[str, Any]]) -> dict[str, st.SearchStrategy[Any]]:
    """The starting point's strategies: role bodies drawn from `bodies`."""
    return {
        "bodies": st.lists(bodies, min_size=len(ROLE_NAMES), max_size=len(ROLE_NAMES)),
        "memberships": st.lists(st.one_of(st.none(), st.lists(
            st.sampled_from(ROLE_NAMES), unique=True, max_size=3)),
            min_size=N_USERS * N_ORGS, max_size=N_USERS * N_ORGS),
        "things": st.lists(st.tuples(principals, thing_picks), min_size=2, max_size=4),
        "notes": st.lists(st.tuples(principals, note_picks), min_size=1, max_size=2),
    }


class GovernanceMachine(RuleBasedStateMachine):
    shared: World  # set by the test on a subclass: Hypothesis builds machines from a class

    def __init__(self) -> None:
        super().__init__()
        world = self.world = self.shared
        self.admin = world.app.admin
        self.base = world.app.base
        self.model = Model(world)
        world.reset()

    # -- a starting point where something can happen: three roles, most principals members

    @initialize(**start_arguments(role_bodies()))
    def start(self, bodies: list[dict[str, Any]], memberships: list[list[str] | None],
              things: list[tuple[int, dict[str, int]]],
              notes: list[tuple[int, dict[str, int]]]) -> None:
        for name, body in zip(ROLE_NAMES, bodies, strict=True):
            self.put_role(name, body)
        for i, roles in enumerate(memberships):
            if roles is not None:
                self.put_member(*divmod(i, N_ORGS), roles)
        for who, picks in things:
            if self.model.members:
                self.create_thing(who, picks)
        for who, picks in notes:
            self.create_note(who, picks)

    # -- the admin changes things

    @rule(name=st.sampled_from(ROLE_NAMES), body=role_bodies())
    def put_role(self, name: str, body: dict[str, Any]) -> None:
        expect(self.admin.put(f"{self.base}/roles/{name}", json=body), 200)
        self.model.roles[name] = Role(body["permissions"], body["rowPolicies"], body["redact"])

    @precondition(lambda self: bool(self.model.roles))
    @rule(pick=st.integers(0, len(ROLE_NAMES) - 1))
    def delete_role(self, pick: int) -> None:
        name = sorted(self.model.roles)[pick % len(self.model.roles)]
        expect(self.admin.delete(f"{self.base}/roles/{name}"), 204)
        del self.model.roles[name]
        for key, names in self.model.members.items():
            self.model.members[key] = [n for n in names if n != name]

    @rule(u=users, o=orgs, wanted=st.lists(st.sampled_from(ROLE_NAMES), unique=True, max_size=3))
    def put_member(self, u: int, o: int, wanted: list[str]) -> None:
        roles = [r for r in wanted if r in self.model.roles]
        user, org = self.world.users[u], self.world.orgs[o]
        body = expect(self.admin.put(f"{self.base}/orgs/{org}/members/{user['uid']}",
                                     json={"roles": roles}), 200)
        assert sorted(body["roles"]) == sorted(roles)
        if (u, o) not in self.model.members:
            # A new membership revives no token issued before it: the old one stays 401 and
            # the member signs in again (as a re-added member would).
            stale = self.world.tokens[(u, o)]
            check(stale.get(f"/{self.world.app.name}/autocrud/things", params={"limit": 1}),
                  Answer(401, "UNAUTHENTICATED"), f"a token of {(u, o)} from before the membership")
            self.world.tokens[(u, o)] = self.world.app.login(user, org)
        self.model.members[(u, o)] = roles

    @precondition(lambda self: bool(self.model.members))
    @rule(pick=principals)
    def delete_member(self, pick: int) -> None:
        u, o = sorted(self.model.members)[pick % len(self.model.members)]
        user, org = self.world.users[u], self.world.orgs[o]
        expect(self.admin.delete(f"{self.base}/orgs/{org}/members/{user['uid']}"), 204)
        del self.model.members[(u, o)]

    # -- members write rows

    @precondition(lambda self: bool(self.model.members))
    @rule(who=principals, picks=thing_picks)
    def create_thing(self, who: int, picks: dict[str, int]) -> None:
        """A member creates a thing (its owner, email and org_ref name anyone, or no one)."""
        self._create(*self._member(who), "things", self._values("things", picks))

    @rule(who=principals, picks=note_picks)
    def create_note(self, who: int, picks: dict[str, int]) -> None:
        """Anyone with a token, member or not, creates a note."""
        self._create(*divmod(who, N_ORGS), "notes", self._values("notes", picks))

    def _values(self, table: str, picks: dict[str, int]) -> dict[str, Any]:
        """A row's values from indices into small pools (one past the end: null)."""
        pools: dict[str, list[Any]] = {
            "title": list(TEXTS), "body": list(TEXTS), "amount": list(AMOUNTS),
            "secret": list(SECRETS), "owner": [u["uid"] for u in self.world.users],
            "email": [u["email"] for u in self.world.users], "org_ref": self.world.orgs,
        }
        return {c: pools[c][picks[c]] if picks[c] < len(pools[c]) else None
                for c, _ in TABLES[table]}

    def _member(self, pick: int) -> tuple[int, int]:
        return sorted(self.model.members)[pick % len(self.model.members)]

    def _create(self, u: int, o: int, table: str, values: dict[str, Any]) -> None:
        row = {**values, "_org": self.world.orgs[o], "uid": None}
        expected = self.model.create(u, o, table, row)
        caller = self.world.tokens[(u, o)]
        body = check(caller.post(f"/{self.world.app.name}/autocrud/{table}", json=values),
                     expected, f"create {table} as {(u, o)}")
        if expected.status != 201:
            return
        row["uid"] = body["uid"]
        self.model.rows[table].append(row)
        if expected.body:
            assert without_times(body) == {**expected.body, "uid": body["uid"]}, (body, expected)
        else:
            assert body == {"uid": body["uid"]}, body

    # -- what everyone sees

    @invariant()
    def every_answer_is_the_models(self) -> None:
        # One thread per principal: the answers are independent, the server is concurrent.
        principals = sorted(self.world.tokens)
        for done in POOL.map(lambda key: self._check_principal(*key), principals):
            assert done

    def _check_principal(self, u: int, o: int) -> bool:
        app, caller, org = self.world.app.name, self.world.tokens[(u, o)], self.world.orgs[o]
        for table in TABLES:
            who = f"{table} as user {u} in org {o}"
            mine = {r["uid"] for r in self.model.rows[table] if r["_org"] == org}
            expected = self.model.list(u, o, table)
            body = check(caller.get(f"/{app}/autocrud/{table}", params={"limit": 1000}),
                         expected, f"list {who}")
            if expected.status == 200:
                got = body["items"]
                assert {r["uid"] for r in got} <= mine, ("another org's row", who, got)
                assert body["next"] is None
                assert [without_times(r) for r in got] == expected.body, (who, got, expected)
            rows = self.model.rows[table]
            if (u, o) not in self.model.members:
                rows = rows[:1]  # 401 whatever the row: one asks enough
            for row in rows:
                expected = self.model.read(u, o, table, row)
                body = check(caller.get(f"/{app}/autocrud/{table}/{row['uid']}"), expected,
                             f"read {row['uid']} of {who}")
                if expected.status == 200:
                    assert row["_org"] == org, ("another org's row", who, body)
                    assert without_times(body) == expected.body, (who, body, expected)
        return True


POOL = ThreadPoolExecutor(max_workers=N_USERS * N_ORGS)


def test_every_principal_sees_what_the_contract_says(governed_world: World) -> None:
    machine = type("GovernanceOfThisWorld", (GovernanceMachine,), {"shared": governed_world})
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=15, stateful_step_count=15, deadline=None,
                          suppress_health_check=list(HealthCheck)),
    )
