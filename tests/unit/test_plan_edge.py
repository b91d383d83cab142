"""The edge's types, in process: a table's row model (typed column values from a body) and the
JSON nesting limit. No server, no database."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import MetaData

from authoric.auth.tokens import ACCESS, Claims, VerifiedTokens, encode
from authoric.catalog.model import TableDef
from authoric.catalog.schema import CompiledTable, compile_table
from authoric.catalog.types.builtin import MAX_JSON_DEPTH, json_depth_exceeds
from authoric.errors import TokenExpired, Unauthenticated, ValidationFailed
from authoric.http.edge import json_value
from authoric.records.values import bulk_set_values, column_values


def table() -> CompiledTable:
    definition = TableDef.model_validate({"name": "docs", "columns": [
        {"name": "title", "type": "text", "required": True},
        {"name": "n", "type": "integer", "default": 3},
        {"name": "amount", "type": "numeric"},
        {"name": "due", "type": "timestamp"},
        {"name": "vendor", "type": "reference", "references": "vendors"}]})
    return compile_table(uuid.uuid4(), definition, MetaData())


def test_a_row_body_becomes_typed_column_values_with_defaults() -> None:
    vendor = uuid.uuid4()
    values = column_values(table(), {"title": "t", "amount": "1.50", "vendor_uid": str(vendor),
                                     "due": "2026-01-31T12:00:00Z"}, creating=True)
    assert values == {"title": "t", "amount": Decimal("1.50"), "vendor": vendor, "n": 3,
                      "due": dt.datetime(2026, 1, 31, 12, tzinfo=dt.UTC)}


@pytest.mark.parametrize("body", [
    {"title": 1}, {"title": "t", "n": "3"}, {"title": "t", "nope": 1}, {"n": 1}, [], "row",
    {"title": "t", "uid": str(uuid.uuid4())}, {"title": "t", "org_uid": str(uuid.uuid4())},
])
def test_a_body_that_does_not_fit_the_row_model_is_a_validation_failure(body: Any) -> None:
    with pytest.raises(ValidationFailed):
        column_values(table(), body, creating=True)


def test_a_partial_update_keeps_absent_columns_out_and_refuses_nulling_a_required_one() -> None:
    assert column_values(table(), {"n": 4}, creating=False) == {"n": 4}
    with pytest.raises(ValidationFailed):
        column_values(table(), {"title": None}, creating=False)


def test_a_bulk_update_body_is_set_and_nothing_else() -> None:
    assert bulk_set_values(table(), {"set": {"n": 1}}) == {"n": 1}
    for body in ({"n": 1}, {"set": {"n": 1}, "x": 1}, []):
        with pytest.raises(ValidationFailed):
            bulk_set_values(table(), body)


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"a": [value]} if depth % 2 else [value]
    return value


def test_json_depth_counts_arrays_and_objects_inside_one_another() -> None:
    assert not json_depth_exceeds(1, 0) and json_depth_exceeds({}, 0)
    assert not json_depth_exceeds({"a": [1, {"b": []}]}, 4)
    assert json_depth_exceeds({"a": [1, {"b": []}]}, 3)
    assert not json_depth_exceeds([[0]] * 3, 2) and json_depth_exceeds([[0]] * 3, 1)


def test_a_body_nested_past_the_limit_is_a_422_naming_the_limit() -> None:
    deep = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(ValidationFailed) as refused:
        json_value("application/json", deep)
    assert refused.value.details["limit"] == MAX_JSON_DEPTH
    at_limit = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert json_value("application/json", at_limit) is not None


def test_a_verified_token_is_reused_until_its_exp_and_then_refused_as_expired() -> None:
    secret = "s" * 40
    now = float(int(time.time()))  # exp travels in whole seconds
    claims = Claims(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), now + 60, ACCESS)
    token = encode(secret, claims)
    cache = VerifiedTokens(secret)
    assert cache.access(token, now) == claims
    assert cache.access(token, now + 30) == claims
    with pytest.raises(TokenExpired):
        cache.access(token, now + 61)
    with pytest.raises(Unauthenticated):
        VerifiedTokens("t" * 40).access(token, now)


def test_the_verified_token_cache_is_bounded() -> None:
    secret = "s" * 40
    cache = VerifiedTokens(secret, size=3)
    for _ in range(10):
        claims = Claims(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4(),
                        time.time() + 60, ACCESS)
        cache.access(encode(secret, claims))
    assert len(cache._claims) == 3
