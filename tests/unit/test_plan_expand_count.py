"""Expand and count as the plan sees them: the shape of `?expand=` and `?count=`, the tree of
checked reference paths, and the count statement on the page's governed clause."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import MetaData
from sqlalchemy.dialects import postgresql

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.model import TableDef
from authoric.catalog.roles import RoleDef
from authoric.catalog.schema import compile_table
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import BadRequest
from authoric.plan.access import admit
from authoric.plan.expand import expansion_tree
from authoric.plan.plan import Plan
from authoric.plan.request import parse_count, parse_expand
from authoric.policy.principal import Principal
from authoric.query.filters import parse_filter

APP = uuid.UUID(int=9)


def snapshot() -> AppSnapshot:
    metadata = MetaData()
    tables = {}
    for doc in ({"name": "countries", "columns": [{"name": "name", "type": "text"}]},
                {"name": "vendors", "columns": [
                    {"name": "name", "type": "text"},
                    {"name": "country", "type": "reference", "references": "countries"}]},
                {"name": "invoices", "columns": [
                    {"name": "number", "type": "text"},
                    {"name": "vendor", "type": "reference", "references": "vendors"}]}):
        definition = TableDef.model_validate(doc)
        tables[definition.name] = compile_table(APP, definition, metadata)
    roles = {"clerk": RoleDef(permissions=["*:*"], rowPolicies={
        "invoices": {"number": {"ne": "draft"}}})}
    return AppSnapshot(APP, "shop", 1, {}, tables, roles, build_enforcer(roles))


def access(action: str = "read_list") -> object:
    principal = Principal(APP, uuid.uuid4(), uuid.UUID(int=3), None, ("clerk",))
    return admit(snapshot(), principal, "invoices", action)


def test_expand_parses_comma_separated_paths_dotted_up_to_two_levels() -> None:
    assert parse_expand(None) == ()
    assert parse_expand("vendor, vendor.country,vendor") == (("vendor",), ("vendor", "country"))
    for bad in ("", "a..b", "a.b.c", ".a", ",".join(f"c{i}" for i in range(11))):
        with pytest.raises(BadRequest):
            parse_expand(bad)


def test_count_takes_exact_or_estimate() -> None:
    assert parse_count(None) is None
    assert parse_count("exact") == "exact" and parse_count("estimate") == "estimate"
    with pytest.raises(BadRequest):
        parse_count("EXACT")


def test_the_expansion_tree_follows_references_and_refuses_other_names() -> None:
    got = expansion_tree(access(), (("vendor", "country"), ("vendor",)))  # type: ignore[arg-type]
    assert got == {"vendor": {"country": {}}}
    for bad in ((("number",),), (("vendor_uid",),), (("vendor", "name"),), (("nope",),)):
        with pytest.raises(BadRequest):
            expansion_tree(access(), bad)  # type: ignore[arg-type]


def test_the_count_counts_on_the_pages_governed_clause_and_filter() -> None:
    plan = Plan(access(), parse_filter({"number": {"like": "A%"}}))  # type: ignore[arg-type]
    sql = str(plan.count_rows().compile(dialect=postgresql.dialect()))
    assert sql.startswith("SELECT count(*) AS total")
    assert "org_uid =" in sql and "number !=" in sql and "number LIKE" in sql
    assert "LIMIT" not in sql and "ORDER BY" not in sql
