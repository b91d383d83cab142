"""The typed edge: bodies and queries that do not fit their types are refused with the contract's
400 or 422 before anything is written, never with a 500.

Callers: a member with every permission on a table with a json column, sending wrong types,
unknown fields, values nested past the depth limit, filters past the list and size limits,
and URLs past the length limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess

MAX_JSON_DEPTH, MAX_LIST, MAX_VALUES, MAX_URL_BYTES = 32, 500, 2000, 8192


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def docs(world: AppWorld) -> tuple[AppWorld, Caller]:
    world.table("docs", [{"name": "title", "type": "text", "required": True},
                         {"name": "n", "type": "integer"},
                         {"name": "body", "type": "json"}])
    org = world.org("North")
    world.role("writer", ["docs:*"])
    return world, world.caller(org, ["writer"])


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def count_rows(world: AppWorld, caller: Caller) -> int:
    return len(expect(caller.get(world.rows("docs"), params={"limit": "1000"}), 200)["items"])


def error(response: Any, status: int, code: str) -> dict[str, Any]:
    body: dict[str, Any] = expect(response, status, code)
    assert set(body) == {"error"} and "Traceback" not in response.text
    return body["error"]


@pytest.mark.parametrize("body", [
    {"title": 5}, {"title": "t", "n": "five"}, {"title": "t", "n": 1.5}, {"title": "t", "n": True},
    {"title": "t", "nope": 1}, {"title": None}, {}, {"title": "t", "n": 2**63},
])
def test_a_member_sending_a_row_of_the_wrong_shape_gets_422_and_nothing_is_written(
        docs: tuple[AppWorld, Caller], body: dict[str, Any]) -> None:
    world, writer = docs
    error(writer.post(world.rows("docs"), json=body), 422, "VALIDATION_FAILED")
    assert count_rows(world, writer) == 0


@pytest.mark.parametrize("body", ["[1, 2]", '"row"', "7", "null"])
def test_a_member_sending_a_body_that_is_not_an_object_gets_422(
        docs: tuple[AppWorld, Caller], body: str) -> None:
    world, writer = docs
    response = writer.post(world.rows("docs"), content=body,
                           headers={"Content-Type": "application/json"})
    error(response, 422, "VALIDATION_FAILED")
    assert count_rows(world, writer) == 0


def test_a_json_value_nested_300_deep_is_refused_with_the_limit_and_nothing_is_written(
        docs: tuple[AppWorld, Caller]) -> None:
    world, writer = docs
    response = writer.post(world.rows("docs"), json={"title": "deep", "body": nested(300)})
    refused = error(response, 422, "VALIDATION_FAILED")
    assert refused["details"]["limit"] == MAX_JSON_DEPTH
    assert count_rows(world, writer) == 0


def test_a_json_value_at_the_depth_limit_is_stored_and_read_back(
        docs: tuple[AppWorld, Caller]) -> None:
    world, writer = docs
    value = nested(MAX_JSON_DEPTH - 1)  # inside the row object: the whole body is at the limit
    row = expect(writer.post(world.rows("docs"), json={"title": "ok", "body": value}), 201)
    assert row["body"] == value
    assert expect(writer.get(f"{world.rows('docs')}/{row['uid']}"), 200)["body"] == value


def test_an_update_nesting_too_deep_is_refused_and_changes_nothing(
        docs: tuple[AppWorld, Caller]) -> None:
    world, writer = docs
    row = expect(writer.post(world.rows("docs"), json={"title": "t", "body": [1]}), 201)
    url = f"{world.rows('docs')}/{row['uid']}"
    error(writer.patch(url, json={"body": nested(100)}), 422, "VALIDATION_FAILED")
    error(writer.patch(world.rows("docs"), params={"title": "t"},
                       json={"set": {"body": nested(100)}}), 422, "VALIDATION_FAILED")
    assert expect(writer.get(url), 200)["body"] == [1]


def test_an_in_list_over_the_limit_is_a_bad_request(docs: tuple[AppWorld, Caller]) -> None:
    world, writer = docs
    expect(writer.get(world.rows("docs"), params={
        "filter": json.dumps({"n": {"in": list(range(MAX_LIST))}})}), 200)
    refused = error(writer.get(world.rows("docs"), params={
        "filter": json.dumps({"n": {"in": list(range(MAX_LIST + 1))}})}), 400, "BAD_REQUEST")
    assert refused["details"]["limit"] == MAX_LIST


def test_a_filter_with_more_values_than_the_limit_is_a_bad_request_even_in_short_lists(
        docs: tuple[AppWorld, Caller]) -> None:
    world, writer = docs
    many = {"or": [{"n": {"nin": list(range(i * 100, i * 100 + 100))}} for i in range(25)]}
    refused = error(writer.get(world.rows("docs"), params={"filter": json.dumps(many)}),
                    400, "BAD_REQUEST")
    # Through a URL the length limit may speak first; either way no statement is sent.
    assert refused["details"]["limit"] in (MAX_VALUES, MAX_URL_BYTES)


def test_a_bulk_delete_with_an_oversized_in_list_deletes_nothing(
        docs: tuple[AppWorld, Caller]) -> None:
    world, writer = docs
    expect(writer.post(world.rows("docs"), json={"title": "keep", "n": 1}), 201)
    error(writer.delete(world.rows("docs"), params={"n[in]": ",".join(map(str, range(600)))}),
          400, "BAD_REQUEST")
    assert count_rows(world, writer) == 1


def test_a_url_over_the_limit_gets_the_contracts_400(docs: tuple[AppWorld, Caller]) -> None:
    world, writer = docs
    response = writer.get(world.rows("docs"), params={"title": "x" * MAX_URL_BYTES})
    refused = error(response, 400, "BAD_REQUEST")
    assert refused["details"]["limit"] == MAX_URL_BYTES
    assert refused["details"]["reason"] == "url_too_long"


def test_a_filter_naming_a_principal_attribute_that_does_not_exist_is_a_bad_request(
        docs: tuple[AppWorld, Caller]) -> None:
    world, writer = docs
    error(writer.get(world.rows("docs"), params={
        "filter": json.dumps({"title": {"$principal": "password"}})}), 400, "BAD_REQUEST")
