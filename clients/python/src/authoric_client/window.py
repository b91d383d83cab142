"""The rows of a list query and how one event changes them, decided without the server where
that is certain, and `None` ("refetch") where it is not. Pure: no I/O.

Followed event by event:
- filters made of equality tests (`{"col": v}`, `eq`, `ne`, `in`, `nin`, `is_null`), `lt`,
  `lte`, `gt`, `gte` between integers or booleans, and `and` / `or` / `not` of those. Strings
  compare exactly when they are plain text; a string that reads as a number, a date, a time or
  a uid (where the server's canonical form may differ from the filter's: `10.0` vs `10.00`) is
  decided only when it is the very same string, otherwise the window is refetched;
- orders by `uid`, `createdAt`, `updatedAt`, or a column holding integers or booleans
  (PostgreSQL's order for those is known; text order follows the database's collation, so
  an order by a text column refetches on every change).
Everything else (`like`, `search`, ranges over text or decimals, orders by text) refetches.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

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


def _equal(value: Any, wanted: Any) -> Maybe:
    if value is None or wanted is None:
        return value is None and wanted is None
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


def _test(value: Any, op: str, arg: Any) -> Maybe:
    if op == "eq":
        return _equal(value, arg)
    if op == "ne":
        return None if value is None else _not(_equal(value, arg))
    if op in ("in", "nin") and isinstance(arg, list):
        found = _any([_equal(value, item) for item in arg])
        return found if op == "in" else (None if value is None else _not(found))
    if op == "is_null" and isinstance(arg, bool):
        return (value is None) == arg
    if op in ORDERED_OPS and _plain_number(value) and _plain_number(arg) and \
            isinstance(value, bool) == isinstance(arg, bool):
        return ORDERED_OPS[op](value, arg)
    return None


def _plain_number(value: Any) -> bool:
    return isinstance(value, int)  # bool is an int too; the caller keeps the two apart


def matches(row: Mapping[str, Any], filter: Any) -> Maybe:
    """Whether `row` matches `filter` (section 4's JSON form); None when only the server can tell."""
    if not isinstance(filter, Mapping):
        return None
    results: list[Maybe] = []
    for key, arg in filter.items():
        if key in ("and", "or") and isinstance(arg, list):
            parts = [matches(row, part) for part in arg]
            results.append(_all(parts) if key == "and" else _any(parts))
        elif key == "not":
            results.append(_not(matches(row, arg)))
        elif key not in row:
            results.append(None)
        elif isinstance(arg, Mapping):
            results.append(_all([_test(row[key], op, value) for op, value in arg.items()]))
        else:
            results.append(_equal(row[key], arg))
    return _all(results)


class Order:
    """A list's order (`order=`): one field, NULLs last either way, ties by uid."""

    def __init__(self, spec: str | None) -> None:
        spec = spec or "uid"
        self.descending = spec.startswith("-")
        self.field = spec[1:] if self.descending else spec

    def _value(self, row: Mapping[str, Any]) -> tuple[bool, Any] | None:
        """(is null, comparable value), or None when this order cannot be known here."""
        value = row.get(self.field)
        if self.field == "uid":
            return False, str(value)
        if value is None:
            return True, None
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

    def __init__(self, filter: Mapping[str, Any] | None, order: str | None, limit: int | None) -> None:
        self.filter = filter
        self.order = Order(order)
        self.limit = limit
        self.rows: list[Any] = []
        self.complete = True  # no row beyond the window (always so without a limit)

    def load(self, rows: list[Any], complete: bool) -> None:
        self.rows = list(rows)
        self.complete = complete or self.limit is None

    def upsert(self, row: Mapping[str, Any]) -> bool:
        """Apply an insert or update; False: the window must be refetched to be right."""
        verdict = matches(row, self.filter) if self.filter else True
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
