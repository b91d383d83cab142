"""The column-type registry, in process: every type parses what the contract says it takes,
refuses the rest with a message, renders what rows show, and documents it in JSON Schema."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Decimal
from typing import Any

import hypothesis
import jsonschema_rs
import pytest
from hypothesis import strategies as st
from sqlalchemy import MetaData

from authoric.catalog import types
from authoric.catalog.model import TableDef, check_columns
from authoric.catalog.schema import compile_table
from authoric.catalog.types import (
    COLUMN_TYPES,
    MAX_JSON_DEPTH,
    REGISTRY,
    BadValue,
    ColumnType,
    column_type,
    parse_json,
    parse_text,
    render,
    rfc3339,
)
from authoric.openapi.document import row_schema
from authoric.records.csv_fast import cell_cast

CONTRACT_TYPES = ("text", "integer", "numeric", "boolean", "timestamp", "date", "uuid", "json",
                  "reference", "select")

# A JSON value each type accepts, the Python value it parses to, and the JSON a row shows.
GOOD: dict[str, list[tuple[Any, Any, Any]]] = {
    "text": [("hello", "hello", "hello"), ("", "", ""), ("ünï ☃", "ünï ☃", "ünï ☃")],
    "integer": [(0, 0, 0), (-(2**63), -(2**63), -(2**63)), (2**63 - 1, 2**63 - 1, 2**63 - 1),
                (2.0, 2, 2)],
    "numeric": [("8760.00", Decimal("8760.00"), "8760.00"), (12, Decimal(12), "12"),
                ("-0.5", Decimal("-0.5"), "-0.5"), (" 1e3 ", Decimal("1e3"), "1E+3")],
    "boolean": [(True, True, True), (False, False, False)],
    "timestamp": [("2026-01-31T12:00:00Z", dt.datetime(2026, 1, 31, 12, tzinfo=dt.UTC),
                   "2026-01-31T12:00:00Z"),
                  ("2026-01-31T14:00:00+02:00", dt.datetime(2026, 1, 31, 12, tzinfo=dt.UTC),
                   "2026-01-31T12:00:00Z")],
    "date": [("2026-01-31", dt.date(2026, 1, 31), "2026-01-31")],
    "uuid": [("0199a0c2-0000-7000-8000-000000000001",
              uuid.UUID("0199a0c2-0000-7000-8000-000000000001"),
              "0199a0c2-0000-7000-8000-000000000001")],
    "json": [({"a": [1, "x", None]}, {"a": [1, "x", None]}, {"a": [1, "x", None]}),
             ([], [], []), ("s", "s", "s"), (3.5, 3.5, 3.5)],
    "reference": [("0199a0c2-0000-7000-8000-000000000002",
                   uuid.UUID("0199a0c2-0000-7000-8000-000000000002"),
                   "0199a0c2-0000-7000-8000-000000000002")],
    # The type alone is text; a column's options narrow it (ColumnDef.parse_json).
    "select": [("paid", "paid", "paid")],
}

# JSON values each type refuses.
BAD: dict[str, list[Any]] = {
    "text": [5, True, ["a"], {"a": 1}, "nul\x00byte"],
    "integer": ["5", True, 1.5, 2**63, -(2**63) - 1, [1], {}],
    "numeric": [True, "ten", "NaN", "Infinity", "-inf", [1], {}, "1e200000"],
    "boolean": ["true", 1, 0, "yes", [True]],
    "timestamp": ["2026-01-31T12:00:00", "yesterday", "2026-13-01T00:00:00Z", 1700000000,
                  "9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+01:00"],
    "date": ["31/01/2026", "2026-02-30", 20260131, "2026-01-31T00:00:00Z"],
    "uuid": ["not-a-uuid", 5, "0199a0c2-0000-7000-8000"],
    "json": [],  # any JSON value is JSON; only depth is refused (below)
    "reference": ["not-a-uuid", 5],
    "select": [5, True, "nul\x00byte"],
}

# Text (query string, CSV cell) each type accepts → the parsed value; and text it refuses.
TEXT_GOOD: dict[str, list[tuple[str, Any]]] = {
    "text": [(" padded ", " padded ")],
    "integer": [(" 42 ", 42), ("-7", -7)],
    "numeric": [("8760.00", Decimal("8760.00"))],
    "boolean": [("true", True), ("YES", True), ("1", True), ("f", False), (" No ", False)],
    "timestamp": [("2026-01-31T12:00:00Z", dt.datetime(2026, 1, 31, 12, tzinfo=dt.UTC))],
    "date": [("2026-01-31", dt.date(2026, 1, 31))],
    "uuid": [("0199a0c2-0000-7000-8000-000000000001",
              uuid.UUID("0199a0c2-0000-7000-8000-000000000001"))],
    "json": [('{"a": [1]}', {"a": [1]}), ("3", 3), ('"s"', "s")],
    "reference": [("0199a0c2-0000-7000-8000-000000000001",
                   uuid.UUID("0199a0c2-0000-7000-8000-000000000001"))],
    "select": [("paid", "paid")],
}
TEXT_BAD: dict[str, list[str]] = {
    "text": ["nul\x00"],
    "integer": ["4.5", "ten", "", "9223372036854775808"],
    "numeric": ["nan", "ten", ""],
    "boolean": ["on", "maybe", ""],
    "timestamp": ["2026-01-31 12:00:00", "now"],
    "date": ["2026/01/31", "today"],
    "uuid": ["zzz"],
    "json": ["{not json", "", "[" * 100_000 + "]" * 100_000],
    "reference": ["zzz"],
    "select": ["nul\x00"],
}


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_the_registry_holds_exactly_the_contracts_column_types() -> None:
    assert set(COLUMN_TYPES) == set(CONTRACT_TYPES)
    assert all(column_type(name).name == name for name in CONTRACT_TYPES)


def test_only_the_reference_type_points_at_another_table() -> None:
    assert [name for name, kind in REGISTRY.items() if kind.is_reference] == ["reference"]


@pytest.mark.parametrize("name", CONTRACT_TYPES)
def test_each_good_json_value_parses_and_renders_as_rows_show_it(name: str) -> None:
    for given, parsed, shown in GOOD[name]:
        assert parse_json(name, given) == parsed, given
        assert render(name, parse_json(name, given)) == shown, given
        # What a row shows is accepted back as it is (a client may send a row it read).
        assert parse_json(name, shown) == parse_json(name, given)


@pytest.mark.parametrize("name", CONTRACT_TYPES)
def test_each_bad_json_value_is_refused_with_a_message(name: str) -> None:
    for given in BAD[name]:
        with pytest.raises(BadValue) as caught:
            parse_json(name, given)
        assert str(caught.value), given


@pytest.mark.parametrize("name", CONTRACT_TYPES)
def test_null_is_null_for_every_type(name: str) -> None:
    assert parse_json(name, None) is None
    assert render(name, None) is None


@pytest.mark.parametrize("name", CONTRACT_TYPES)
def test_text_values_parse_as_query_strings_and_csv_cells_carry_them(name: str) -> None:
    for raw, parsed in TEXT_GOOD[name]:
        assert parse_text(name, raw) == parsed, raw
    for raw in TEXT_BAD[name]:
        with pytest.raises(BadValue):
            parse_text(name, raw)


def test_a_json_value_nested_to_the_cap_is_accepted_and_one_level_deeper_is_refused() -> None:
    assert parse_json("json", _nested(MAX_JSON_DEPTH)) == _nested(MAX_JSON_DEPTH)
    for too_deep in (_nested(MAX_JSON_DEPTH + 1), {"a": _nested(MAX_JSON_DEPTH)}, _nested(300)):
        with pytest.raises(BadValue, match="nested deeper"):
            parse_json("json", too_deep)
    with pytest.raises(BadValue):
        parse_text("json", "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))


# Values of the wrong JSON type, which the documented schema refuses as the server does.
WRONG_JSON_TYPE: dict[str, list[Any]] = {
    "text": [5, True, ["a"], {"a": 1}],
    "integer": ["5", True, 1.5, [1]],
    "numeric": [True, [1], {}],
    "boolean": ["true", 1, [True]],
    "timestamp": [1700000000, "yesterday", True],
    "date": [20260131, "31/01/2026"],
    "uuid": [5, "not-a-uuid"],
    "json": [],
    "reference": [5, "not-a-uuid"],
    "select": [5, True],
}


@pytest.mark.parametrize("name", CONTRACT_TYPES)
def test_the_json_schema_accepts_what_rows_show_and_refuses_values_of_the_wrong_type(
        name: str) -> None:
    validator = jsonschema_rs.Draft202012Validator(column_type(name).json_schema(),
                                                   validate_formats=True)
    for _, _, shown in GOOD[name]:
        assert validator.is_valid(shown), shown
    for given in WRONG_JSON_TYPE[name]:
        assert not validator.is_valid(given), given
        with pytest.raises(BadValue):
            parse_json(name, given)


@pytest.mark.parametrize("name", CONTRACT_TYPES)
def test_each_type_names_a_postgresql_type_and_a_sqlalchemy_type(name: str) -> None:
    kind = column_type(name)
    assert kind.pg_name and kind.sql_type() is not None
    assert types.sql_type(name).__class__ is kind.sql_type().__class__
    assert kind.csv_cast('s."c"').startswith(('s."c"', "CASE"))


def test_bound_values_for_raw_sql_casts_are_json_text_for_json_and_the_value_otherwise() -> None:
    assert column_type("json").bind_value({"a": 1}) == '{"a": 1}'
    assert column_type("integer").bind_value(5) == 5


# Adding a type touches one place ----------------------------------------------------------------

class Cents(ColumnType):
    """A stand-in new type: cents stored as bigint, shown as a decimal string."""

    name, pg_name = "cents", "bigint"

    def sql_type(self) -> Any:
        return column_type("integer").sql_type()

    def parse_json(self, value: Any) -> int:
        if not isinstance(value, str) or not re.fullmatch(r"-?\d+\.\d{2}", value):
            raise BadValue("expected an amount such as \"12.50\"")
        return int(value.replace(".", ""))

    def render(self, value: Any) -> str:
        return f"{value // 100}.{value % 100:02d}"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": r"^-?\d+\.\d{2}$"}

    def csv_cast(self, ref: str) -> str:
        return f"replace({ref}, '.', '')::bigint"


def test_a_type_added_to_the_registry_is_taken_by_tables_rows_documents_and_csv(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, "cents", Cents())
    definition = TableDef.model_validate(
        {"name": "payments", "columns": [{"name": "amount", "type": "cents", "default": "0.00"}]})
    check_columns(definition.columns, set())
    compiled = compile_table(uuid.UUID(int=1), definition, MetaData())
    assert parse_json("cents", "12.50") == 1250
    assert compiled.row_json({"uid": uuid.UUID(int=2), "amount": 1250,
                              "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                              "updated_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)})["amount"] == "12.50"
    assert row_schema(compiled)["properties"]["amount"]["anyOf"][0] == Cents().json_schema()
    assert cell_cast(definition.columns[0]) == "replace(s.\"amount\", '.', '')::bigint"
    with pytest.raises(BadValue):
        parse_text("cents", "12.5")


@hypothesis.given(st.datetimes(timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=-7)),
                                                dt.timezone(dt.timedelta(hours=5, minutes=30))]),
                    min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)))
def test_a_timestamp_renders_as_rfc3339_in_utc_with_z_exactly_as_isoformat_would(
        t: dt.datetime) -> None:
    assert rfc3339(t) == t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def test_a_row_rendered_once_and_redacted_after_is_the_row_rendered_redacted() -> None:
    """The feed renders a row once for classes that redact differently (realtime/judge.py):
    what each class then reads must be exactly `row_json` with its redaction, order included."""
    definition = TableDef.model_validate({"name": "invoices", "columns": [
        {"name": "number", "type": "text"}, {"name": "amount", "type": "numeric"},
        {"name": "secret", "type": "text"}, {"name": "due", "type": "timestamp"}]})
    check_columns(definition.columns, set())
    compiled = compile_table(uuid.UUID(int=1), definition, MetaData())
    row = {"uid": uuid.UUID(int=2), "number": "INV-1", "amount": None, "secret": "s3",
           "due": dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC),
           "created_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
           "updated_at": dt.datetime(2026, 1, 2, tzinfo=dt.UTC)}
    whole = compiled.row_json(row)
    for redacted in (frozenset(), frozenset({"secret"}), frozenset({"secret", "amount", "due"})):
        derived = compiled.redact(whole, redacted)
        assert list(derived.items()) == list(compiled.row_json(row, redacted).items())
    assert whole["secret"] == "s3", "the unredacted rendering is left as it was"
