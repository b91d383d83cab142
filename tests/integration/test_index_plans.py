"""The query plans of governed lists on a table with owner-defined indexes: PostgreSQL serves
an ordered page, a keyset page, an equality filter and a search from the index (EXPLAIN of the
statement the plan layer builds, as it runs on the request path)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import create_async_engine

from authoric.catalog.snapshot import load_snapshot
from authoric.db.engine import async_url
from authoric.plan.access import admit
from authoric.plan.guard import Facts, Guard
from authoric.plan.listing import decode_cursor
from authoric.plan.plan import Page, Plan
from authoric.policy.principal import Principal
from authoric.query.filters import EVERYTHING, parse_filter
from tests.scenario import AppWorld, expect
from tests.sse import db_fetch

ROWS = 20_000
# `tags`: three words of twelve per row, so each word is in about a quarter of the rows and
# a combination of three in about 0.3%, far fewer than their frequencies multiplied suggest.
TAGS = ("(ARRAY['late','paid','invoice','urgent','draft','review','refund','pallet','cafe',"
        "'delivery','audit','export'])")


def _ready(world: AppWorld, name: str, body: dict[str, Any]) -> None:
    expect(world.admin.put(f"{world.base}/tables/items/indexes/{name}", json=body), 202)
    deadline = time.monotonic() + 120
    while expect(world.admin.get(f"{world.base}/tables/items/indexes/{name}"), 200)[
            "state"] == "building":
        assert time.monotonic() < deadline
        time.sleep(0.1)


@pytest.fixture(scope="module")
def items(server: Any, http: Any, database_url: str) -> tuple[AppWorld, str, str]:
    """`items` with 20,000 rows in one org (and 20,000 in another), three indexes, analyzed."""
    world = AppWorld.create(server, http)
    world.table("items", [{"name": "amount", "type": "numeric"},
                          {"name": "status", "type": "text"},
                          {"name": "notes", "type": "text"},
                          {"name": "tags", "type": "text"}])
    world.role("all", ["*:*"])
    org, other = world.org("North"), world.org("South")
    app_uid = str(expect(world.admin.get(world.base), 200)["uid"])
    schema = f'"app_{app_uid.replace("-", "")}"'
    for owner in (org, other):
        db_fetch(database_url, f"""
            INSERT INTO {schema}.items (uid, org_uid, amount, status, notes, tags)
            SELECT gen_random_uuid(), $1::uuid, (i * 7919 % 10007)::numeric / 100,
                   (ARRAY['draft','paid','void','sent'])[1 + i % 4],
                   'note ' || i || CASE WHEN i % 500 = 0 THEN ' Crème brûlée' ELSE '' END,
                   {TAGS}[1 + i % 12] || ' ' || {TAGS}[1 + (i / 12) % 12] || ' '
                   || {TAGS}[1 + (i / 144) % 12]
            FROM generate_series(1, {ROWS}) i""", owner)
    _ready(world, "by_amount", {"columns": ["amount"]})
    _ready(world, "by_status", {"columns": ["status"]})
    _ready(world, "notes_search", {"columns": ["notes"], "kind": "search"})
    _ready(world, "tags_search", {"columns": ["tags"], "kind": "search"})
    db_fetch(database_url, f"ANALYZE {schema}.items")
    return world, app_uid, org


def explain(database_url: str, app_uid: str, org: str, doc: dict[str, Any] | None,
            page: Page) -> dict[str, Any]:
    """The JSON plan of the page statement a member with every permission would run."""

    def page_statement(plan: Plan, _: Principal, __: Any) -> Any:
        ordering = plan.ordering(page.order)
        after = None if page.after is None else decode_cursor(ordering, page.after)
        return plan.select_page(page, ordering, after)

    return _explained(database_url, app_uid, org, doc, page_statement)


def explain_list(database_url: str, app_uid: str, org: str, doc: dict[str, Any],
                 page: Page) -> dict[str, Any]:
    """The JSON plan of a list's own statement, as the request path sends it: the plan's
    page with its guard (the authentication facts) around it."""

    def list_statement(plan: Plan, principal: Principal, snapshot: Any) -> Any:
        # Values that could hold (NULLs would let PostgreSQL fold the guard away).
        guard = Guard(snapshot.uid, principal.user_uid, principal.org_uid,
                      Facts(snapshot.version, snapshot.name, ("all",), "a@example.com"),
                      membership=uuid.uuid4())
        return plan.read_page(page, guard)[0].build()

    return _explained(database_url, app_uid, org, doc, list_statement)


def _explained(database_url: str, app_uid: str, org: str, doc: dict[str, Any] | None,
               statement: Callable[[Plan, Principal, Any], Any]) -> dict[str, Any]:
    """EXPLAIN of the statement `statement` builds for a member with every permission."""

    async def run() -> dict[str, Any]:
        engine = create_async_engine(async_url(database_url))
        try:
            async with engine.connect() as conn:
                snapshot = await load_snapshot(conn, uuid.UUID(app_uid))
                principal = Principal(snapshot.uid, uuid.uuid4(), uuid.UUID(org), None, ("all",))
                access = admit(snapshot, principal, "items", "read_list")
                plan = Plan(access, parse_filter(doc) if doc else EVERYTHING)
                sql = str(statement(plan, principal, snapshot).compile(
                    dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
                result = await conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {sql}")
                found = result.scalar()
                return dict((json.loads(found) if isinstance(found, str) else found)[0]["Plan"])
        finally:
            await engine.dispose()

    return asyncio.run(run())


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += nodes(child)
    return found


def index_names(plan: dict[str, Any]) -> set[str]:
    return {n["Index Name"] for n in nodes(plan) if "Index Name" in n}


def sorts(plan: dict[str, Any]) -> list[str]:
    return [n["Node Type"] for n in nodes(plan) if "Sort" in n["Node Type"]]


def physical(database_url: str, app_uid: str, name: str) -> str:
    return str(db_fetch(database_url, """
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relkind = 'i'
          AND pg_get_indexdef(c.oid) LIKE '%' || $2 || '%'""",
        f"app_{app_uid.replace('-', '')}", name)[0]["relname"])


def test_a_page_ordered_by_an_indexed_column_is_read_from_the_index_without_a_sort(
        items: tuple[AppWorld, str, str], database_url: str) -> None:
    _, app_uid, org = items
    plan = explain(database_url, app_uid, org, None, Page(order="amount", limit=50))
    assert index_names(plan) == {physical(database_url, app_uid, "(org_uid, amount, uid)")}
    assert sorts(plan) == []


def test_a_keyset_page_deep_in_the_order_is_read_from_the_index_without_a_sort(
        items: tuple[AppWorld, str, str], database_url: str) -> None:
    _, app_uid, org = items
    cursor = base64.urlsafe_b64encode(json.dumps(
        {"o": "amount", "v": "80", "u": str(uuid.UUID(int=5))}).encode()).decode()
    plan = explain(database_url, app_uid, org, None, Page(order="amount", limit=50,
                                                          after=cursor))
    assert index_names(plan) == {physical(database_url, app_uid, "(org_uid, amount, uid)")}
    assert sorts(plan) == []


def test_an_equality_filter_on_an_indexed_column_uses_the_index(
        items: tuple[AppWorld, str, str], database_url: str) -> None:
    _, app_uid, org = items
    plan = explain(database_url, app_uid, org, {"status": "paid"}, Page(limit=50))
    assert physical(database_url, app_uid, "(org_uid, status, uid)") in index_names(plan)
    assert sorts(plan) == []


def test_a_search_uses_the_search_index(items: tuple[AppWorld, str, str],
                                        database_url: str) -> None:
    _, app_uid, org = items
    plan = explain(database_url, app_uid, org, {"notes": {"search": "creme BRULEE"}},
                   Page(limit=50))
    assert physical(database_url, app_uid, "authoric.search_vector(notes))") in (
        index_names(plan))


def test_a_list_searching_several_words_reads_its_matches_from_the_search_index(
        items: tuple[AppWorld, str, str], database_url: str) -> None:
    """Three common words rarely together: estimated as independent, PostgreSQL would walk
    the org's rows in page order, folding each row's text, for matches that hardly come."""
    _, app_uid, org = items
    index = physical(database_url, app_uid, "authoric.search_vector(tags))")
    for words in ("late paid invoice", "late paid -invoice", '"late paid"'):
        for page in (Page(limit=50), Page(order="amount", limit=50)):
            plan = explain_list(database_url, app_uid, org, {"tags": {"search": words}}, page)
            scans = [n for n in nodes(plan) if n["Node Type"] == "Bitmap Index Scan"]
            assert [n["Index Name"] for n in scans] == [index], (words, page)


def test_a_member_searching_several_words_reads_only_its_own_org_s_matches_from_the_index(
        items: tuple[AppWorld, str, str], database_url: str) -> None:
    """Round four, finding 3: the subquery that collects a multi-word search's matches
    carries the member's org, and the search index, led by the org, answers both: other
    orgs' matches are intersected away in the index, never fetched nor collected."""
    _, app_uid, org = items
    index = physical(database_url, app_uid, "authoric.search_vector(tags))")
    definition = db_fetch(database_url, "SELECT pg_get_indexdef(c.oid) AS d FROM pg_class c "
                          "WHERE c.relname = $1", index)[0]["d"]
    assert "USING gin ((ARRAY[org_uid]), authoric.search_vector(tags))" in definition
    plan = explain_list(database_url, app_uid, org, {"tags": {"search": "late paid invoice"}},
                        Page(limit=50))
    scans = [n for n in nodes(plan) if n["Node Type"] == "Bitmap Index Scan"]
    assert [n["Index Name"] for n in scans] == [index]
    condition = scans[0]["Index Cond"]
    assert "ARRAY[org_uid]" in condition and org in condition, condition
    assert "to_tsvector" in condition and "tags" in condition, condition  # the words too


def test_without_an_index_the_same_page_is_sorted(items: tuple[AppWorld, str, str],
                                                   database_url: str) -> None:
    """The control: the assertions above can fail (ordering by `notes` has no index)."""
    _, app_uid, org = items
    plan = explain(database_url, app_uid, org, None, Page(order="notes", limit=50))
    assert sorts(plan) != []
