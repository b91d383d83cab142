"""The plan compiler, in process: what SQL a plan turns into for a member, an operator, a write,
and a guarded request, and how often it is compiled. No server, no database."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import MetaData
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.model import TableDef
from authoric.catalog.roles import RoleDef
from authoric.catalog.schema import compile_table
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import Forbidden
from authoric.plan.access import admit, operator_access
from authoric.plan.guard import Facts, Guard, guarded_select
from authoric.plan.plan import Page, Plan
from authoric.plan.runner import StatementCache
from authoric.policy.decision import decide
from authoric.policy.principal import Principal
from authoric.query.filters import parse_filter

APP, ORG, USER = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


def snapshot(version: int = 7) -> AppSnapshot:
    definition = TableDef.model_validate({"name": "invoices", "columns": [
        {"name": "number", "type": "text"}, {"name": "status", "type": "text"},
        {"name": "amount", "type": "numeric"}]})
    roles = {
        "clerk": RoleDef.model_validate({"permissions": ["invoices:*"],
                                         "rowPolicies": {"invoices": {"status": {"ne": "draft"}}},
                                         "redact": {"invoices": ["amount"]}}),
        "viewer": RoleDef.model_validate({"permissions": ["invoices:read", "invoices:read_list"]}),
    }
    table = compile_table(APP, definition, MetaData())
    return AppSnapshot(APP, "shop", version, {}, {"invoices": table}, roles, build_enforcer(roles))


def member(*roles: str, read_only: bool = False) -> Principal:
    return Principal(APP, USER, ORG, "ada@example.com", roles, read_only=read_only)


def sql(statement: Any) -> str:
    return str(statement.compile(dialect=asyncpg_dialect.dialect()))


def test_a_members_page_is_confined_to_its_org_live_rows_and_row_policy_with_bound_values() -> None:
    access = admit(snapshot(), member("clerk"), "invoices", "read_list")
    statement, _ = Plan(access, parse_filter({"number": "A-1"})).read_page(Page(limit=20), None)
    text = sql(statement.build())
    assert "invoices.org_uid = $" in text
    assert "invoices.status != $" in text  # the clerk's row policy
    assert "invoices.number = $" in text  # the request's filter
    assert "A-1" not in text and "draft" not in text and str(ORG) not in text
    assert access.decision.redacted == frozenset({"amount"})


def test_a_role_without_a_policy_on_the_table_lifts_the_policy_but_not_the_org() -> None:
    access = admit(snapshot(), member("clerk", "viewer"), "invoices", "read_list")
    text = sql(Plan(access).select_one(uuid.uuid4()))
    assert "invoices.org_uid = $" in text and "status" not in text.split("WHERE")[1]


def test_an_operator_plan_sees_every_org_with_no_policy_and_nothing_redacted() -> None:
    access = operator_access(snapshot(), member(), "invoices", "read_list")
    text = sql(Plan(access, parse_filter({"status": "draft"})).select_all(None))
    where = text.split("WHERE")[1]
    assert "org_uid" not in where and "!=" not in where
    assert access.decision.redacted == frozenset()


def test_a_filter_on_a_redacted_column_is_refused_for_the_member_it_is_redacted_for() -> None:
    access = admit(snapshot(), member("clerk"), "invoices", "read_list")
    with pytest.raises(Exception, match="redacted"):
        Plan(access, parse_filter({"amount": "1"})).where()


def test_a_create_inserts_its_change_log_row_in_the_same_guarded_statement() -> None:
    access = admit(snapshot(), member("clerk"), "invoices", "create")
    guard = Guard(APP, USER, ORG, Facts(7, "shop", ("clerk",), "ada@example.com"))
    text = sql(Plan(access).insert(uuid.uuid4(), {"number": "A-1", "status": "sent"}, None,
                                   guard, USER))
    assert text.count("INSERT INTO") == 2 and "INSERT INTO authoric.changes" in text
    assert "auth_facts" in text and "authoric.members" in text
    assert "LEFT OUTER JOIN inserted ON true" in text


def test_a_guarded_read_returns_the_facts_even_when_no_row_matches() -> None:
    access = admit(snapshot(), member("viewer"), "invoices", "read")
    guard = Guard(APP, USER, ORG, Facts(7, "shop", ("viewer",), "ada@example.com"))
    text = sql(guarded_select(guard, Plan(access).select_one(uuid.uuid4())))
    assert "FROM auth_facts LEFT OUTER JOIN LATERAL" in text


def test_requests_differing_only_in_values_share_one_compiled_statement() -> None:
    cache = StatementCache()
    snap = snapshot()
    access = admit(snap, member("clerk"), "invoices", "read_list")
    first, _ = Plan(access, parse_filter({"number": "A-1"})).read_page(Page(limit=20), None)
    second, _ = Plan(access, parse_filter({"number": "B-2"})).read_page(Page(limit=5), None)
    sql_1, args_1 = cache.sql_and_args((APP, 7), first)
    sql_2, args_2 = cache.sql_and_args((APP, 7), second)
    assert sql_1 == sql_2 and "A-1" in args_1 and "B-2" in args_2 and 21 in args_1 and 6 in args_2
    assert len(cache._entries) == 1
    cache.sql_and_args((APP, 8), second)  # another catalog version compiles its own
    assert len(cache._entries) == 2


def test_a_decision_is_computed_once_per_role_set_and_version() -> None:
    snap = snapshot()
    table = snap.table("invoices")
    first = decide(snap, member("clerk"), table, "read")
    assert decide(snap, member("clerk"), table, "read") is first
    assert decide(snapshot(), member("clerk"), table, "read") is not first


def test_a_read_only_principal_reads_but_every_write_is_refused_with_the_reason() -> None:
    snap = snapshot()
    admit(snap, member("clerk", read_only=True), "invoices", "read")
    for action in ("create", "update", "delete"):
        with pytest.raises(Forbidden) as refused:
            admit(snap, member("clerk", read_only=True), "invoices", action)
        assert refused.value.details["reason"] == "impersonation_read_only"


def test_a_draft_role_is_judged_by_the_same_gate_without_touching_the_saved_snapshot() -> None:
    from authoric.plan.access import with_draft_role

    saved = snapshot()
    draft = with_draft_role(saved, "viewer", RoleDef.model_validate(
        {"permissions": ["invoices:read_list"], "rowPolicies": {"invoices": {"number": "A-1"}}}))
    text = sql(Plan(admit(draft, member("viewer"), "invoices", "read_list")).select_all(None))
    assert "invoices.number = $" in text
    with pytest.raises(Forbidden):
        admit(draft, member("viewer"), "invoices", "read")
    admit(saved, member("viewer"), "invoices", "read")


def test_a_copy_of_a_snapshot_with_other_roles_does_not_reuse_its_decisions() -> None:
    import dataclasses

    saved = snapshot()
    table = saved.table("invoices")
    assert decide(saved, member("viewer"), table, "read").policy is None
    roles = {**saved.roles, "viewer": RoleDef.model_validate(
        {"permissions": ["invoices:read"], "rowPolicies": {"invoices": {"number": "A-1"}}})}
    draft = dataclasses.replace(saved, roles=roles, enforcer=build_enforcer(roles))
    assert decide(draft, member("viewer"), table, "read").policy is not None
