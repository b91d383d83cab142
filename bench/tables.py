"""What indexes, expand, counting and search cost on a large table (issue 17).

    .venv/bin/python -m bench.tables                        # 1M rows, every scenario
    .venv/bin/python -m bench.tables --rows 100000 --scenarios order,count

Starts a fresh embedded PostgreSQL (or uses DATABASE_URL) and `authoric serve`, creates an app
with `vendors` (1,000 rows) and `items` (`--rows`, loaded with one INSERT ... SELECT straight
into the app's schema, all in one org), then times requests one after another as a member
with every permission and no row policy. For each case it prints the p50 and p90 latency and
the server + PostgreSQL CPU time per request (from /proc): the CPU figure travels better than
latency on a shared machine.

Scenarios:
- `order`: the first page of 50 `?order=amount`, without an index, then with
  `PUT .../indexes/by_amount {"columns": ["amount"]}`; and a keyset page deep in the order.
- `expand`: a page of 50 with and without `?expand=vendor`.
- `count`: a page of 50 with `?count=exact` (a member), and on the operator's rows route
  with `?count=exact` and `?count=estimate`, at the table's size.
- `search`: `{"notes": {"search": "..."}}`, without and with a `search` index on `notes`
  (three common words with an exclusion, three common words rarely found together, and words
  that exclude each other, which PostgreSQL estimates worst).

Not a test: nothing fails. Figures go to docs/benchmarks.md with the command that made them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.harness import (
    Database,
    PostgresCpu,
    Server,
    database,
    running_server,
    tree_cpu_seconds,
)

SCENARIOS = ("order", "expand", "count", "search")
WORDS = ("late", "paid", "invoice", "crème", "brûlée", "delivery", "draft", "urgent", "café",
         "pallet", "review", "refund")


def _admin(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=600,
                        headers={"Authorization": f"Bearer {server.admin_token}"})


def _ok(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise SystemExit(f"{response.request.method} {response.request.url}: "
                         f"{response.status_code} {response.text}")
    return response.json() if response.content else None


def setup(server: Server, rows: int) -> tuple[str, str, str]:
    """(app name, app uid, a member's access token) with the tables loaded."""
    with _admin(server) as admin:
        app = _ok(admin.post("/admin/apps", json={"name": "bench"}))
        base = "/admin/apps/bench"
        _ok(admin.post(f"{base}/tables", json={"name": "vendors", "columns": [
            {"name": "name", "type": "text", "required": True, "unique": True},
            {"name": "country", "type": "text"}]}))
        _ok(admin.post(f"{base}/tables", json={"name": "items", "columns": [
            {"name": "title", "type": "text"},
            {"name": "vendor", "type": "reference", "references": "vendors"},
            {"name": "amount", "type": "numeric"},
            {"name": "notes", "type": "text"}]}))
        org = _ok(admin.post(f"{base}/orgs", json={"name": "Bench"}))["uid"]
        _ok(admin.put(f"{base}/roles/all", json={"permissions": ["*:*"]}))
        user = _ok(admin.post(f"{base}/users", json={"email": "b@example.com",
                                                       "password": "bench-password"}))
        _ok(admin.put(f"{base}/orgs/{org}/members/{user['uid']}", json={"roles": ["all"]}))
        token = _ok(admin.post("/bench/auth/token", json={
            "email": "b@example.com", "password": "bench-password"}))["access_token"]
    asyncio.run(_load(server.db_url, app["uid"], org, rows))
    return "bench", app["uid"], token


async def _load(url: str, app_uid: str, org: str, rows: int) -> None:
    schema = f'"app_{app_uid.replace("-", "")}"'
    words = "ARRAY[" + ", ".join(f"'{w}'" for w in WORDS) + "]"
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"""
            INSERT INTO {schema}.vendors (uid, org_uid, name, country)
            SELECT gen_random_uuid(), $1::uuid, 'vendor ' || i, 'country ' || (i % 50)
            FROM generate_series(1, 1000) i""", org)
        await conn.execute(f"""
            INSERT INTO {schema}.items (uid, org_uid, title, vendor, amount, notes)
            SELECT gen_random_uuid(), $1::uuid, 'item ' || i,
                   (SELECT array_agg(uid) FROM {schema}.vendors)[1 + (i % 1000)],
                   round((random() * 10000)::numeric, 2),
                   ({words})[1 + (i % 12)] || ' ' || ({words})[1 + ((i / 12) % 12)] || ' '
                   || ({words})[1 + ((i / 144) % 12)] || ' note ' || i
            FROM generate_series(1, $2) i""", org, rows)
        await conn.execute(f"ANALYZE {schema}.items")
        await conn.execute(f"ANALYZE {schema}.vendors")
    finally:
        await conn.close()


