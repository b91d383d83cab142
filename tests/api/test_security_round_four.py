"""Security round four (issue 38), findings 2 to 6, each as the caller who found it:
system column names (4), a NUL byte in a `like` filter (6), one huge value and search (2),
the multi-word search subquery and the org (3, with tests/integration/test_search_org_plan.py),
index builds asked for together (5). Finding 1 is tests/api/test_reads_racing_schema_changes.py.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.scenario import AppWorld, expect

SYSTEM_COLUMNS = ["ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"]


@pytest.mark.parametrize("name", SYSTEM_COLUMNS)
def test_an_operator_gets_422_for_a_column_named_as_a_postgresql_system_column(
        world: AppWorld, name: str) -> None:
    expect(world.admin.post(f"{world.base}/tables", json={
        "name": "things", "columns": [{"name": name, "type": "text"}]}), 422, "VALIDATION_FAILED")
    expect(world.admin.get(f"{world.base}/tables/things"), 404, "NOT_FOUND")
    world.table("things", [{"name": "title", "type": "text"}])
    expect(world.admin.patch(f"{world.base}/tables/things", json={
        "addColumns": [{"name": name, "type": "text"}]}), 422, "VALIDATION_FAILED")
    expect(world.admin.patch(f"{world.base}/tables/things", json={
        "renameColumns": {"title": name}}), 422, "VALIDATION_FAILED")
    columns = expect(world.admin.get(f"{world.base}/tables/things"), 200)["columns"]
    assert [c["name"] for c in columns] == ["title"]


@pytest.mark.parametrize("how", ["query string", "filter document"])
def test_a_member_gets_422_naming_the_column_for_a_nul_byte_in_a_like_pattern(
        world: AppWorld, how: str) -> None:
    world.table("notes", [{"name": "title", "type": "text"}])
    org = world.org("North")
    world.role("clerk", ["notes:*"])
    clerk = world.caller(org, ["clerk"])
    expect(clerk.post(world.rows("notes"), json={"title": "a"}), 201)
    params = ({"title[like]": "a\x00%"} if how == "query string"
              else {"filter": json.dumps({"title": {"like": "a\x00%"}})})
    body = expect(clerk.get(world.rows("notes"), params=params), 422, "VALIDATION_FAILED")
    assert body["error"]["details"]["column"] == "title", body
    assert "22021" not in json.dumps(body)


HUGE = 980_000  # characters: the value of the finding


def huge_text() -> str:
    """About HUGE characters of distinct words (their lexemes alone pass 1 MB), led by the
    words the tests search for."""
    words = " ".join(f"w{i:07d}" for i in range(HUGE // 9))
    return f"late invoice {words}"[:HUGE]


@pytest.mark.parametrize("indexed", [False, True], ids=["no index", "search index"])
def test_a_member_s_huge_value_never_switches_search_off_for_the_org(
        world: AppWorld, indexed: bool) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    if indexed:
        wait_ready(world, "notes", "body_search", {"columns": ["body"], "kind": "search"})
    org = world.org("North")
    world.role("clerk", ["notes:*"])
    clerk, other = world.caller(org, ["clerk"]), world.caller(org, ["clerk"])
    small = expect(clerk.post(world.rows("notes"), json={"body": "late invoice"}), 201)
    huge = expect(clerk.post(world.rows("notes"), json={"body": huge_text()}), 201)
    for words_searched in ("late", "late invoice"):
        search = json.dumps({"body": {"search": words_searched}})
        page = expect(other.get(world.rows("notes"), params={"filter": search,
                                                             "count": "exact"}), 200)
        assert {r["uid"] for r in page["items"]} == {small["uid"], huge["uid"]}
        assert page["total"] == 2


def test_a_search_index_is_built_over_a_table_holding_a_huge_value(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}])
    org = world.org("North")
    world.role("clerk", ["notes:*"])
    clerk = world.caller(org, ["clerk"])
    expect(clerk.post(world.rows("notes"), json={"body": huge_text()}), 201)
    assert wait_ready(world, "notes", "body_search",
                      {"columns": ["body"], "kind": "search"}) == "ready"


def wait_ready(world: AppWorld, table: str, name: str, spec: dict[str, object]) -> str:
    """The index's state once it is built (or failed)."""
    url = f"{world.base}/tables/{table}/indexes/{name}"
    expect(world.admin.put(url, json=spec), 202)
    deadline = time.monotonic() + 120
    while (state := expect(world.admin.get(url), 200)["state"]) == "building":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return str(state)


def test_an_operator_asking_for_many_index_builds_at_once_gets_every_one_ready(
        world: AppWorld) -> None:
    tables = [f"t{n}" for n in range(4)]
    for table in tables:
        world.table(table, [{"name": f"c{i}", "type": "text"} for i in range(4)])
    specs = [(table, f"{table}_c{i}_{kind}", {"columns": [f"c{i}"], "kind": kind})
             for table in tables for i in range(4) for kind in ("btree", "search")]

    def ask(item: tuple[str, str, dict[str, object]]) -> None:
        table, name, spec = item
        expect(world.admin.put(f"{world.base}/tables/{table}/indexes/{name}", json=spec), 202)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(ask, specs))
    deadline = time.monotonic() + 300
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = {i["name"]: i["state"] for table in tables for i in expect(
            world.admin.get(f"{world.base}/tables/{table}/indexes"), 200)["items"]}
        if "building" not in states.values():
            break
        time.sleep(0.2)
    assert states == {name: "ready" for _, name, _ in specs}, states
