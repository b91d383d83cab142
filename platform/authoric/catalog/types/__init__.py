"""The column-type registry: every column type, by name, and what the rest of the platform asks of it.

`column_type(name)` returns the type object (see `base.ColumnType`); it is the interface new
code should use. The module-level functions below (`parse_json`, `parse_text`, `render`,
`sql_type`) are thin delegates kept so callers written before the registry keep working.

Parsing is strict: a value of the wrong JSON type is refused rather than coerced, except
where the source is text (query strings, CSV), which `parse_text` handles.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.types import TypeEngine

from authoric.catalog.types.base import BadValue, ColumnType
from authoric.catalog.types.builtin import (
    BUILTIN,
    FALSE_WORDS,
    INT64,
    MAX_JSON_DEPTH,
    TRUE_WORDS,
    in_utc_years,
    rfc3339,
)

REGISTRY: dict[str, ColumnType] = {t.name: t for t in BUILTIN}
COLUMN_TYPES: tuple[str, ...] = tuple(REGISTRY)
# Types whose values are text (text, select): searchable, and what every type converts to.
TEXTUAL_TYPES: frozenset[str] = frozenset(name for name, kind in REGISTRY.items() if kind.textual)

__all__ = [
    "COLUMN_TYPES", "FALSE_WORDS", "INT64", "MAX_JSON_DEPTH", "REGISTRY", "TEXTUAL_TYPES", "TRUE_WORDS",
    "BadValue",
    "ColumnType", "column_type", "in_utc_years", "parse_json", "parse_text", "render", "rfc3339",
    "sql_type",
]


def column_type(name: str) -> ColumnType:
    """The registered type called `name` (KeyError for a name the catalog never accepts)."""
    return REGISTRY[name]


def sql_type(name: str) -> TypeEngine[Any]:
    return REGISTRY[name].sql_type()


def parse_json(name: str, value: Any) -> Any:
    """The Python value for a JSON body value (None stays None)."""
    if value is None:
        return None
    return REGISTRY[name].parse_json(value)


def parse_text(name: str, raw: str) -> Any:
    """The Python value for a textual value (query string, CSV cell)."""
    return REGISTRY[name].parse_text(raw)


def render(name: str, value: Any) -> Any:
    """The JSON value of a stored value, as rows show it."""
    if value is None:
        return None
    return REGISTRY[name].render(value)
