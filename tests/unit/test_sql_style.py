"""The platform's hand-written SQL keeps to its style (authoric/db/sql.py): no f-string in a
`text()` anywhere under platform/, and identifiers quoted by the one function."""

from __future__ import annotations

import ast
from pathlib import Path

from authoric.db.sql import Sql, joined, literal, quoted, statement

PLATFORM = Path(__file__).resolve().parents[2] / "platform"


def _is_text_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = node.func.id if isinstance(node.func, ast.Name) else (
        node.func.attr if isinstance(node.func, ast.Attribute) else "")
    return name == "text"


def f_strings_in_text(source: str) -> list[int]:
    """The lines of `text(...)` calls whose arguments hold an f-string, at any depth."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if _is_text_call(node)
            for arg in node.args  # type: ignore[attr-defined]
            if any(isinstance(part, ast.JoinedStr) for part in ast.walk(arg))]


def test_the_walk_finds_an_f_string_inside_text_however_it_is_written() -> None:
    assert f_strings_in_text('conn.execute(text(f"DROP TABLE {t}"))') == [1]
    assert f_strings_in_text('sa.text(\n  "SELECT " + f"{x}")') == [1]
    assert f_strings_in_text('text("SELECT 1")') == []
    assert f_strings_in_text('statement("DROP TABLE {t}", t=name)') == []


def test_no_module_of_the_platform_puts_an_f_string_in_text() -> None:
    found = [f"{path.relative_to(PLATFORM)}:{line}" for path in sorted(PLATFORM.rglob("*.py"))
             for line in f_strings_in_text(path.read_text())]
    assert found == []


def built_text_calls(source: str) -> list[int]:
    """The lines of `text(x)` calls whose `x` is neither a literal nor a constant's name
    (UPPER_CASE): SQL text built somewhere else and handed over, which the f-string walk
    cannot see into."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if _is_text_call(node)
            and node.args  # type: ignore[attr-defined]
            and not isinstance(node.args[0], ast.Constant)  # type: ignore[attr-defined]
            and not (isinstance(node.args[0], ast.Name)  # type: ignore[attr-defined]
                     and node.args[0].id.isupper())]  # type: ignore[attr-defined]


# db/sql.py is the template filler itself; the SDK's `sql()` runs the caller's own SQL.
BUILDERS = {"authoric/db/sql.py", "authoric/sdk.py"}


def test_every_text_the_platform_runs_is_a_constant_or_a_filled_template() -> None:
    assert built_text_calls("text(VERSION)\ntext('SELECT 1')") == []
    assert built_text_calls("q = f'SELECT {x}'\ntext(q)") == [2]
    found = [f"{path.relative_to(PLATFORM)}:{line}" for path in sorted(PLATFORM.rglob("*.py"))
             if str(path.relative_to(PLATFORM)) not in BUILDERS
             for line in built_text_calls(path.read_text())]
    assert found == []


def test_a_string_in_ddl_is_one_literal_whatever_it_holds() -> None:
    assert literal("it's") == "'it''s'"
    assert isinstance(literal("x"), Sql)


def test_a_name_with_a_quote_in_it_stays_one_identifier() -> None:
    assert quoted("app_1", 'we"ird') == '"app_1"."we""ird"'
    assert isinstance(quoted("x"), Sql)


def test_a_statement_quotes_every_plain_hole_and_keeps_made_fragments() -> None:
    made = statement("ALTER TABLE {table} DROP CONSTRAINT {name}{rest}",
                     table=("s", "t"), name='c"', rest=Sql(" CASCADE"))
    assert made.text == 'ALTER TABLE "s"."t" DROP CONSTRAINT "c"""' + " CASCADE"
    assert joined(["a", quoted("b")]) == '"a", "b"'
