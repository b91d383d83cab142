"""Which `expand` paths a webhook's tables follow (plan/expand.py `unreached_paths`): the
check an operator's create or PATCH of a webhook goes through, on table definitions alone."""

from __future__ import annotations

from authoric.catalog.model import TableDef
from authoric.plan.expand import unreached_paths
from authoric.plan.request import parse_expand

DEFINITIONS = {d.name: d for d in (
    TableDef.model_validate({"name": "countries", "columns": [{"name": "code", "type": "text"}]}),
    TableDef.model_validate({"name": "vendors", "columns": [
        {"name": "name", "type": "text"},
        {"name": "country", "type": "reference", "references": "countries"}]}),
    TableDef.model_validate({"name": "bills", "columns": [
        {"name": "number", "type": "text"},
        {"name": "vendor", "type": "reference", "references": "vendors"}]}),
)}


def unreached(tables: list[str], expand: str) -> list[str]:
    return unreached_paths(DEFINITIONS, tables, parse_expand(expand))


def test_a_chain_of_reference_columns_from_the_table_is_reached() -> None:
    assert unreached(["bills"], "vendor,vendor.country") == []


def test_a_typo_a_plain_column_or_a_step_past_a_plain_column_is_not() -> None:
    assert unreached(["bills"], "vendr,number,vendor.name") == ["vendr", "number", "vendor.name"]


def test_over_several_tables_a_path_needs_only_one_of_them() -> None:
    assert unreached(["bills", "vendors"], "vendor,country") == []
    assert unreached(["bills"], "vendor,country") == ["country"]


def test_a_table_the_definitions_lack_reaches_nothing() -> None:
    assert unreached(["gone"], "vendor") == ["vendor"]
