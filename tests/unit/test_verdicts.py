"""The hub's verdicts kept for webhooks of the same read class (realtime/verdicts.py), with an
injected clock. Callers: the hub records, a webhook's judging reuses."""

from __future__ import annotations

import uuid

from sqlalchemy import MetaData

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.model import TableDef
from authoric.catalog.roles import RoleDef
from authoric.catalog.schema import compile_table
from authoric.catalog.snapshot import AppSnapshot
from authoric.realtime.source import Change
from authoric.realtime.verdicts import ASKED, FRESH, Scope, Verdicts
from authoric.webhooks.events import Audience, read_class, want_verdicts

APP = uuid.uuid4()
ORG = uuid.uuid4()


class Clock:
    def __init__(self) -> None:
        self.at = 1000.0

    def __call__(self) -> float:
        return self.at


def change(pos: int, op: str = "insert") -> Change:
    return Change(pos=pos, app_uid=APP, table="invoices", op=op, row_uid=uuid.uuid4(),
                  org_uid=ORG, old_row=None)


def scope(version: int = 1, key: object = "viewer") -> Scope:
    return (APP, version, "invoices", (ORG, (key,), (), ()))


def test_the_hub_records_nothing_for_a_class_no_webhook_asked_for() -> None:
    verdicts = Verdicts(Clock())
    assert not verdicts.wanted(scope())


def test_a_webhook_reuses_what_the_hub_just_judged_for_its_class_in_order() -> None:
    verdicts = Verdicts(Clock())
    verdicts.want(scope())
    changes = [change(1), change(2), change(3, "delete")]
    assert verdicts.wanted(scope())
    verdicts.keep(scope(), changes[0], {"number": "N-1"}, False)
    verdicts.keep(scope(), changes[1], None, False)
    verdicts.keep(scope(), changes[2], None, True)
    found = verdicts.reused(scope(), changes)
    assert found is not None
    assert [(v.row, v.seen) for v in found] == [({"number": "N-1"}, False), (None, False),
                                                (None, True)]


def test_a_webhook_rereads_all_when_any_change_of_its_batch_was_not_judged_for_its_class(
) -> None:
    verdicts = Verdicts(Clock())
    verdicts.want(scope())
    kept, missing = change(1), change(2)
    verdicts.keep(scope(), kept, {"number": "N-1"}, False)
    assert verdicts.reused(scope(), [kept, missing]) is None
    assert verdicts.reused(scope(key="auditor"), [kept]) is None  # another class
    assert verdicts.reused(scope(version=2), [kept]) is None  # another catalog version


def test_a_verdict_older_than_fresh_is_not_reused_so_a_retry_rereads() -> None:
    clock = Clock()
    verdicts = Verdicts(clock)
    verdicts.want(scope())
    first = change(1)
    verdicts.keep(scope(), first, {"number": "N-1"}, False)
    clock.at += FRESH / 2
    assert verdicts.reused(scope(), [first]) is not None
    clock.at += FRESH
    assert verdicts.reused(scope(), [first]) is None


def test_a_class_no_webhook_asked_for_in_a_while_is_no_longer_recorded() -> None:
    clock = Clock()
    verdicts = Verdicts(clock)
    verdicts.want(scope())
    clock.at += ASKED - 1
    assert verdicts.wanted(scope())
    clock.at += 2
    assert not verdicts.wanted(scope())


def test_only_the_newest_verdicts_are_kept_past_the_limit() -> None:
    verdicts = Verdicts(Clock(), limit=3)
    verdicts.want(scope())
    changes = [change(pos) for pos in range(1, 6)]
    for c in changes:
        verdicts.keep(scope(), c, None, False)
    assert verdicts.reused(scope(), changes[:2]) is None
    assert verdicts.reused(scope(), changes[2:]) is not None


def shop(version: int = 1) -> AppSnapshot:
    roles = {"viewer": RoleDef.model_validate({"permissions": ["invoices:read"]})}
    table = compile_table(APP, TableDef.model_validate(
        {"name": "invoices", "columns": [{"name": "number", "type": "text"}]}), MetaData())
    return AppSnapshot(APP, "shop", version, {}, {"invoices": table}, roles,
                       build_enforcer(roles))


def audience(org: uuid.UUID | None, role: str | None = "viewer") -> Audience:
    return Audience(APP, "shop", ("invoices",), frozenset({"insert"}), org, role, ())


def test_a_role_webhook_of_one_org_asks_for_its_class_before_judging_anything() -> None:
    # The hub then keeps the very first batch's verdicts for it: 100 webhooks started
    # together no longer each re-read that batch on their own.
    verdicts, snapshot = Verdicts(), shop()
    want_verdicts(snapshot, audience(ORG), verdicts)
    cls = read_class(snapshot, "invoices", audience(ORG), "viewer", ORG)
    assert verdicts.wanted((snapshot.uid, snapshot.version, "invoices", cls.key))
    other = read_class(snapshot, "invoices", audience(ORG), "viewer", uuid.uuid4())
    assert not verdicts.wanted((snapshot.uid, snapshot.version, "invoices", other.key))


def test_a_webhook_of_every_org_or_of_the_operators_view_asks_for_nothing_in_advance() -> None:
    verdicts, snapshot = Verdicts(), shop()
    want_verdicts(snapshot, audience(None), verdicts)
    want_verdicts(snapshot, audience(ORG, role=None), verdicts)
    cls = read_class(snapshot, "invoices", audience(ORG), "viewer", ORG)
    assert not verdicts.wanted((snapshot.uid, snapshot.version, "invoices", cls.key))