def measure(server: Server, token: str, path: str, params: Callable[[int], dict[str, Any]],
            requests: int) -> dict[str, float]:
    """p50/p90 latency (ms) and server + PostgreSQL CPU ms per request, sequential."""
    pg = PostgresCpu(Database(server.db_url, server.db_pid, None))
    with httpx.Client(base_url=server.url, timeout=600,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        for i in range(3):  # warm: prepared statements, snapshot, caches
            _ok(client.get(path, params=params(i)))
        cpu0, pg0 = tree_cpu_seconds(server.pid), pg.read()
        times = []
        for i in range(requests):
            start = time.perf_counter()
            _ok(client.get(path, params=params(i)))
            times.append((time.perf_counter() - start) * 1000)
        cpu = tree_cpu_seconds(server.pid) - cpu0
        db = PostgresCpu.used(pg0, pg.read())
    times.sort()
    return {"p50": statistics.median(times), "p90": times[int(len(times) * 0.9) - 1],
            "server_cpu": cpu * 1000 / requests, "pg_cpu": db * 1000 / requests}


def put_index(server: Server, table: str, name: str, body: dict[str, Any]) -> float:
    """Seconds from PUT to `ready`."""
    with _admin(server) as admin:
        start = time.perf_counter()
        _ok(admin.put(f"/admin/apps/bench/tables/{table}/indexes/{name}", json=body))
        while True:
            state = _ok(admin.get(f"/admin/apps/bench/tables/{table}/indexes/{name}"))
            if state["state"] != "building":
                if state["state"] != "ready":
                    raise SystemExit(f"index {name}: {state}")
                return time.perf_counter() - start
            time.sleep(0.2)


def row(label: str, figures: dict[str, float]) -> None:
    print(f"  {label:<44} p50 {figures['p50']:8.1f} ms  p90 {figures['p90']:8.1f} ms  "
          f"server CPU {figures['server_cpu']:7.2f} ms/req  PostgreSQL CPU "
          f"{figures['pg_cpu']:7.2f} ms/req", flush=True)


def run(server: Server, token: str, rows: int, scenarios: list[str], requests: int) -> None:
    items = "/bench/autocrud/items"
    print(f"items: {rows:,} rows in one org; {requests} sequential requests per case")
    if "order" in scenarios:
        print("order: first page of 50 ?order=amount")
        deep = {"order": "amount", "limit": "50", "filter": json.dumps({"amount": {"gt": "9000"}})}
        row("no index", measure(server, token, items,
                                lambda i: {"order": "amount", "limit": "50"}, max(5, requests // 4)))
        built = put_index(server, "items", "by_amount", {"columns": ["amount"]})
        print(f"  index by_amount built in {built:.1f} s (CREATE INDEX CONCURRENTLY)")
        row("with index (org_uid, amount, uid)", measure(
            server, token, items, lambda i: {"order": "amount", "limit": "50"}, requests))
        row("with index, amount > 9000", measure(server, token, items, lambda i: deep, requests))
    if "expand" in scenarios:
        print("expand: a page of 50")
        plain = measure(server, token, items, lambda i: {"limit": "50"}, requests)
        expanded = measure(server, token, items, lambda i: {"limit": "50", "expand": "vendor"},
                           requests)
        row("without expand", plain)
        row("?expand=vendor", expanded)
        ratio = expanded["server_cpu"] / max(plain["server_cpu"], 1e-9)
        print(f"  server CPU ratio expand/plain: {ratio:.2f}")
    if "count" in scenarios:
        print(f"count: a page of 50 with the total of {rows:,} rows")
        row("no count", measure(server, token, items, lambda i: {"limit": "50"}, requests))
        row("?count=exact", measure(server, token, items,
                                    lambda i: {"limit": "50", "count": "exact"},
                                    max(5, requests // 4)))
        rows = "/admin/apps/bench/tables/items/rows"
        row("operator's rows, no count", measure(server, server.admin_token, rows,
                                                 lambda i: {"limit": "50"}, requests))
        row("operator's rows, ?count=exact", measure(
            server, server.admin_token, rows, lambda i: {"limit": "50", "count": "exact"},
            max(5, requests // 4)))
        row("operator's rows, ?count=estimate", measure(
            server, server.admin_token, rows, lambda i: {"limit": "50", "count": "estimate"},
            requests))
    if "search" in scenarios:
        print("search: {\"notes\": {\"search\": ...}}, a page of 50")

        def query(i: int) -> dict[str, Any]:
            words = f"{WORDS[i % 12]} {WORDS[(i * 5 + 1) % 12]} -{WORDS[(i * 7 + 2) % 12]}"
            return {"limit": "50", "filter": json.dumps({"notes": {"search": words}})}

        row("no search index", measure(server, token, items, query, 5))
        built = put_index(server, "items", "notes_search", {"columns": ["notes"],
                                                            "kind": "search"})
        print(f"  search index built in {built:.1f} s")
        row("with search index", measure(server, token, items, query, requests))

        def rare(i: int) -> dict[str, Any]:
            # Three words each in a quarter of the rows, together in about 0.35%: estimated
            # as independent, they look ten times more frequent than they are.
            words = f"{WORDS[i % 12]} {WORDS[(i + 1) % 12]} {WORDS[(i + 5) % 12]}"
            return {"limit": "50", "filter": json.dumps({"notes": {"search": words}})}

        row("with search index, three words rarely together", measure(
            server, token, items, rare, requests))

        def none(i: int) -> dict[str, Any]:
            # The worst estimate: a word and its exclusion look like 19% of the rows, match none.
            words = f"{WORDS[i % 12]} {WORDS[(i + 1) % 12]} -{WORDS[i % 12]}"
            return {"limit": "50", "filter": json.dumps({"notes": {"search": words}})}

        row("with search index, words that exclude each other", measure(
            server, token, items, none, max(5, requests // 4)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    with tempfile.TemporaryDirectory() as tmp, database(Path(tmp)) as db, \
            running_server(Path(tmp), db, env={"AUTHORIC_STATEMENT_TIMEOUT_MS": "300000"}) as server:
        started = time.perf_counter()
        _, _, token = setup(server, args.rows)
        print(f"loaded in {time.perf_counter() - started:.0f} s")
        run(server, token, args.rows, scenarios, args.requests)


if __name__ == "__main__":
    main()
