"""The query plans of governed lists on a table with owner-defined indexes: PostgreSQL serves
an ordered page, a keyset page, an equality filter and a search from the index (EXPLAIN of the
statement the plan layer builds, as it runs on the request path)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from typing import Any

import pytest
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import create_async_engine

from authoric.catalog.snapshot import load_snapshot
from authoric.db.engine import async_url
from authoric.plan.access import admit
from authoric.plan.listing import decode_cursor
from authoric.plan.plan import Page, Plan
from authoric.policy.principal import Principal
from authoric.query.filters import EVERYTHING, parse_filter
from tests.scenario import AppWorld, expect
from tests.sse import db_fetch

ROWS = 20_000


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
                          {"name": "notes", "type": "text"}])
    world.role("all", ["*:*"])
    org, other = world.org("North"), world.org("South")
    app_uid = str(expect(world.admin.get(world.base), 200)["uid"])
    schema = f'"app_{app_uid.replace("-", "")}"'
    for owner in (org, other):
        db_fetch(database_url, f"""
            INSERT INTO {schema}.items (uid, org_uid, amount, status, notes)
            SELECT gen_random_uuid(), $1::uuid, (i * 7919 % 10007)::numeric / 100,
                   (ARRAY['draft','paid','void','sent'])[1 + i % 4],
                   'note ' || i || CASE WHEN i % 500 = 0 THEN ' Crème brûlée' ELSE '' END
            FROM generate_series(1, {ROWS}) i""", owner)
    _ready(world, "by_amount", {"columns": ["amount"]})
    _ready(world, "by_status", {"columns": ["status"]})
    _ready(world, "notes_search", {"columns": ["notes"], "kind": "search"})
    db_fetch(database_url, f"ANALYZE {schema}.items")
    return world, app_uid, org


def explain(database_url: str, app_uid: str, org: str, doc: dict[str, Any] | None,
            page: Page) -> dict[str, Any]:
    """The JSON plan of the page statement a member with every permission would run."""

    async def run() -> dict[str, Any]:
        engine = create_async_engine(async_url(database_url))
        try:
            async with engine.connect() as conn:
                snapshot = await load_snapshot(conn, uuid.UUID(app_uid))
                principal = Principal(snapshot.uid, uuid.uuid4(), uuid.UUID(org), None, ("all",))
                access = admit(snapshot, principal, "items", "read_list")
                plan = Plan(access, parse_filter(doc) if doc else EVERYTHING)
                ordering = plan.ordering(page.order)
                after = None
                if page.after is not None:
                    after = decode_cursor(ordering, page.after)
                statement = plan.select_page(page, ordering, after)
                sql = str(statement.compile(dialect=postgresql.dialect(),
                                            compile_kwargs={"literal_binds": True}))
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
    assert physical(database_url, app_uid, "gin (authoric.search_vector(notes))") in (
        index_names(plan))


def test_without_an_index_the_same_page_is_sorted(items: tuple[AppWorld, str, str],
                                                   database_url: str) -> None:
    """The control: the assertions above can fail (ordering by `notes` has no index)."""
    _, app_uid, org = items
    plan = explain(database_url, app_uid, org, None, Page(order="notes", limit=50))
    assert sorts(plan) != []
