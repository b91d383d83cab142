"""The authentication facts and the rows in one statement.

A request is planned from facts cached per (app, user, org): the app's catalog version, the
member's roles and email. The statement that answers it carries those facts as a guard: a CTE
reads the current version and membership, the rows (or the write) only happen when they equal
what the plan assumed, and the current facts come back with the rows. When they differ
(something changed, or nothing was cached) the caller refreshes its cache from the returned
facts and plans again. So a change committed before a request's statement starts always
applies to it, on every process, and an unchanged world costs one round trip.

Every statement planned for a catalog version carries it: a request's reads, pages, writes,
expansions, counts and CSV export (`Guard`), and the feed's judge and its expansions, which
read for read classes rather than for one member (`Guard.for_catalog`: the version alone). A
statement planned for one version never runs against another: a rename or swap committed
after planning makes the guard fail (the caller plans again), never reads a renamed column
under its old name.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import BigInteger, Text, and_, case, null, select, true, union_all
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.elements import ColumnElement

from authoric.db import tables as t
from authoric.errors import ServiceUnavailable
from authoric.plan.binds import named

FACT_COLUMNS = ("_version", "_app_name", "_roles", "_email")
PLAN_ATTEMPTS = 4  # plans per request before giving up on an app whose facts keep moving
T = TypeVar("T")


@dataclass(frozen=True)
class Facts:
    """What authentication needs from the database, as of one statement."""

    version: int
    app_name: str
    roles: tuple[str, ...] | None  # None: no membership (revoked, or the user deleted)
    email: str | None


class StaleFacts(Exception):
    """The statement's guard did not hold; `facts` are the current ones (None: no such app)."""

    def __init__(self, facts: Facts | None) -> None:
        super().__init__("authentication facts moved")
        self.facts = facts


def kept_changing() -> ServiceUnavailable:
    """The answer to a request planned PLAN_ATTEMPTS times, each time for facts that moved
    before its statement ran: 503, and the client may simply retry."""
    return ServiceUnavailable("the app kept changing during this request; retry it",
                              headers={"Retry-After": "1"})


async def until_held(attempt: Callable[[], Awaitable[T]], attempts: int = PLAN_ATTEMPTS) -> T:
    """`attempt()`, each time in a transaction of its own planned anew, until one runs on
    facts that held (no StaleFacts: it rolled back when they moved under it); then
    `kept_changing`. An app gone meanwhile is found by the next attempt's own loading, which
    answers exactly (404)."""
    for _ in range(attempts):
        try:
            return await attempt()
        except StaleFacts:
            continue
    raise kept_changing()


