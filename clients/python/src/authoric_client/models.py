"""What calls return: a page of rows, and the flat events of a stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

R = TypeVar("R")

Op = Literal["insert", "update", "delete", "resync", "connected"]
Status = Literal["connecting", "live", "reconnecting", "closed"]


@dataclass(frozen=True)
class Page(Generic[R]):
    items: list[R]
    next: str | None  # the cursor for `after=` of the next page; None on the last page
    total: int | None = None  # with `count=True`: every matching row, the page aside


@dataclass(frozen=True)
class Event(Generic[R]):
    """One frame of a stream, flat: `row` for insert and update, `row_uid` for delete,
    `reason` (and `last_id`) for resync, `tables` for the connected frame of a multi-table
    stream. `id` is the frame's position in the app's change log (None where it has none)."""

    op: Op
    table: str | None = None
    id: str | None = None
    row: R | None = None
    row_uid: str | None = None
    reason: str | None = None
    last_id: str | None = None
    tables: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, kind: str, data: dict[str, Any], frame_id: str | None) -> Event[Any] | None:
        """The event a frame stands for; None for a frame this library does not know."""
        if kind == "connected":
            return cls("connected", data.get("table"), frame_id, tables=list(data.get("tables") or []))
        if kind == "resync":
            last = data.get("lastId")
            return cls("resync", data.get("table"), frame_id, reason=data.get("reason"),
                       last_id=None if last is None else str(last))
        op = data.get("op")
        if op in ("insert", "update"):
            return cls(op, data.get("table"), frame_id, row=data.get("row"))
        if op == "delete":
            return cls("delete", data.get("table"), frame_id, row_uid=data.get("rowUid"))
        return None
