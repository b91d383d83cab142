"""`TableRequest`: one call on one table, as every caller states it (REST, the server-side SDK,
the console's rows, CSV and the CLI), parsed once into types before anything runs.

A request names the table, the operation, and what the operation needs: the row uid, the
filter tree, the page (order, limit, cursor), the body (row values as JSON), and the media
the caller sends or wants. Each part is parsed when the request is built, but a part that does
not parse is kept as `Checked` (its error), not raised: the contract answers the request's
shape (400/415/422, or 404 for a uid that is no uid) only after authentication, the table, the
operation switch and the permission. `records.pipeline.execute` raises it at that step.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from authoric.errors import AuthoricError, BadRequest, NotFound
from authoric.plan.listing import parse_limit
from authoric.plan.plan import Page
from authoric.query.filters import EVERYTHING, Node, parse_filter

T = TypeVar("T")

Operation = Literal["read", "list", "export", "create", "update", "delete",
                    "update_where", "delete_where", "import"]

# The gate's action for each operation (policy.decision names permissions by these).
GATE_ACTION: dict[str, str] = {
    "read": "read", "list": "read_list", "export": "read_list", "create": "create",
    "update": "update", "delete": "delete", "update_where": "update",
    "delete_where": "delete", "import": "create",
}
WRITES = frozenset({"create", "update", "delete", "update_where", "delete_where", "import"})


@dataclass(frozen=True)
class Checked(Generic[T]):
    """A part of a request, parsed: its value, or the error its parse raised, kept until the
    pipeline reaches the step where the contract answers it."""

    value: T
    error: AuthoricError | None = None

    def get(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value

    @staticmethod
    def of(parse: Callable[[], T], fallback: T) -> Checked[T]:
        try:
            return Checked(parse())
        except AuthoricError as exc:
            return Checked(fallback, exc)


def ok(value: T) -> Checked[T]:
    return Checked(value)


def parse_uid(raw: str | uuid.UUID) -> uuid.UUID:
    """A row uid; anything else is a row that does not exist."""
    if isinstance(raw, uuid.UUID):
        return raw
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise NotFound("no such row") from exc


def checked_uid(raw: str | uuid.UUID) -> Checked[uuid.UUID]:
    return Checked.of(lambda: parse_uid(raw), uuid.UUID(int=0))


def checked_filter(document: Any) -> Checked[Node]:
    """A filter document (the query string's terms, `?filter=`, or a caller's dict)."""
    if document is None or document == {}:
        return ok(EVERYTHING)
    return Checked.of(lambda: parse_filter(document), EVERYTHING)


COUNTS = ("exact", "estimate")
MAX_EXPAND_PATHS, MAX_EXPAND_DEPTH = 10, 2
ExpandPaths = tuple[tuple[str, ...], ...]


def parse_count(raw: str | None) -> str | None:
    """`?count=exact` (or `estimate`); None when absent; 400 for anything else."""
    if raw is None:
        return None
    if raw not in COUNTS:
        raise BadRequest("count takes exact or estimate", {"count": raw})
    return raw


def parse_expand(raw: str | None) -> ExpandPaths:
    """`?expand=vendor,vendor.country`: reference names, dotted up to two levels. The names
    are checked against the tables by the plan (plan/expand.py); here only the shape."""
    if raw is None:
        return ()
    paths: list[tuple[str, ...]] = []
    for item in raw.split(","):
        path = tuple(item.strip().split("."))
        if not all(path) or len(path) > MAX_EXPAND_DEPTH:
            raise BadRequest(f"expand takes reference names, dotted up to {MAX_EXPAND_DEPTH} "
                             "levels", {"expand": raw})
        if path not in paths:
            paths.append(path)
    if len(paths) > MAX_EXPAND_PATHS:
        raise BadRequest(f"expand names at most {MAX_EXPAND_PATHS} paths", {"expand": raw})
    return tuple(paths)


def checked_page(order: str | None, limit: str | int | None, after: str | None) -> Checked[Page]:
    raw = None if limit is None else str(limit)
    return Checked.of(lambda: Page(order, parse_limit(raw), after), Page())


# The parts a request leaves out. `Checked` is frozen and these values immutable, so every
# request shares them instead of building six per request.
_ALL_ROWS: Checked[Node] = ok(EVERYTHING)
_FIRST_PAGE: Checked[Page] = ok(Page())
_NONE: Checked[Any] = ok(None)
_NO_PATHS: Checked[ExpandPaths] = ok(())


@dataclass(frozen=True)
class TableRequest:
    """One call on one table, typed; see the module's docstring."""

    app: str
    table: str
    operation: Operation
    uid: Checked[uuid.UUID] | None = None
    filter: Checked[Node] = _ALL_ROWS
    page: Checked[Page] = _FIRST_PAGE
    body: Checked[Any] = _NONE  # the JSON the caller sent
    media: Checked[None] = _NONE  # 415 for a wrong type
    count: Checked[str | None] = _NONE  # `?count=`
    expand: Checked[ExpandPaths] = _NO_PATHS  # `?expand=`

    @property
    def action(self) -> str:
        """The gate's action: what permission the request needs."""
        return GATE_ACTION[self.operation]

    @property
    def writes(self) -> bool:
        return self.operation in WRITES

    def row_uid(self) -> uuid.UUID:
        if self.uid is None:
            raise NotFound("no such row")
        return self.uid.get()


def call(app: str, table: str, operation: Operation, uid: str | uuid.UUID | None = None, *,
         filter: Any = None, order: str | None = None, limit: str | int | None = None,
         after: str | None = None, body: Any = None, count: str | None = None,
         expand: str | None = None) -> TableRequest:
    """The `TableRequest` of a call made from Python values (the server-side SDK, the console's
    rows): each part parsed by the edge's own parsers, so it is refused with the same codes."""
    return TableRequest(
        app, table, operation, None if uid is None else checked_uid(uid),
        filter=checked_filter(filter), page=checked_page(order, limit, after), body=ok(body),
        count=Checked.of(lambda: parse_count(count), None),
        expand=Checked.of(lambda: parse_expand(expand), ()))
