"""The filter parser: documents become a small syntax tree (And / Or / Not / Compare), and
malformed or oversized filters are refused before any table or database is involved."""

from __future__ import annotations

from typing import Any

import pytest

from authoric.query.filters import (
    EVERYTHING,
    MAX_DEPTH,
    MAX_LIST,
    MAX_NODES,
    MAX_VALUES,
    And,
    Compare,
    FilterError,
    Not,
    Or,
    PrincipalRef,
    parse_filter,
    query_string_filter,
)


def test_an_empty_filter_selects_everything() -> None:
    assert parse_filter({}) == EVERYTHING


def test_a_bare_value_is_an_equality_and_several_keys_are_anded() -> None:
    assert parse_filter({"status": "paid"}) == Compare("status", "eq", "paid")
    assert parse_filter({"a": 1, "b": {"gt": 2, "lt": 5}}) == And((
        Compare("a", "eq", 1), And((Compare("b", "gt", 2), Compare("b", "lt", 5)))))


def test_and_or_not_nest_as_written() -> None:
    tree = parse_filter({"or": [{"a": 1}, {"not": {"b": {"is_null": True}}}]})
    assert tree == Or((Compare("a", "eq", 1), Not(Compare("b", "is_null", True))))


def test_in_lists_from_a_query_string_are_split_on_commas() -> None:
    assert parse_filter({"n": {"in": "1,2,3"}}) == Compare("n", "in", ["1", "2", "3"])


def test_a_principal_reference_is_a_value_not_an_operator() -> None:
    assert parse_filter({"owner": {"$principal": "uid"}}) == Compare(
        "owner", "eq", PrincipalRef("uid"))
    assert parse_filter({"owner": {"ne": {"$principal": "org"}}}) == Compare(
        "owner", "ne", PrincipalRef("org"))


def test_query_string_pairs_become_a_filter_document() -> None:
    assert query_string_filter([("a", "1"), ("b[gte]", "2")]) == {
        "and": [{"a": "1"}, {"b": {"gte": "2"}}]}


@pytest.mark.parametrize("doc", [
    [], "x", {"a": {"regex": "."}}, {"and": []}, {"or": {}}, {"a": {}},
    {"a": {"in": 5}}, {"not": []}, {"a": {"eq": {"$principal": "password"}}},
])
def test_malformed_filters_are_refused(doc: Any) -> None:
    with pytest.raises(FilterError):
        parse_filter(doc)


def test_nesting_is_capped() -> None:
    node: dict[str, Any] = {"a": 1}
    for _ in range(MAX_DEPTH):
        node = {"not": node}
    parse_filter(node)
    with pytest.raises(FilterError):
        parse_filter({"not": node})


def test_terms_are_capped() -> None:
    with pytest.raises(FilterError):
        parse_filter({"or": [{"a": i} for i in range(MAX_NODES + 1)]})


def test_one_list_is_capped() -> None:
    parse_filter({"a": {"in": list(range(MAX_LIST))}})
    with pytest.raises(FilterError) as refused:
        parse_filter({"a": {"in": list(range(MAX_LIST + 1))}})
    assert refused.value.details["limit"] == MAX_LIST


def test_the_values_of_a_whole_filter_are_capped_below_postgresqls_parameter_limit() -> None:
    lists = MAX_VALUES // MAX_LIST + 1
    with pytest.raises(FilterError) as refused:
        parse_filter({"or": [{"a": {"nin": list(range(MAX_LIST))}} for _ in range(lists)]})
    assert refused.value.details["limit"] == MAX_VALUES
    assert MAX_VALUES + MAX_NODES < 32_767