@dataclass
class Guard:
    """The facts a plan was made for, and the CTE that checks them inside its statement."""

    app_uid: uuid.UUID
    user_uid: uuid.UUID | None
    org_uid: uuid.UUID | None
    expected: Facts
    held: bool = False  # set once a statement's guard is seen to hold
    membership: uuid.UUID | None = None  # the token's membership (a re-added member's is new)
    member: bool = True  # False: the catalog version alone (`for_catalog`)

    @classmethod
    def for_catalog(cls, app_uid: uuid.UUID, version: int) -> Guard:
        """A guard of the catalog version alone, for statements read for read classes (the
        feed): no member's facts, so only the version is checked."""
        return cls(app_uid, None, None, Facts(version, "", None, None), member=False)

    def cte(self) -> Any:
        a = t.apps
        if not self.member:
            return (select(a.c.version.label("_version"), a.c.name.label("_app_name"),
                           null().label("_roles"), null().label("_email"))
                    .where(a.c.uid == named("B_app", self.app_uid, a.c.uid.type))
                    .cte("auth_facts"))
        # Members and API keys alike (db.tables.grantees): a key is judged as a member is.
        m, u = t.grantees(), t.users
        return (select(a.c.version.label("_version"), a.c.name.label("_app_name"),
                       m.c.roles.label("_roles"), u.c.email.label("_email"))
                .select_from(a.outerjoin(m, and_(
                    m.c.app_uid == a.c.uid,
                    m.c.org_uid == named("B_org", self.org_uid, a.c.uid.type),
                    m.c.user_uid == named("B_user", self.user_uid, a.c.uid.type),
                    m.c.uid == named("B_member", self.membership, a.c.uid.type),
                )).outerjoin(u, u.c.uid == m.c.user_uid))
                .where(a.c.uid == named("B_app", self.app_uid, a.c.uid.type))
                .cte("auth_facts"))

    def holds(self, facts: Any) -> ColumnElement[bool]:
        """True exactly when the current facts are the expected ones."""
        e = self.expected
        if not self.member:
            return facts.c._version == named("B_version", e.version, BigInteger)
        return and_(facts.c._version == named("B_version", e.version, BigInteger),
                    facts.c._app_name == named("B_app_name", e.app_name, Text),
                    facts.c._roles == named("B_roles", list(e.roles or ()), ARRAY(Text)),
                    # A key has no email: NULL must equal NULL here.
                    facts.c._email.is_not_distinct_from(named("B_email", e.email, Text)))

    def params(self) -> dict[str, Any]:
        """The values `cte` and `holds` bind (plan.binds)."""
        e = self.expected
        if not self.member:
            return {"B_app": self.app_uid, "B_version": e.version}
        return {"B_org": self.org_uid, "B_user": self.user_uid, "B_app": self.app_uid,
                "B_member": self.membership,
                "B_version": e.version, "B_app_name": e.app_name,
                "B_roles": list(e.roles or ()), "B_email": e.email}

    def confirmation(self) -> Any:
        """The facts alone, as a guarded result's "no row" row (`check` reads it): run last in
        a transaction planned for `expected`, it tells whether every statement before it ran
        at that catalog version (versions only grow, and a table the transaction touched
        stays locked against a rename until it ends)."""
        facts = self.cte()
        return select(*(facts.c[c] for c in FACT_COLUMNS),
                      null().label("uid")).select_from(facts)

    def check(self, rows: Sequence[Any]) -> list[Any]:
        """The governed rows of a guarded result; StaleFacts when the guard did not hold."""
        if not rows:
            raise StaleFacts(None)
        first = rows[0]
        if first["uid"] is not None:
            # A row only comes back where the guard held (it is part of every statement's
            # condition); its facts columns are NULL (`facts_where_no_row`).
            self.held = True
            return list(rows)
        roles = first["_roles"]
        current = Facts(int(first["_version"]), str(first["_app_name"]),
                        None if roles is None else tuple(roles), first["_email"])
        if (current != self.expected if self.member
                else current.version != self.expected.version):
            raise StaleFacts(current)
        self.held = True
        return []


def facts_where_no_row(facts: Any, uid: Any) -> list[Any]:
    """The facts columns of a guarded result: the current facts on the row that stands for
    "no row" (`uid` NULL), NULL beside real rows. A real row means the guard held, so its
    facts are the expected ones, and a page need not carry (or decode) them 20 times."""
    return [case((uid.is_(None), facts.c[c])).label(c) for c in FACT_COLUMNS]


def guarded_branches(guard: Guard, branches: Sequence[Any]) -> Any:
    """`guarded_select` for a UNION ALL of SELECTs (the feed's statements): each branch is
    conditional on the guard, and the facts come back once, on a "no row" row, when no
    branch returns a row."""
    facts = guard.cte()
    held: list[Any] = [branch.where(guard.holds(facts)) for branch in branches]
    together: Any = held[0] if len(held) == 1 else union_all(*held)
    rows = together.lateral("governed")
    return (select(*facts_where_no_row(facts, rows.c.uid), *rows.c)
            .select_from(facts.outerjoin(rows, true())))


def guarded_select(guard: Guard | None, inner: Any, order: Sequence[tuple[str, bool]] = ()) -> Any:
    """`inner` (a SELECT of a table's rows) made conditional on the guard, with the facts
    alongside: `facts LEFT JOIN LATERAL (inner AND guard)`. `order` is (column, descending)
    to keep the inner order in the outer result. Without a guard, `inner` itself."""
    if guard is None:
        return inner
    facts = guard.cte()
    rows = inner.where(guard.holds(facts)).lateral("governed")
    ordering = [(rows.c[name].desc() if desc else rows.c[name].asc()).nulls_last()
                for name, desc in order]
    return (select(*facts_where_no_row(facts, rows.c.uid), *rows.c)
            .select_from(facts.outerjoin(rows, true())).order_by(*ordering))
