"""The contract's filter language: parsed at the edge into a small syntax tree, then compiled to a
SQLAlchemy boolean clause against one table.

Parsing checks the shape and the size of a filter without knowing the table: operators,
nesting (`MAX_DEPTH`), terms (`MAX_NODES`), list lengths (`MAX_LIST`) and the total number of
values (`MAX_VALUES`), so that no filter can come near PostgreSQL's 32,767 bound parameters.
Compiling resolves names against the table (unknown or redacted columns are refused) and parses
values by column type. Values are always bound parameters; column names only ever come from the
table's catalog. Semantics are SQL's: a comparison with NULL is unknown, and unknown rows are
not selected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import all_, and_, any_, cast, false, func, literal, not_, or_, select, true
from sqlalchemy.dialects.postgresql import ARRAY, array
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.types import BadValue, column_type
from authoric.errors import BadRequest, ValidationFailed
from authoric.query.fields import FieldRef

OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "nin", "like", "is_null", "search")
MAX_SEARCH_LENGTH = 1000  # characters of one `search` value
MAX_DEPTH = 12
MAX_NODES = 500
MAX_LIST = 500  # values in one `in` / `nin` list
MAX_VALUES = 2000  # values in a whole filter, lists included
PRINCIPAL_KEYS = ("uid", "email", "org")


class FilterError(BadRequest):
    """A filter that cannot be parsed or compiled; the message says where."""


# ------------------------------------------------------------------------------ the tree

@dataclass(frozen=True)
class PrincipalRef:
    """`{"$principal": "uid"}`: a value taken from the caller when the filter is compiled."""

    key: str


@dataclass(frozen=True)
class Compare:
    field: str
    op: str
    value: Any  # a JSON value, a list (in/nin), or a PrincipalRef


@dataclass(frozen=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    part: Node


Node = Compare | And | Or | Not
EVERYTHING: Node = And(())


# ------------------------------------------------------------------------------ parsing

@dataclass
class _Budget:
    nodes: int = 0
    values: int = 0

    def spend(self, nodes: int = 0, values: int = 0) -> None:
        self.nodes += nodes
        self.values += values
        if self.nodes > MAX_NODES:
            raise FilterError(f"filter has more than {MAX_NODES} terms", {"limit": MAX_NODES})
        if self.values > MAX_VALUES:
            raise FilterError(f"filter has more than {MAX_VALUES} values", {"limit": MAX_VALUES})


def parse_filter(doc: Any) -> Node:
    """The syntax tree of a filter document (`{}` selects everything); 400 when malformed."""
    return _parse_node(doc, _Budget(), 0)


def _parse_node(doc: Any, budget: _Budget, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise FilterError(f"filter nested deeper than {MAX_DEPTH} levels", {"limit": MAX_DEPTH})
    budget.spend(nodes=1)
    if not isinstance(doc, dict):
        raise FilterError("a filter is a JSON object")
    parts = [_parse_entry(key, value, budget, depth) for key, value in doc.items()]
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def _parse_entry(key: str, value: Any, budget: _Budget, depth: int) -> Node:
    if key in ("and", "or"):
        if not isinstance(value, list) or not value:
            raise FilterError(f"{key!r} takes a non-empty list of filters")
        parts = tuple(_parse_node(v, budget, depth + 1) for v in value)
        return And(parts) if key == "and" else Or(parts)
    if key == "not":
        return Not(_parse_node(value, budget, depth + 1))
    if isinstance(value, dict) and not _is_principal_ref(value):
        if not value:
            raise FilterError(f"no operator given for {key!r}")
        terms = [_parse_compare(key, op, v, budget) for op, v in value.items()]
        return terms[0] if len(terms) == 1 else And(tuple(terms))
    return _parse_compare(key, "eq", value, budget)


def _parse_compare(name: str, op: str, raw: Any, budget: _Budget) -> Compare:
    if op not in OPERATORS:
        raise FilterError(f"unknown operator {op!r}", {"operator": op, "allowed": list(OPERATORS)})
    if op in ("in", "nin"):
        items = raw.split(",") if isinstance(raw, str) else raw
        if not isinstance(items, list) or len(items) > MAX_LIST:
            raise FilterError(f"{op!r} takes a list of at most {MAX_LIST} values",
                              {"limit": MAX_LIST})
        budget.spend(values=max(1, len(items)))
        return Compare(name, op, [_value(v) for v in items])
    budget.spend(values=1)
    return Compare(name, op, _value(raw))


def _value(raw: Any) -> Any:
    if isinstance(raw, dict) and _is_principal_ref(raw):
        key = raw["$principal"]
        if key not in PRINCIPAL_KEYS:
            raise FilterError(f"$principal takes one of {', '.join(PRINCIPAL_KEYS)}")
        return PrincipalRef(key)
    return raw


def _is_principal_ref(value: dict[str, Any]) -> bool:
    return list(value) == ["$principal"]


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


# ------------------------------------------------------------------------------ compiling

@dataclass
class FilterScope:
    """What a filter may name: the table's fields, hidden fields, and the principal's values."""

    fields: Mapping[str, FieldRef]
    principal: Mapping[str, Any] = field(default_factory=dict)
    hidden: frozenset[str] = frozenset()  # owner column names the caller sees redacted
    # On a list page, the columns with a search index: a search of several words on one
    # takes its matches through that index (`_search`). Empty under `not`, where the rewrite
    # would not keep SQL's null semantics.
    search_by_index: frozenset[str] = frozenset()
    # The org those matches are read in (None: every org, the operator's): the subquery
    # carries it, and the search index, led by the org, reads only that org's entries.
    org: Any = None

    def field(self, name: str) -> FieldRef:
        ref = self.fields.get(name)
        if ref is None:
            raise FilterError(f"unknown column {name!r} in filter", {"column": name})
        if ref.owner_column is not None and ref.owner_column in self.hidden:
            raise FilterError(f"column {name!r} is redacted for you and cannot be filtered",
                              {"column": name})
        return ref


def compile_filter(node: Node | dict[str, Any], scope: FilterScope) -> ColumnElement[bool]:
    """The WHERE clause for a filter tree (or a filter document, parsed first)."""
    tree = parse_filter(node) if isinstance(node, dict) else node
    return _compile(tree, scope)


def _compile(node: Node, scope: FilterScope) -> ColumnElement[bool]:
    if isinstance(node, Compare):
        return _comparison(scope.field(node.field), node.op, node.value, scope)
    if isinstance(node, Not):
        return not_(_compile(node.part, replace(scope, search_by_index=frozenset())))
    parts = [_compile(p, scope) for p in node.parts]
    if not parts:
        return true()
    if len(parts) == 1:
        return parts[0]
    return and_(*parts) if isinstance(node, And) else or_(*parts)


def _comparison(ref: FieldRef, op: str, raw: Any, scope: FilterScope) -> ColumnElement[bool]:
    col = ref.column
    if op == "is_null":
        flag = _coerce(FieldRef(ref.name, col, "boolean", None), raw, scope)
        if flag is None:
            raise FilterError("is_null takes true or false")
        return col.is_(None) if flag else col.isnot(None)
    if op in ("in", "nin"):
        values = [_coerce(ref, v, scope) for v in raw]
        if any(v is None for v in values):
            raise FilterError(f"{op!r} lists cannot hold null")
        if not values:
            # `in` is the OR of its equalities, `nin` the AND of its inequalities.
            return false() if op == "in" else true()
        # One array parameter per list, whatever its length: `= ANY` is `IN`, `<> ALL` is
        # `NOT IN`, with the same three-valued logic.
        bound = literal(values, type_=ARRAY(col.type))
        return col == any_(bound) if op == "in" else col != all_(bound)
    if op == "search":
        return _search(ref, raw, ref.column.name in scope.search_by_index, scope.org)
    if op == "like":
        if not column_type(ref.type).textual or not isinstance(raw, str):
            raise FilterError("like applies to text columns and takes a string pattern")
        if "\x00" in raw:
            # PostgreSQL refuses it at run time (SQLSTATE 22021); refuse it as every other
            # value with a NUL is refused: before any statement, naming the column.
            raise ValidationFailed("NUL characters (\\u0000) are not allowed in a like pattern",
                                   {"column": ref.name, "reason": "nul_character"})
        if (len(raw) - len(raw.rstrip("\\"))) % 2:
            # PostgreSQL refuses it at run time (SQLSTATE 22025); refuse it as a bad filter.
            raise FilterError("a like pattern cannot end with its escape character `\\`")
        return col.like(literal(raw, type_=col.type))
    value = _coerce(ref, raw, scope)
    if value is None and isinstance(raw, PrincipalRef):
        # A `$principal` attribute this principal lacks matches nothing (fail closed), never
        # the rows where the column happens to be null.
        return false()
    if value is None:
        if op == "eq":
            return col.is_(None)
        if op == "ne":
            return col.isnot(None)
        raise FilterError(f"{op!r} cannot compare with null")
    if not column_type(ref.type).ordered and op not in ("eq", "ne"):
        raise FilterError(f"{ref.type} columns only take eq, ne, in, nin and is_null")
    # An explicit bind: SQLAlchemy would inline True/False (and refuse `<` with them).
    bound = literal(value, type_=col.type)
    return {
        "eq": col.__eq__, "ne": col.__ne__, "lt": col.__lt__, "lte": col.__le__,
        "gt": col.__gt__, "gte": col.__ge__,
    }[op](bound)


def _search(ref: FieldRef, raw: Any, by_index: bool = False,
            org: Any = None) -> ColumnElement[bool]:
    """Full-text search as a person types it (`websearch_to_tsquery`: all words, `-` excludes,
    `"..."` a phrase), case- and accent-insensitive, language-neutral. The expression is the
    one a `search` index holds (tables/indexes.py, migration 0006), so such an index serves it.

    `by_index` (a list page, and the column has a search index) with several words: the
    matching uids are read first, once, by that expression alone
    (`uid = ANY(ARRAY(SELECT uid ... WHERE document @@ query))`), which PostgreSQL answers
    from the search index, within `org`: the index leads with the org, so it intersects the
    words' entries with the org's and other orgs' matches are never fetched, returned or
    collected into the array (round four: their number was a timing oracle). Written
    plainly, PostgreSQL multiplies the words' frequencies as if they were independent,
    expects many matches, and walks the org's rows in page order
    computing each row's document (about 10 to 20 µs a row) for matches that may never come:
    seconds at 100,000 rows. One word it estimates well from the index's statistics, and
    reading all matches first would only cost more for a common word (or, without an index,
    for any search)."""
    if not column_type(ref.type).textual or not isinstance(raw, str):
        raise FilterError("search applies to text columns and takes a string",
                          {"column": ref.name})
    if not raw.strip() or len(raw) > MAX_SEARCH_LENGTH or "\x00" in raw:
        raise FilterError(f"search takes 1 to {MAX_SEARCH_LENGTH} characters of words",
                          {"column": ref.name})
    query = func.authoric.search_query(literal(raw, type_=ref.column.type))
    if not (by_index and _several_terms(raw)):
        return _matches(ref.column, query)
    searched = ref.column.table.alias("searched")  # an alias: never correlated to the page
    where = [_matches(searched.c[ref.column.name], query)]
    if org is not None:
        bound = cast(literal(org, type_=searched.c.org_uid.type), searched.c.org_uid.type)
        where += [searched.c.org_uid == bound,
                  # the index's leading expression, so the index answers the org too
                  array([searched.c.org_uid]).contains(array([bound]))]
    uids = select(searched.c.uid).where(and_(*where))
    column = ref.column.table.c.uid
    return column == any_(func.array(uids.scalar_subquery(), type_=ARRAY(column.type)))


def _matches(column: Any, query: Any) -> ColumnElement[bool]:
    """`search_vector(column) @@ query`: exactly the expression a search index holds."""
    return func.authoric.search_vector(column).op("@@", is_comparison=True)(query)


def _several_terms(raw: str) -> bool:
    """Whether a search names more than one term: several words, an exclusion, a phrase."""
    return len(raw.split()) > 1 or "-" in raw or '"' in raw


def _coerce(ref: FieldRef, raw: Any, scope: FilterScope) -> Any:
    if isinstance(raw, PrincipalRef):
        raw = scope.principal.get(raw.key)
        if raw is None:
            return None
        raw = str(raw)
    try:
        return None if raw is None else column_type(ref.type).parse_filter(raw)
    except BadValue as exc:
        raise FilterError(f"bad value for {ref.name!r}: {exc}", {"column": ref.name}) from exc
