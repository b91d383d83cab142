"""Statements by shape (plan.binds), in process: a repeat request fills the named slots of SQL
compiled once, and what it sends is exactly what building the statement anew would send, for
every caller. No server, no database."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from authoric.catalog.roles import RoleDef
from authoric.db.changelog import DELETE, UPDATE
from authoric.errors import InternalError
from authoric.plan.access import admit, with_draft_role
from authoric.plan.binds import Shaped, named
from authoric.plan.guard import Facts, Guard
from authoric.plan.listing import encode_cursor
from authoric.plan.plan import Page, Plan
from authoric.plan.runner import StatementCache
from authoric.policy.principal import Principal
from authoric.query.filters import parse_filter
from tests.unit.test_plan_compiler import APP, snapshot

SCOPE = (APP, 7)


def caller(n: int, *roles: str) -> tuple[Principal, Guard]:
    """The n-th member (its own user, org and email) and the guard of its request."""
    user, org, email = uuid.UUID(int=100 + n), uuid.UUID(int=200 + n), f"m{n}@example.com"
    roles = roles or ("clerk",)
    return (Principal(APP, user, org, email, roles),
            Guard(APP, user, org, Facts(7, "shop", roles, email)))


def fresh(scope: Any, shaped: Shaped) -> tuple[str, list[Any]]:
    """What the statement sends when it is built and compiled from scratch."""
    return StatementCache().sql_and_args(scope, shaped.build())


def test_readers_in_two_orgs_share_one_statement_and_each_sends_its_own_org_and_row() -> None:
    cache, snap = StatementCache(), snapshot()
    sent = []
    for n in (1, 2):
        principal, guard = caller(n)
        shaped = Plan(admit(snap, principal, "invoices", "read")).read_one(uuid.uuid4(), guard)
        assert shaped.key is not None
        sent.append(cache.sql_and_args(SCOPE, shaped))
        assert sent[-1] == fresh(SCOPE, shaped)
        assert principal.org_uid in sent[-1][1] and principal.email in sent[-1][1]
    assert sent[0][0] == sent[1][0] and sent[0][1] != sent[1][1]
    assert len(cache._templates) == 1 and not cache._entries


def test_a_page_with_a_cursor_sends_what_a_fresh_statement_sends() -> None:
    cache, snap = StatementCache(), snapshot()
    principal, guard = caller(1)
    plan = Plan(admit(snap, principal, "invoices", "read_list"))
    ordering = plan.ordering("-number")
    for value, limit in (("A-1", 20), ("B-2", 5), (None, 7)):
        cursor = encode_cursor(ordering, {"number": value, "uid": uuid.uuid4()})
        shaped, _ = plan.read_page(Page("-number", limit, cursor), guard)
        assert cache.sql_and_args(SCOPE, shaped) == fresh(SCOPE, shaped)
    # A null cursor value reads differently (NULLs sort last): its own shape.
    assert len(cache._templates) == 2


def test_writers_in_two_orgs_send_their_own_values_for_create_update_and_delete() -> None:
    cache, snap = StatementCache(), snapshot()
    for n in (1, 2):
        principal, guard = caller(n)
        plan = Plan(admit(snap, principal, "invoices", "create"))
        read = admit(snap, principal, "invoices", "read").decision
        values = {"number": f"N-{n}", "status": "sent", "amount": Decimal(n)}
        statements = [
            plan.create(uuid.uuid4(), values, read, guard, principal.user_uid),
            Plan(admit(snap, principal, "invoices", "update")).change_one(
                uuid.uuid4(), UPDATE, values, read, principal.user_uid, guard),
            Plan(admit(snap, principal, "invoices", "delete")).change_one(
                uuid.uuid4(), DELETE, None, None, principal.user_uid, guard),
        ]
        for shaped in statements:
            sql, args = cache.sql_and_args(SCOPE, shaped)
            assert (sql, args) == fresh(SCOPE, shaped)
            assert principal.org_uid in args and principal.user_uid in args
    assert len(cache._templates) == 3


def test_a_create_naming_other_columns_is_another_shape() -> None:
    cache, snap = StatementCache(), snapshot()
    principal, guard = caller(1)
    plan = Plan(admit(snap, principal, "invoices", "create"))
    for values in ({"number": "A"}, {"number": "A", "status": "x"}, {"status": "x"}):
        shaped = plan.create(uuid.uuid4(), values, None, guard, principal.user_uid)
        assert cache.sql_and_args(SCOPE, shaped) == fresh(SCOPE, shaped)
    assert len(cache._templates) == 3


def test_a_filtered_list_has_no_shape_and_is_built_each_time() -> None:
    principal, guard = caller(1)
    plan = Plan(admit(snapshot(), principal, "invoices", "read_list"), parse_filter({"number": "A"}))
    shaped, _ = plan.read_page(Page(limit=20), guard)
    cache = StatementCache()
    assert shaped.key is None
    assert "A" in cache.sql_and_args(SCOPE, shaped)[1] and not cache._templates


def test_a_draft_roles_decisions_have_no_shape_so_a_preview_never_reuses_saved_sql() -> None:
    saved = snapshot()
    draft = with_draft_role(saved, "clerk", RoleDef.model_validate(
        {"permissions": ["invoices:*"], "rowPolicies": {"invoices": {"number": "A-1"}}}))
    principal, guard = caller(1)
    assert Plan(admit(saved, principal, "invoices", "read")).read_one(uuid.uuid4(), guard).key
    assert Plan(admit(draft, principal, "invoices", "read")).read_one(
        uuid.uuid4(), guard).key is None


def test_the_runner_refuses_a_plan_whose_named_values_disagree_with_its_statement() -> None:
    table = snapshot().table("invoices").table
    mismatched = Shaped(("x",), {"B_uid": uuid.UUID(int=1)}, lambda: select(table).where(
        table.c.uid == named("B_uid", uuid.UUID(int=2), table.c.uid.type)))
    unnamed = Shaped(("y",), {}, lambda: select(table).where(
        table.c.uid == named("B_uid", uuid.UUID(int=2), table.c.uid.type)))
    for shaped in (mismatched, unnamed):
        with pytest.raises(InternalError):
            StatementCache().sql_and_args(SCOPE, shaped)


def test_another_catalog_version_compiles_its_own_statement() -> None:
    cache, snap = StatementCache(), snapshot()
    principal, guard = caller(1)
    shaped = Plan(admit(snap, principal, "invoices", "read")).read_one(uuid.uuid4(), guard)
    cache.sql_and_args((APP, 7), shaped)
    cache.sql_and_args((APP, 8), shaped)
    assert len(cache._templates) == 2




def test_a_json_value_holding_nan_compiles_its_template_instead_of_failing_the_equality_check() -> None:
    table = snapshot().table("invoices").table
    value = {"x": float("nan")}
    shaped = Shaped(("nan",), {"B_v_number": value}, lambda: select(table).where(
        table.c.number == named("B_v_number", value, table.c.number.type)))
    _, args = StatementCache().sql_and_args(SCOPE, shaped)
    assert args == [value]
