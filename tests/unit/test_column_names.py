"""Column names (catalog.names): PostgreSQL's system column names are refused like the
contract's reserved words, for columns; other kinds of names may use them."""

from __future__ import annotations

import pytest

from authoric.catalog.names import SYSTEM_COLUMNS, check_name
from authoric.errors import ValidationFailed


@pytest.mark.parametrize("name", sorted(SYSTEM_COLUMNS))
def test_an_operator_cannot_name_a_column_as_a_system_column(name: str) -> None:
    with pytest.raises(ValidationFailed, match="reserved"):
        check_name(name, "column")


def test_a_table_may_still_be_called_as_a_system_column_is() -> None:
    assert check_name("xmin", "table") == "xmin"


def test_every_system_column_of_postgresql_is_refused() -> None:
    assert {"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"} <= SYSTEM_COLUMNS
