"""CSV export (contract section 4): `GET /{app}/autocrud/{table}` with `Accept: text/csv`.

Callers: a manager who reads everything, a viewer with redacted columns, a regional member
confined by a row policy, a member of another org, and members without `read_list`.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess

CSV = {"Accept": "text/csv"}


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def people(world: AppWorld) -> AppWorld:
    world.table("vendors", [{"name": "name", "type": "text"}])
    world.table("people", [
        {"name": "name", "type": "text", "required": True},
        {"name": "region", "type": "text"},
        {"name": "salary", "type": "numeric"},
        {"name": "active", "type": "boolean"},
        {"name": "born", "type": "date"},
        {"name": "seen_at", "type": "timestamp"},
        {"name": "visits", "type": "integer"},
        {"name": "meta", "type": "json"},
        {"name": "vendor", "type": "reference", "references": "vendors"},
    ])
    world.role("manager", ["people:*", "vendors:*"])
    world.role("viewer", ["people:read_list", "people:read"], redact={"people": ["salary", "meta"]})
    world.role("regional", ["people:read_list", "people:read"],
                row_policies={"people": {"region": {"eq": "north"}}})
    world.org("A")
    world.org("B")
    return world


def _export(caller: Caller, world: AppWorld, table: str = "people", **params: Any) -> list[dict[str, str]]:
    response = caller.get(world.rows(table), params=params, headers=CSV)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    assert f'filename="{table}.csv"' in response.headers["content-disposition"]
    return list(csv.DictReader(io.StringIO(response.content.decode("utf-8"), newline="")))


def _header(caller: Caller, world: AppWorld, table: str = "people") -> list[str]:
    text = caller.get(world.rows(table), headers=CSV).content.decode()
    return next(csv.reader(io.StringIO(text, newline="")))


def _cell(value: Any) -> str:
    """How a JSON row value appears in the export (before formula neutralisation)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _add(world: AppWorld, caller: Caller, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = expect(caller.post(world.rows("people"), json=values), 201)
    return row


# What is exported ----------------------------------------------------------------------------

def test_manager_exports_every_row_of_their_org_with_the_same_values_as_the_json_list(
        people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    vendor = expect(manager.post(people.rows("vendors"), json={"name": "Paper"}), 201)
    _add(people, manager, name="Ada", region="north", salary="8760.00", active=True,
         born="1990-02-28", seen_at="2026-03-01T10:00:00+02:00", visits=-3,
         meta={"tags": ["x", "y"], "n": 1}, vendor_uid=vendor["uid"])
    _add(people, manager, name="Bob, \"the\" builder\nsecond line", region=None, active=False)
    _add(people, manager, name="Zoë ✓")
    other = people.caller(people.orgs["B"], ["manager"])
    _add(people, other, name="Other org")
    assert _header(manager, people) == ["uid", "name", "region", "salary", "active", "born",
                                        "seen_at", "visits", "meta", "vendor_uid", "createdAt",
                                        "updatedAt"]
    exported = _export(manager, people)
    listed = expect(manager.get(people.rows("people")), 200)["items"]
    assert len(exported) == 3
    assert exported == [{k: _cell(v) for k, v in row.items()} for row in listed]
    assert exported[0]["seen_at"] == "2026-03-01T08:00:00Z"
    assert json.loads(exported[0]["meta"]) == {"tags": ["x", "y"], "n": 1}
    assert exported[0]["active"] == "true" and exported[1]["active"] == "false"
    assert "Other org" not in {r["name"] for r in exported}


def test_export_of_an_empty_table_is_the_header_alone(people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    response = manager.get(people.rows("people"), headers=CSV)
    assert response.status_code == 200
    assert response.content.decode().splitlines() == [",".join(_header(manager, people))]


def test_member_of_another_org_never_exports_rows_of_the_first(people: AppWorld) -> None:
    manager_a = people.caller(people.orgs["A"], ["manager"])
    manager_b = people.caller(people.orgs["B"], ["manager"])
    mine = _add(people, manager_a, name="Secret")
    assert _export(manager_b, people) == []
    assert _export(manager_b, people, uid=mine["uid"]) == []
    assert _export(manager_b, people, filter=json.dumps({"name": {"eq": "Secret"}})) == []


def test_viewer_export_carries_redacted_columns_as_redacted(people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    viewer = people.caller(people.orgs["A"], ["viewer"])
    _add(people, manager, name="Ada", salary="100.00", meta={"ssn": "123"})
    _add(people, manager, name="Bob", salary=None, meta=None)
    exported = _export(viewer, people)
    assert "salary" in _header(viewer, people) and "meta" in _header(viewer, people)
    # What is asserted is the redaction, whatever order the two rows come in.
    assert sorted((r["name"], r["salary"], r["meta"]) for r in exported) == [
        ("Ada", "[redacted]", "[redacted]"), ("Bob", "[redacted]", "[redacted]")]
    body = viewer.get(people.rows("people"), headers=CSV).text
    assert "100.00" not in body and "123" not in body


def test_viewer_cannot_probe_a_redacted_column_through_an_export_filter_or_order(
        people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    viewer = people.caller(people.orgs["A"], ["viewer"])
    _add(people, manager, name="Ada", salary="100.00")
    for params in ({"salary[gte]": "50"}, {"filter": json.dumps({"salary": {"eq": "100.00"}})},
                   {"order": "-salary"}):
        as_json = viewer.get(people.rows("people"), params=params)
        as_csv = viewer.get(people.rows("people"), params=params, headers=CSV)
        assert as_csv.status_code == as_json.status_code == 400, (params, as_csv.text)
        assert as_csv.json()["error"]["code"] == "BAD_REQUEST"


def test_regional_member_exports_only_rows_their_row_policy_allows(people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    regional = people.caller(people.orgs["A"], ["regional"])
    for name, region in [("n1", "north"), ("s1", "south"), ("n2", "north"), ("x", None)]:
        _add(people, manager, name=name, region=region)
    assert [r["name"] for r in _export(regional, people)] == ["n1", "n2"]
    assert [r["name"] for r in _export(regional, people, region="south")] == []


@pytest.mark.parametrize("params", [
    {"region": "north"},
    {"visits[gte]": "5"},
    {"filter": json.dumps({"or": [{"region": {"eq": "south"}}, {"active": {"eq": True}}]})},
    {"region": "north", "filter": json.dumps({"visits": {"lt": 10}})},
    {"order": "-name"},
    {"order": "visits"},
    {"filter": json.dumps({"region": {"is_null": True}})},
])
def test_manager_export_honours_filters_and_order_like_the_json_list(
        people: AppWorld, params: dict[str, str]) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    for i, (region, active) in enumerate([("north", True), ("south", False), ("north", False),
                                          (None, True), ("south", True)]):
        _add(people, manager, name=f"p{i}", region=region, active=active, visits=i * 3)
    listed = expect(manager.get(people.rows("people"), params={**params, "limit": 1000}), 200)["items"]
    exported = _export(manager, people, **params)
    assert [r["uid"] for r in exported] == [r["uid"] for r in listed]


def test_export_ignores_the_page_limit_and_streams_every_matching_row(people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    body = "name,visits\n" + "".join(f"p{i},{i}\n" for i in range(2600))
    expect(manager.post(f"{people.rows('people')}/import", content=body.encode(),
                        headers={"Content-Type": "text/csv"}), 201)
    exported = _export(manager, people, limit="10")
    assert len(exported) == 2600 and len({r["uid"] for r in exported}) == 2600
    assert [r["uid"] for r in exported] == sorted(r["uid"] for r in exported)
    assert len(_export(manager, people, **{"visits[lt]": "1500"})) == 1500


def test_bad_filters_on_an_export_get_a_clean_json_400(people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    for params in ({"nope": "1"}, {"filter": "{not json"}, {"visits[bogus]": "1"},
                   {"order": "nope"}):
        response = manager.get(people.rows("people"), params=params, headers=CSV)
        expect(response, 400, "BAD_REQUEST")


def test_soft_deleted_rows_are_not_exported(world: AppWorld) -> None:
    world.table("notes", [{"name": "body", "type": "text"}], softDelete=True)
    world.role("clerk", ["notes:*"])
    clerk = world.caller(world.org("A"), ["clerk"])
    keep = expect(clerk.post(world.rows("notes"), json={"body": "keep"}), 201)
    gone = expect(clerk.post(world.rows("notes"), json={"body": "gone"}), 201)
    expect(clerk.delete(f"{world.rows('notes')}/{gone['uid']}"), 204)
    assert [r["uid"] for r in _export(clerk, world, "notes")] == [keep["uid"]]


# Formula neutralisation ------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "cell"), [
    ("=1+1", "'=1+1"),
    ("+SUM(A1:A2)", "'+SUM(A1:A2)"),
    ("-2+3", "'-2+3"),
    ("@cmd", "'@cmd"),
    ("\tx", "'\tx"),
    ("\rx", "'\rx"),
    ('=HYPERLINK("http://evil.example","x")', "'=HYPERLINK(\"http://evil.example\",\"x\")"),
    ("a=b", "a=b"),
    ("plain", "plain"),
    ("'quoted", "'quoted"),
    (" =spaced", " =spaced"),
])
def test_text_cells_that_a_spreadsheet_would_run_as_formulas_are_neutralised(
        people: AppWorld, value: str, cell: str) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    _add(people, manager, name=value)
    assert _export(manager, people)[0]["name"] == cell
    # The stored value and the JSON shape are untouched.
    assert expect(manager.get(people.rows("people")), 200)["items"][0]["name"] == value


def test_json_cells_are_neutralised_but_typed_numbers_are_not(people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    _add(people, manager, name="a", meta=-5, visits=-5, salary="-12.50")
    _add(people, manager, name="b", meta="=cmd", visits=7)
    _add(people, manager, name="c", meta={"k": "=cmd"})
    rows = _export(manager, people)
    assert (rows[0]["meta"], rows[0]["visits"], rows[0]["salary"]) == ("'-5", "-5", "-12.50")
    assert rows[1]["meta"] == '"=cmd"'  # a JSON string starts with a quote: not a formula
    assert rows[2]["meta"] == '{"k":"=cmd"}'


# Refusals --------------------------------------------------------------------------------------

def test_member_without_read_list_gets_403_for_an_export(people: AppWorld) -> None:
    people.role("single", ["people:read", "people:create"])
    single = people.caller(people.orgs["A"], ["single"])
    _add(people, people.caller(people.orgs["A"], ["manager"]), name="Ada")
    response = single.get(people.rows("people"), headers=CSV)
    expect(response, 403, "FORBIDDEN")
    assert "Ada" not in response.text


def test_export_of_a_table_whose_list_is_switched_off_gets_table_locked(people: AppWorld) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    expect(people.admin.patch(f"{people.base}/tables/people", json={"operations": {"list": False}}),
           200)
    expect(manager.get(people.rows("people"), headers=CSV), 403, "TABLE_LOCKED")


def test_export_without_a_token_gets_401(people: AppWorld, http: httpx.Client) -> None:
    expect(http.get(people.rows("people"), headers=CSV), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("accept", ["text/csv", "text/csv; charset=utf-8",
                                    "application/json;q=0.5, text/csv"])
def test_accept_headers_naming_csv_get_csv_and_others_get_json(people: AppWorld, accept: str) -> None:
    manager = people.caller(people.orgs["A"], ["manager"])
    _add(people, manager, name="Ada")
    as_csv = manager.get(people.rows("people"), headers={"Accept": accept})
    assert as_csv.headers["content-type"].startswith("text/csv")
    as_json = manager.get(people.rows("people"), headers={"Accept": "application/json"})
    assert as_json.json()["items"][0]["name"] == "Ada"


def test_an_export_reimported_into_another_org_gives_the_same_rows(people: AppWorld) -> None:
    manager_a = people.caller(people.orgs["A"], ["manager"])
    manager_b = people.caller(people.orgs["B"], ["manager"])
    _add(people, manager_a, name="Ada", region="north", salary="1.50", active=True,
         born="1990-02-28", seen_at="2026-03-01T10:00:00Z", visits=3, meta={"k": [1, "two"]})
    _add(people, manager_a, name="Line\nbreak, comma \"quote\"")
    rows = _export(manager_a, people)
    keep = ["name", "region", "salary", "active", "born", "seen_at", "visits", "meta"]
    out = io.StringIO()
    writer = csv.DictWriter(out, keep, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    expect(manager_b.post(f"{people.rows('people')}/import", content=out.getvalue().encode(),
                          headers={"Content-Type": "text/csv"}), 201)
    strip = {"uid", "createdAt", "updatedAt"}
    a = [{k: v for k, v in r.items() if k not in strip}
         for r in expect(manager_a.get(people.rows("people")), 200)["items"]]
    b = [{k: v for k, v in r.items() if k not in strip}
         for r in expect(manager_b.get(people.rows("people")), 200)["items"]]
    assert a == b
    assert uuid.UUID(rows[0]["uid"])
