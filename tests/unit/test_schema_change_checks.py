"""The pieces of a schema change that decide without a database: which conversions exist,
how a row policy follows a rename, and what an alteration leaves of a column. Which values a
conversion refuses is PostgreSQL's to say: tests/api/test_schema_changes.py."""

from __future__ import annotations

import pytest

from authoric.catalog.model import ColumnAlter, ColumnDef, TableDef
from authoric.errors import Conflict, ValidationFailed
from authoric.tables.schema_change import (
    CONVERSIONS,
    _image_value,
    altered,
    check_renames,
    renamed_filter,
)


def col(name: str, type_: str, **kw: object) -> ColumnDef:
    return ColumnDef.model_validate({"name": name, "type": type_, **kw})


TABLE = TableDef.model_validate({"name": "invoices", "columns": [
    {"name": "number", "type": "text"}, {"name": "amount", "type": "numeric"},
    {"name": "vendor", "type": "reference", "references": "vendors"},
    {"name": "status", "type": "select", "options": ["draft", "paid"]}]})


def test_text_converts_to_and_from_every_scalar_type_and_numbers_and_dates_to_each_other() -> None:
    for other in ("integer", "numeric", "boolean", "date", "timestamp", "uuid", "select"):
        assert ("text", other) in CONVERSIONS and (other, "text") in CONVERSIONS
    assert {("integer", "numeric"), ("numeric", "integer"), ("date", "timestamp"),
            ("timestamp", "date")} <= CONVERSIONS
    for refused in (("integer", "boolean"), ("json", "text"), ("text", "json"),
                    ("reference", "uuid"), ("uuid", "reference"), ("boolean", "date")):
        assert refused not in CONVERSIONS


def test_a_row_policy_follows_a_rename_in_every_branch_and_only_in_column_position() -> None:
    policy = {"and": [{"number": {"eq": "number"}}, {"or": [{"vendor_uid": {"is_null": True}},
                                                            {"not": {"vendor": "x"}}]},
                      {"amount": {"gt": "1"}}]}
    assert renamed_filter(policy, {"number": "ref", "vendor": "supplier"},
                          frozenset({"vendor"})) == {
        "and": [{"ref": {"eq": "number"}}, {"or": [{"supplier_uid": {"is_null": True}},
                                                   {"not": {"supplier": "x"}}]},
                {"amount": {"gt": "1"}}]}


def test_a_rename_needs_an_existing_column_and_a_free_valid_name() -> None:
    check_renames(TABLE, {"number": "amount", "amount": "number"})  # a swap is fine
    with pytest.raises(ValidationFailed):
        check_renames(TABLE, {"nope": "x"})
    with pytest.raises(ValidationFailed):
        check_renames(TABLE, {"number": "Bad"})
    with pytest.raises(Conflict):
        check_renames(TABLE, {"number": "vendor_uid"})
    with pytest.raises(Conflict):
        check_renames(TABLE, {"vendor": "number"})


def test_an_alteration_keeps_what_it_does_not_name_and_drops_options_off_select() -> None:
    got = altered(TABLE, ColumnAlter(name="status", type="text"), set())
    assert (got.type, got.options) == ("text", None)
    got = altered(TABLE, ColumnAlter(name="number", required=True), set())
    assert (got.type, got.required, got.unique) == ("text", True, False)
    with pytest.raises(ValidationFailed):
        altered(TABLE, ColumnAlter(name="number", type="integer"), {"number"})  # searched
    with pytest.raises(ValidationFailed):
        altered(TABLE, ColumnAlter(name="number", type="select"), set())  # no options


def test_an_old_image_is_converted_like_its_rows_or_becomes_null() -> None:
    assert _image_value("12", col("c", "text"), col("c", "integer")) == 12
    assert _image_value("yes", col("c", "text"), col("c", "boolean")) is True
    assert _image_value("nope", col("c", "text"), col("c", "boolean")) is None
    assert _image_value("2026-01-31", col("c", "date"), col("c", "timestamp")) == (
        "2026-01-31T00:00:00Z")
    assert _image_value("12.5", col("c", "numeric"), col("c", "integer")) is None
