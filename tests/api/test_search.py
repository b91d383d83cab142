"""The `search` filter operator (contract section 4, Search), as members use it."""

from __future__ import annotations

import json
import random
import string
import time

import pytest

from tests.scenario import AppWorld, Caller, expect


@pytest.fixture
def notes(world: AppWorld) -> tuple[AppWorld, Caller, dict[str, str]]:
    """`invoices` with a few notes in one org (and a look-alike in another)."""
    world.table("invoices", [{"name": "notes", "type": "text"},
                             {"name": "secret", "type": "text"},
                             {"name": "amount", "type": "numeric"}])
    world.role("clerk", ["invoices:*"])
    world.role("viewer", ["invoices:read_list", "invoices:read"], redact={"invoices": ["secret"]})
    org = world.org("North")
    clerk = world.caller(org, ["clerk"])
    rows = {}
    for key, text in {"late": "Late invoice, Crème brûlée supplier",
                      "paid": "late invoice already PAID",
                      "street": "Delivery to the Hauptstraße depot",
                      "phrase": "invoice was late"}.items():
        rows[key] = expect(clerk.post(world.rows("invoices"), json={"notes": text,
                                                                    "secret": text}), 201)["uid"]
    south = world.caller(world.org("South"), ["clerk"])
    expect(south.post(world.rows("invoices"), json={"notes": "Late invoice crème"}), 201)
    return world, clerk, rows


def found(world: AppWorld, caller: Caller, query: str, column: str = "notes") -> set[str]:
    doc = json.dumps({column: {"search": query}})
    items = expect(caller.get(world.rows("invoices"), params={"filter": doc}), 200)["items"]
    return {r["uid"] for r in items}


def test_a_member_searches_words_case_and_accent_insensitively_within_the_org(
        notes: tuple[AppWorld, Caller, dict[str, str]]) -> None:
    world, clerk, rows = notes
    assert found(world, clerk, "creme BRULEE") == {rows["late"]}
    assert found(world, clerk, "late invoice") == {rows["late"], rows["paid"], rows["phrase"]}
    assert found(world, clerk, "late invoice -paid") == {rows["late"], rows["phrase"]}
    assert found(world, clerk, '"late invoice"') == {rows["late"], rows["paid"]}
    assert found(world, clerk, "hauptstrasse") == {rows["street"]}
    assert found(world, clerk, "depot or supplier") == {rows["late"], rows["street"]}
    assert found(world, clerk, "invoices") == set()  # language-neutral: no stemming


def test_search_works_in_the_query_string_and_combines_with_other_filters(
        notes: tuple[AppWorld, Caller, dict[str, str]]) -> None:
    world, clerk, rows = notes
    got = expect(clerk.get(world.rows("invoices"), params={"notes[search]": "late",
                                                           "notes[like]": "%PAID"}), 200)
    assert [r["uid"] for r in got["items"]] == [rows["paid"]]


def test_a_member_cannot_search_a_column_redacted_for_them_nor_a_non_text_column(
        notes: tuple[AppWorld, Caller, dict[str, str]]) -> None:
    world, clerk, _ = notes
    viewer = world.caller(clerk.org_uid or "", ["viewer"])
    doc = json.dumps({"secret": {"search": "late"}})
    expect(viewer.get(world.rows("invoices"), params={"filter": doc}), 400, "BAD_REQUEST")
    assert found(world, clerk, "late", "secret")  # the clerk sees it, and may search it
    doc = json.dumps({"amount": {"search": "1"}})
    expect(clerk.get(world.rows("invoices"), params={"filter": doc}), 400, "BAD_REQUEST")
    doc = json.dumps({"notes": {"search": " "}})
    expect(clerk.get(world.rows("invoices"), params={"filter": doc}), 400, "BAD_REQUEST")


def test_a_search_index_gives_the_same_answers(
        notes: tuple[AppWorld, Caller, dict[str, str]]) -> None:
    world, clerk, _ = notes
    before = {q: found(world, clerk, q) for q in ("creme", "late -paid", '"late invoice"')}
    url = f"{world.base}/tables/invoices/indexes/notes_search"
    expect(world.admin.put(url, json={"columns": ["notes"], "kind": "search"}), 202)
    deadline = time.monotonic() + 60
    while expect(world.admin.get(url), 200)["state"] == "building":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert expect(world.admin.get(url), 200)["state"] == "ready"
    assert {q: found(world, clerk, q) for q in before} == before


def test_a_value_longer_than_search_reads_is_searched_in_its_first_100000_characters(
        notes: tuple[AppWorld, Caller, dict[str, str]]) -> None:
    # Round four, finding 2: such a value made every search of the org answer 422.
    world, clerk, _ = notes
    rng = random.Random(54000)
    words = " ".join("".join(rng.choices(string.ascii_lowercase, k=6)) for _ in range(110_000))
    row = expect(clerk.post(world.rows("invoices"), json={
        "notes": f"earlyword {words} lateword"}), 201)
    early = expect(clerk.get(world.rows("invoices"), params={"notes[search]": "earlyword"}), 200)
    assert [r["uid"] for r in early["items"]] == [row["uid"]]
    late = expect(clerk.get(world.rows("invoices"), params={"notes[search]": "lateword"}), 200)
    assert late["items"] == []  # past the first 100,000 characters: not searched
    assert expect(clerk.get(world.rows("invoices"), params={"notes[search]": "late"}), 200)
