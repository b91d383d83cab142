"""The `search` filter operator: the expression a `search` index holds, over text columns only,
with a bounded, non-blank query, and never over a column redacted for the caller."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import MetaData
from sqlalchemy.dialects import postgresql

from authoric.catalog.model import TableDef
from authoric.catalog.schema import compile_table
from authoric.errors import ValidationFailed
from authoric.query.fields import table_fields
from authoric.query.filters import FilterError, FilterScope, compile_filter

TABLE = compile_table(uuid.UUID(int=7), TableDef.model_validate({"name": "items", "columns": [
    {"name": "notes", "type": "text"}, {"name": "stage", "type": "select",
                                        "options": ["a", "b"]},
    {"name": "amount", "type": "numeric"}]}), MetaData())


def sql(doc: dict[str, object], hidden: frozenset[str] = frozenset(), page: bool = False) -> str:
    clause = compile_filter(doc, FilterScope(table_fields(TABLE), hidden=hidden,
                                             search_by_index=frozenset({"notes"} if page else ())))
    return str(clause.compile(dialect=postgresql.dialect()))


def test_search_compiles_to_the_expression_a_search_index_holds() -> None:
    got = sql({"notes": {"search": 'late "crème brûlée" -paid'}})
    assert got.startswith("authoric.search_vector(")
    assert ".items.notes) @@ authoric.search_query(" in got


def test_search_applies_to_select_columns_too_and_combines_with_other_terms() -> None:
    got = sql({"and": [{"stage": {"search": "a"}}, {"not": {"notes": {"search": "x"}}}]})
    assert got.count("@@") == 2 and "NOT" in got


@pytest.mark.parametrize("doc", [
    {"amount": {"search": "1"}},
    {"notes": {"search": ""}},
    {"notes": {"search": "   "}},
    {"notes": {"search": 5}},
    {"notes": {"search": ["a"]}},
    {"notes": {"search": "x" * 1001}},
    {"notes": {"search": {"$principal": "email"}}},
])
def test_search_refuses_other_types_and_values_with_400(doc: dict[str, object]) -> None:
    with pytest.raises(FilterError) as caught:
        sql(doc)
    assert caught.value.status == 400


def test_a_column_redacted_for_the_caller_cannot_be_searched() -> None:
    with pytest.raises(FilterError, match="redacted"):
        sql({"notes": {"search": "late"}}, hidden=frozenset({"notes"}))


def test_a_list_page_takes_the_matches_of_several_words_from_the_index_expression_first() -> None:
    for words in ("late paid", "late -paid", '"late paid"'):
        got = sql({"notes": {"search": words}}, page=True)
        assert ".items.uid = ANY (array((SELECT searched.uid" in got
        assert "FROM app_" in got and "AS searched" in got
        assert "authoric.search_vector(searched.notes) @@ authoric.search_query(" in got


def test_one_word_a_negated_search_and_other_statements_keep_the_plain_expression() -> None:
    """One word is estimated well from the index's statistics; under `not` the rewrite would
    turn a null column's unknown into true; counts, reads and policies are not list pages;
    a column without a search index has no index to read matches from."""
    assert "ANY" not in sql({"notes": {"search": "late"}}, page=True)
    assert "ANY" not in sql({"not": {"notes": {"search": "late paid"}}}, page=True)
    assert "ANY" not in sql({"notes": {"search": "late paid"}})
    assert "ANY" not in sql({"stage": {"search": "a b"}}, page=True)


def test_a_like_pattern_with_a_nul_byte_is_refused_with_422_naming_its_column() -> None:
    with pytest.raises(ValidationFailed) as caught:
        sql({"notes": {"like": "late\x00%"}})
    assert caught.value.status == 422 and caught.value.details["column"] == "notes"
