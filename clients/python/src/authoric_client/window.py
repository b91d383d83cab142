"""The rows of a list query and how one event changes them, decided without the server where
that is certain, and `None` ("refetch") where it is not. Pure: no I/O.

With the columns' kinds (kinds.py, from the app's OpenAPI document), followed event by event:
- `{"col": v}`, `eq`, `ne`, `in`, `nin`, `is_null` on every kind but json; `lt`, `lte`, `gt`,
  `gte` on integer, numeric, boolean, date, timestamp and uuid columns, compared as those
  values (`"9.99" < "10.5"`, `10.0 == 10.00`); `and` / `or` / `not` of those;
- orders by `uid` or a column of those kinds.
Text ranges and text orders (the database's collation decides them), `like`, `search`, json
values and `$principal` refetch.

A column whose kind is not known (the document could not be read) is judged by its values:
integers and booleans compare, strings only when they are the very same string, and orders
by `createdAt`, `updatedAt` or integer and boolean values are followed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from authoric_client.kinds import ORDERED, Kind, Kinds, key

Maybe = bool | None  # True, False, or None: "cannot tell here"
SERVER_TIMES = ("createdAt", "updatedAt")
ORDERED_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b,
    "gt": lambda a, b: a > b, "gte": lambda a, b: a >= b,
}


def _looks_typed(text: str) -> bool:
    """A string the server may spell otherwise than the caller: number, date, time, uid."""
    for parse in (Decimal, datetime.fromisoformat, date.fromisoformat, uuid.UUID):
        try:
            parse(text)
            return True
        except (ValueError, InvalidOperation, TypeError):
            continue
    return False


REDACTED = "[redacted]"


def _equal(value: Any, wanted: Any, kind: Kind | None) -> Maybe:
    if value is None or wanted is None:
        return value is None and wanted is None
    if kind in ORDERED:
        a, b = key(kind, value), key(kind, wanted)
        return None if a is None or b is None else bool(a == b)
    if kind == "text":
        plain = isinstance(value, str) and isinstance(wanted, str) and value != REDACTED
        return value == wanted if plain else None
    if kind == "json":
        return None
    if isinstance(value, bool) or isinstance(wanted, bool):
        return value == wanted if isinstance(value, bool) and isinstance(wanted, bool) else None
    if isinstance(value, int) and isinstance(wanted, int):
        return value == wanted
    if isinstance(value, str) and isinstance(wanted, str):
        if value == wanted:
            return True
        return None if _looks_typed(value) or _looks_typed(wanted) else False
    return None


def _any(results: Sequence[Maybe]) -> Maybe:
    if any(r is True for r in results):
        return True
    return None if any(r is None for r in results) else False


def _all(results: Sequence[Maybe]) -> Maybe:
    if any(r is False for r in results):
        return False
    return None if any(r is None for r in results) else True


def _not(result: Maybe) -> Maybe:
    return None if result is None else not result


def _test(value: Any, op: str, arg: Any, kind: Kind | None) -> Maybe:
    if isinstance(arg, Mapping):  # {"$principal": ...}: the server's to resolve
        return None
    if op == "eq":
        return _equal(value, arg, kind)
    if op == "ne":
        return None if value is None else _not(_equal(value, arg, kind))
    if op in ("in", "nin") and isinstance(arg, list):
        found = _any([_equal(value, item, kind) for item in arg])
        return found if op == "in" else (None if value is None else _not(found))
    if op == "is_null" and isinstance(arg, bool):
        return (value is None) == arg
    if op not in ORDERED_OPS:
        return None
    if kind in ORDERED:
        if value is None:
            return False  # SQL: a comparison with NULL is not true
        a, b = key(kind, value), key(kind, arg)
        return None if a is None or b is None else ORDERED_OPS[op](a, b)
    if kind is None and _plain_number(value) and _plain_number(arg) and \
            isinstance(value, bool) == isinstance(arg, bool):
        return ORDERED_OPS[op](value, arg)
    return None


def _plain_number(value: Any) -> bool:
    return isinstance(value, int)  # bool is an int too; the caller keeps the two apart


def matches(row: Mapping[str, Any], filter: Any, kinds: Kinds | None = None) -> Maybe:
    """Whether `row` matches `filter` (section 4's JSON form); None when only the server can
    tell. `kinds`: the columns' kinds, where known."""
    if not isinstance(filter, Mapping):
        return None
    kinds = kinds or {}
    results: list[Maybe] = []
    for name, arg in filter.items():
        if name in ("and", "or") and isinstance(arg, list):
            parts = [matches(row, part, kinds) for part in arg]
            results.append(_all(parts) if name == "and" else _any(parts))
        elif name == "not":
            results.append(_not(matches(row, arg, kinds)))
        elif name not in row:
            results.append(None)
        elif isinstance(arg, Mapping) and kinds.get(name) != "json":
            kind = kinds.get(name)
            results.append(_all([_test(row[name], op, value, kind) for op, value in arg.items()]))
        else:
            results.append(_equal(row[name], arg, kinds.get(name)))
    return _all(results)


class Order:
    """A list's order (`order=`): one field, NULLs last either way, ties by uid."""

    def __init__(self, spec: str | None, kinds: Kinds | None = None) -> None:
        spec = spec or "uid"
        self.descending = spec.startswith("-")
        self.field = spec[1:] if self.descending else spec
        self.kinds: Kinds = kinds or {}

    def _value(self, row: Mapping[str, Any]) -> tuple[bool, Any] | None:
        """(is null, comparable value), or None when this order cannot be known here."""
        value = row.get(self.field)
        if self.field == "uid":
            return False, str(value)
        if value is None:
            return True, None
        kind = self.kinds.get(self.field)
        if kind in ORDERED:
            found = key(kind, value)
            return None if found is None else (False, found)
        if kind is not None:
            return None  # text (the collation's order) or json
        if self.field in SERVER_TIMES and isinstance(value, str):
            try:
                return False, datetime.fromisoformat(value)
            except ValueError:
                return None
        if isinstance(value, bool | int):
            return False, (isinstance(value, bool), value)
        return None

    def before(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
        """Whether row `a` lists before row `b`; None when it cannot be known here."""
        ka, kb = self._value(a), self._value(b)
        if ka is None or kb is None:
            return None
        (null_a, va), (null_b, vb) = ka, kb
        if null_a != null_b:
            return null_b  # NULLs last, ascending or descending
        if not null_a and va != vb:
            if isinstance(va, tuple) and va[0] != vb[0]:
                return None  # booleans against integers: not one column's values
            return bool(va > vb) if self.descending else bool(va < vb)
        ua, ub = str(a.get("uid")), str(b.get("uid"))
        return ua > ub if self.descending else ua < ub


class Window:
    """The rows a list query shows; `limit` None: every matching row."""

    def __init__(self, filter: Mapping[str, Any] | None, order: str | None, limit: int | None,
                 kinds: Kinds | None = None) -> None:
        self.filter = filter
        self.order = Order(order, kinds)
        self.limit = limit
        self.rows: list[Any] = []
        self.complete = True  # no row beyond the window (always so without a limit)

    @property
    def kinds(self) -> Kinds:
        return self.order.kinds

    @kinds.setter
    def kinds(self, kinds: Kinds) -> None:
        """The columns' kinds (read again after a schema change)."""
        self.order.kinds = kinds

    def load(self, rows: list[Any], complete: bool) -> None:
        self.rows = list(rows)
        self.complete = complete or self.limit is None

    def upsert(self, row: Mapping[str, Any]) -> bool:
        """Apply an insert or update; False: the window must be refetched to be right."""
        verdict = matches(row, self.filter, self.kinds) if self.filter else True
        if verdict is None:
            return False
        uid = row.get("uid")
        others = [r for r in self.rows if r.get("uid") != uid]
        was_in = len(others) != len(self.rows)
        if not verdict:
            self.rows = others
            return self.complete or not was_in  # a full window left one short: refill
        position = 0
        for other in others:
            earlier = self.order.before(other, row)
            if earlier is None:
                return False
            if not earlier:
                break
            position += 1
        if not self.complete and position == len(others):
            self.rows = others  # it lists after every known row: beyond the window
            return not was_in
        self.rows = [*others[:position], row, *others[position:]]
        if self.limit is not None and len(self.rows) > self.limit:
            self.rows = self.rows[:self.limit]
            self.complete = False
        return True

    def remove(self, uid: str | None) -> bool:
        """Apply a delete; False: the window must be refetched to be right."""
        rest = [r for r in self.rows if r.get("uid") != uid]
        was_in = len(rest) != len(self.rows)
        self.rows = rest
        return self.complete or not was_in
