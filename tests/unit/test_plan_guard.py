"""The guard's reading of a guarded result (plan.guard), in process: real rows mean the facts
held; the one "no row" row carries the current facts, which decide between an empty answer
and planning again."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import asyncpg
import pytest
from sqlalchemy import select
from sqlalchemy.dialects import postgresql

from authoric.db import tables as t
from authoric.errors import ServiceUnavailable
from authoric.plan.guard import (
    FACT_COLUMNS,
    PLAN_ATTEMPTS,
    Facts,
    Guard,
    StaleFacts,
    guarded_branches,
    guarded_select,
    until_held,
)

EXPECTED = Facts(version=7, app_name="shop", roles=("clerk",), email="ann@example.test")
NO_FACTS = dict.fromkeys(FACT_COLUMNS)


def guard() -> Guard:
    return Guard(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), EXPECTED)


def no_row(facts: Facts) -> dict[str, Any]:
    return {"_version": facts.version, "_app_name": facts.app_name,
            "_roles": None if facts.roles is None else list(facts.roles),
            "_email": facts.email, "uid": None}


def test_a_member_whose_facts_held_gets_every_row_of_the_page() -> None:
    g = guard()
    rows = [{**NO_FACTS, "uid": uuid.uuid4()} for _ in range(3)]
    assert g.check(rows) == rows
    assert g.held


def test_a_member_whose_facts_held_and_who_matches_nothing_gets_an_empty_page() -> None:
    g = guard()
    assert g.check([no_row(EXPECTED)]) == []
    assert g.held


@pytest.mark.parametrize("moved", [
    Facts(8, "shop", ("clerk",), "ann@example.test"),  # the catalog changed
    Facts(7, "shop", ("viewer",), "ann@example.test"),  # another role
    Facts(7, "shop", None, None),  # the membership is gone
])
def test_a_member_whose_facts_moved_is_planned_again_from_the_current_ones(moved: Facts) -> None:
    g = guard()
    with pytest.raises(StaleFacts) as raised:
        g.check([no_row(moved)])
    assert raised.value.facts == moved
    assert not g.held


def test_a_request_to_an_app_that_is_gone_gets_no_facts() -> None:
    with pytest.raises(StaleFacts) as raised:
        guard().check([])
    assert raised.value.facts is None


def test_a_page_carries_the_facts_only_on_the_row_that_stands_for_no_row() -> None:
    sql = str(guarded_select(guard(), select(t.apps)).compile(dialect=postgresql.dialect()))
    for column in FACT_COLUMNS:
        assert f"CASE WHEN (governed.uid IS NULL) THEN auth_facts.{column} END AS {column}" in sql


def test_a_statement_runs_only_where_every_fact_the_plan_assumed_still_holds() -> None:
    g = guard()
    condition = g.holds(g.cte())
    sql = str(condition.compile(dialect=postgresql.dialect()))
    bound = g.params()
    # Each fact a plan depends on is compared inside the statement, against the value the
    # plan was made for: none may change unseen.
    for column, key in [("_version", "B_version"), ("_app_name", "B_app_name"),
                        ("_roles", "B_roles")]:
        assert re.search(rf"auth_facts\.{column} = %\({key}_\d+\)s", sql), column
    # An API key's email is NULL, which must hold against NULL (section 3b).
    assert re.search(r"auth_facts\._email IS NOT DISTINCT FROM %\(B_email_\d+\)s", sql)
    assert (bound["B_version"], bound["B_app_name"], bound["B_roles"], bound["B_email"]) == (
        7, "shop", ["clerk"], "ann@example.test")


def test_the_feed_s_catalog_guard_plans_again_only_when_the_version_moved() -> None:
    g = Guard.for_catalog(uuid.uuid4(), 7)
    assert g.check([no_row(Facts(7, "shop", None, None))]) == []
    with pytest.raises(StaleFacts) as raised:
        Guard.for_catalog(uuid.uuid4(), 7).check([no_row(Facts(8, "shop", None, None))])
    assert raised.value.facts is not None and raised.value.facts.version == 8


def test_the_feed_s_catalog_guard_checks_the_version_and_nothing_of_a_member() -> None:
    g = Guard.for_catalog(uuid.uuid4(), 7)
    sql = str(guarded_branches(g, [select(t.apps.c.uid), select(t.apps.c.uid)]).compile(
        dialect=postgresql.dialect()))
    assert "UNION ALL" in sql and sql.count("auth_facts._version = ") == 2
    assert "members" not in sql
    assert g.params() == {"B_app": g.app_uid, "B_version": 7}


def test_a_count_is_one_guarded_row_that_stands_for_counted() -> None:
    g = guard()
    rows = [{**NO_FACTS, "uid": True, "total": 3}]
    assert g.check(rows)[0]["total"] == 3 and g.held


def test_a_statement_prepared_before_a_retype_is_told_from_other_failures() -> None:
    from sqlalchemy.exc import DBAPIError

    from authoric.plan.runner import prepared_on_old_tables

    stale = asyncpg.exceptions.InvalidCachedStatementError("cached plan must not change result type")
    wrapped = DBAPIError("SELECT 1", None, Exception("adapter"))
    wrapped.orig.__cause__ = stale  # type: ignore[union-attr]
    assert prepared_on_old_tables(wrapped)
    assert not prepared_on_old_tables(DBAPIError("SELECT 1", None, Exception("other")))
    assert not prepared_on_old_tables(asyncpg.exceptions.UndefinedColumnError("no column"))


def test_a_transaction_s_confirmation_reads_the_facts_alone_as_the_row_that_stands_for_no_row(
) -> None:
    g = guard()
    sql = str(g.confirmation().compile(dialect=postgresql.dialect()))
    assert "WITH auth_facts AS" in sql
    for column in FACT_COLUMNS:
        assert column in sql
    assert re.search(r"NULL AS uid", sql)
    # What it returns is read by `check`: the facts that held pass, moved ones plan again.
    assert g.check([no_row(EXPECTED)]) == []
    moved = Facts(EXPECTED.version + 1, EXPECTED.app_name, EXPECTED.roles, EXPECTED.email)
    with pytest.raises(StaleFacts) as raised:
        guard().check([no_row(moved)])
    assert raised.value.facts == moved


def test_a_request_whose_catalog_moved_once_is_answered_by_its_second_plan() -> None:
    tries: list[int] = []

    async def attempt() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise StaleFacts(EXPECTED)  # a rename committed between planning and the statement
        return "page"

    assert asyncio.run(until_held(attempt)) == "page"
    assert len(tries) == 2


def test_a_request_whose_catalog_moves_under_every_plan_gets_503_with_retry_after() -> None:
    """The SDK, the operator's rows and a member's transaction all plan through `until_held`:
    a catalog that keeps moving ends in 503 UNAVAILABLE, never a 500, after PLAN_ATTEMPTS."""
    tries: list[int] = []

    async def attempt() -> str:
        tries.append(1)
        raise StaleFacts(EXPECTED)

    with pytest.raises(ServiceUnavailable) as refused:
        asyncio.run(until_held(attempt))
    assert len(tries) == PLAN_ATTEMPTS
    assert (refused.value.status, refused.value.code) == (503, "UNAVAILABLE")
    assert refused.value.headers == {"Retry-After": "1"}


def test_a_request_given_one_attempt_is_not_planned_again() -> None:
    tries: list[int] = []

    async def attempt() -> str:
        tries.append(1)
        raise StaleFacts(EXPECTED)

    with pytest.raises(ServiceUnavailable):
        asyncio.run(until_held(attempt, 1))
    assert len(tries) == 1
