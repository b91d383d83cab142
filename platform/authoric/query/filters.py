"""The contract's filter language compiled to a SQLAlchemy boolean clause.

Values are always bound parameters; column names only ever come from the table's catalog.
Semantics are SQL's: a comparison with NULL is unknown, and unknown rows are not selected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, false, literal, not_, or_, true
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.types import BadValue, parse_json, parse_text
from authoric.errors import BadRequest
from authoric.query.fields import FieldRef

OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "nin", "like", "is_null")
MAX_DEPTH = 12
MAX_NODES = 500
MAX_LIST = 1000
PRINCIPAL_KEYS = ("uid", "email", "org")


class FilterError(BadRequest):
    """A filter that cannot be compiled; the message says where."""


@dataclass
class FilterScope:
    """What a filter may name: the table's fields, hidden fields, and the principal's values."""

    fields: Mapping[str, FieldRef]
    principal: Mapping[str, Any] = field(default_factory=dict)
    hidden: frozenset[str] = frozenset()  # owner column names the caller sees redacted
    nodes: int = 0

    def field(self, name: str) -> FieldRef:
        ref = self.fields.get(name)
        if ref is None:
            raise FilterError(f"unknown column {name!r} in filter", {"column": name})
        if ref.owner_column is not None and ref.owner_column in self.hidden:
            raise FilterError(f"column {name!r} is redacted for you and cannot be filtered",
                              {"column": name})
        return ref


def compile_filter(node: Any, scope: FilterScope) -> ColumnElement[bool]:
    """The WHERE clause for a filter document (`{}` selects everything)."""
    return _node(node, scope, 0)


def _node(node: Any, scope: FilterScope, depth: int) -> ColumnElement[bool]:
    if depth > MAX_DEPTH:
        raise FilterError(f"filter nested deeper than {MAX_DEPTH} levels")
    scope.nodes += 1
    if scope.nodes > MAX_NODES:
        raise FilterError(f"filter has more than {MAX_NODES} terms")
    if not isinstance(node, dict):
        raise FilterError("a filter is a JSON object")
    clauses = [_entry(key, value, scope, depth) for key, value in node.items()]
    if not clauses:
        return true()
    return clauses[0] if len(clauses) == 1 else and_(*clauses)


def _entry(key: str, value: Any, scope: FilterScope, depth: int) -> ColumnElement[bool]:
    if key in ("and", "or"):
        if not isinstance(value, list) or not value:
            raise FilterError(f"{key!r} takes a non-empty list of filters")
        parts = [_node(v, scope, depth + 1) for v in value]
        return and_(*parts) if key == "and" else or_(*parts)
    if key == "not":
        return not_(_node(value, scope, depth + 1))
    ref = scope.field(key)
    if isinstance(value, dict) and not _is_principal_ref(value):
        if not value:
            raise FilterError(f"no operator given for {key!r}")
        return and_(*[_comparison(ref, op, v, scope) for op, v in value.items()])
    return _comparison(ref, "eq", value, scope)


def _comparison(ref: FieldRef, op: str, raw: Any, scope: FilterScope) -> ColumnElement[bool]:
    col = ref.column
    if op not in OPERATORS:
        raise FilterError(f"unknown operator {op!r}", {"operator": op, "allowed": list(OPERATORS)})
    if op == "is_null":
        flag = _coerce(FieldRef(ref.name, col, "boolean", None), raw, scope)
        if flag is None:
            raise FilterError("is_null takes true or false")
        return col.is_(None) if flag else col.isnot(None)
    if op in ("in", "nin"):
        items = raw.split(",") if isinstance(raw, str) else raw
        if not isinstance(items, list) or len(items) > MAX_LIST:
            raise FilterError(f"{op!r} takes a list of at most {MAX_LIST} values")
        values = [_coerce(ref, v, scope) for v in items]
        if any(v is None for v in values):
            raise FilterError(f"{op!r} lists cannot hold null")
        if not values:
            # `in` is the OR of its equalities, `nin` the AND of its inequalities.
            return false() if op == "in" else true()
        return col.in_(values) if op == "in" else col.notin_(values)
    if op == "like":
        if ref.type != "text" or not isinstance(raw, str):
            raise FilterError("like applies to text columns and takes a string pattern")
        if (len(raw) - len(raw.rstrip("\\"))) % 2:
            # PostgreSQL refuses it at run time (SQLSTATE 22025); refuse it as a bad filter.
            raise FilterError("a like pattern cannot end with its escape character `\\`")
        return col.like(raw)
    value = _coerce(ref, raw, scope)
    if value is None and isinstance(raw, dict):
        # A `$principal` attribute this principal lacks matches nothing (fail closed), never
        # the rows where the column happens to be null.
        return false()
    if value is None:
        if op == "eq":
            return col.is_(None)
        if op == "ne":
            return col.isnot(None)
        raise FilterError(f"{op!r} cannot compare with null")
    if ref.type == "json" and op not in ("eq", "ne"):
        raise FilterError("json columns only take eq, ne, in, nin and is_null")
    # An explicit bind: SQLAlchemy would inline True/False (and refuse `<` with them).
    bound = literal(value, type_=col.type)
    return {
        "eq": col.__eq__, "ne": col.__ne__, "lt": col.__lt__, "lte": col.__le__,
        "gt": col.__gt__, "gte": col.__ge__,
    }[op](bound)


def _is_principal_ref(value: dict[str, Any]) -> bool:
    return list(value) == ["$principal"]


def _coerce(ref: FieldRef, raw: Any, scope: FilterScope) -> Any:
    if isinstance(raw, dict) and _is_principal_ref(raw):
        key = raw["$principal"]
        if key not in PRINCIPAL_KEYS:
            raise FilterError(f"$principal takes one of {', '.join(PRINCIPAL_KEYS)}")
        raw = scope.principal.get(key)
        if raw is None:
            return None
        raw = str(raw)
    try:
        if isinstance(raw, str) and ref.type not in ("text", "json"):
            return parse_text(ref.type, raw)
        return parse_json(ref.type, raw)
    except BadValue as exc:
        raise FilterError(f"bad value for {ref.name!r}: {exc}", {"column": ref.name}) from exc


def query_string_filter(params: list[tuple[str, str]]) -> dict[str, Any]:
    """The filter document for `?col=v`, `?col[op]=v` pairs (reserved names already removed)."""
    terms: list[dict[str, Any]] = []
    for key, value in params:
        if key.endswith("]") and "[" in key:
            name, op = key[:-1].split("[", 1)
            terms.append({name: {op: value}})
        else:
            terms.append({key: value})
    return {"and": terms} if len(terms) > 1 else (terms[0] if terms else {})
