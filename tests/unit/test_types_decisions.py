"""What filters, CSV and the catalog decide per column type, asked of the type registry: a type
added there is filtered, exported, imported and indexed by what it says, with no list of type
names elsewhere to update. In process, no database."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import MetaData
from sqlalchemy.dialects import postgresql

from authoric.catalog.model import ColumnDef, TableDef
from authoric.catalog.schema import compile_table
from authoric.catalog.types import REGISTRY, column_type
from authoric.errors import ValidationFailed
from authoric.query.fields import table_fields
from authoric.query.filters import FilterError, FilterScope, compile_filter
from authoric.tables.indexes import SEARCHABLE_TYPES

TABLE = compile_table(uuid.UUID(int=9), TableDef.model_validate({"name": "notes", "columns": [
    {"name": "body", "type": "text"}, {"name": "count", "type": "integer"},
    {"name": "meta", "type": "json"}, {"name": "stage", "type": "select", "options": ["a", "b"]},
    {"name": "due", "type": "date"}]}), MetaData())


def compiled(doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    clause = compile_filter(doc, FilterScope(table_fields(TABLE)))
    done = clause.compile(dialect=postgresql.dialect())
    return str(done), dict(done.params)


@pytest.mark.parametrize(("column", "raw", "value"), [
    ("count", "5", 5),            # a query string's "5" is read as the integer it spells
    ("due", " 2026-01-31 ", dt.date(2026, 1, 31)),
    ("body", "5", "5"),           # text is the string itself
    ("meta", "5", "5"),           # a json column's string is a JSON string, not JSON text
    ("meta", 5, 5),
])
def test_a_filter_value_is_read_as_its_columns_type_says(column: str, raw: Any, value: Any) -> None:
    _, params = compiled({column: {"eq": raw}})
    assert list(params.values()) == [value]


@pytest.mark.parametrize("column", ["body", "stage"])
def test_a_client_may_like_and_search_the_text_types_and_an_index_may_hold_them(
        column: str) -> None:
    assert "LIKE" in compiled({column: {"like": "a%"}})[0]
    assert "@@" in compiled({column: {"search": "a"}})[0]
    assert column_type(TABLE.by_field[column].type).name in SEARCHABLE_TYPES


@pytest.mark.parametrize("column", ["count", "meta", "due"])
def test_a_client_is_refused_like_and_search_on_other_types(column: str) -> None:
    for op in ("like", "search"):
        with pytest.raises(FilterError):
            compiled({column: {op: "a"}})
    assert column_type(TABLE.by_field[column].type).name not in SEARCHABLE_TYPES


def test_a_json_column_takes_equality_filters_only_and_the_refusal_names_its_type() -> None:
    assert "=" in compiled({"meta": {"eq": {"a": 1}}})[0]
    with pytest.raises(FilterError, match="json columns only take eq"):
        compiled({"meta": {"gt": 1}})
    assert ">" in compiled({"count": {"gt": 1}})[0]


@pytest.mark.parametrize(("name", "rendered", "cell"), [
    ("boolean", True, "true"), ("boolean", False, "false"),
    ("json", {"a": [1, "x"]}, '{"a":[1,"x"]}'), ("json", True, "true"),
    ("numeric", "8760.00", "8760.00"), ("integer", 42, "42"), ("text", "=1+1", "=1+1"),
])
def test_a_csv_export_writes_each_rendered_value_as_its_type_says(
        name: str, rendered: Any, cell: str) -> None:
    assert column_type(name).csv_cell(rendered) == cell


def test_only_what_clients_write_freely_is_neutralised_in_a_csv_export() -> None:
    free = {name for name, kind in REGISTRY.items() if kind.free_text}
    assert free == {"text", "json"}


def test_a_csv_imports_json_cell_is_staged_as_written_so_its_numbers_stay_exact() -> None:
    json_type = column_type("json")
    raw = '{"big": 1e400}'
    assert json_type.copy_value(json_type.parse_text(raw), raw) == raw
    assert column_type("integer").copy_value(7, " 7 ") == 7


def test_a_columns_default_binds_as_raw_sql_casts_take_it() -> None:
    meta = ColumnDef.model_validate({"name": "m", "type": "json", "default": {"a": 1}})
    amount = ColumnDef.model_validate({"name": "n", "type": "numeric", "default": "1.50"})
    assert meta.bound_default() == '{"a": 1}'
    assert amount.bound_default() == Decimal("1.50")


def test_options_go_with_the_type_that_takes_them_and_nowhere_else() -> None:
    assert [n for n, kind in REGISTRY.items() if kind.takes_options] == ["select"]
    with pytest.raises(ValidationFailed, match="options"):
        ColumnDef.model_validate({"name": "s", "type": "text", "options": ["a"]}).checked()
    with pytest.raises(ValidationFailed, match="options"):
        ColumnDef.model_validate({"name": "s", "type": "select"}).checked()
