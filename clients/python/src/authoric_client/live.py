"""Live queries: the rows of a list query, kept equal to what a fresh list would return.

The stream is opened first and its events are applied in order after each (re)load of the
list. Every event's row is re-read by the server when it is delivered, and any change to a
row committed later sends a later event, so applying every event after the load (even one
received before it) ends at the server's state: nothing is missed, nothing is kept stale.

- The list is loaded when the stream connects without a position (the first time, or after a
  drop that came before any event had an id) and on every `resync`; a reconnection that
  resumes with `Last-Event-ID` needs no reload.
- Inserts and updates are placed by the query's order, deletes removed by `rowUid`, rows that
  stop matching the filter leave, as far as window.py can decide that here (with the columns'
  kinds from the app's OpenAPI document, read before the first load and again after a
  `schema_change` resync, so numbers, decimals, dates and timestamps compare as values); otherwise, and
  when a window with a `limit` loses a row, the list is loaded again (once for a burst of
  events: it waits until no event is pending).
- Without a `limit` the rows are every matching row (loaded page by page).
- With `expand`, an event whose row comes without `expand` (the server's streams do not
  expand rows yet) is not applied: the list is loaded again, so the rows stay what a list with
  `expand` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import httpx

from authoric_client.errors import AuthoricError
from authoric_client.models import Event
from authoric_client.window import Window

if TYPE_CHECKING:
    from authoric_client.aclient import AsyncTable

R = TypeVar("R")
PAGE = 1000  # rows per request when loading every matching row


class AsyncLiveQuery(Generic[R]):
    def __init__(self, table: AsyncTable[R, Any, Any, Any, Any], *, filter: Mapping[str, Any] | None,
                 order: str | None, limit: int | None, expand: Sequence[str] | None,
                 on_change: Callable[[list[R]], None] | None) -> None:
        self._table = table
        self._window = Window(filter, order, limit)
        self._kinds_read = False  # the columns' kinds are read before the first load
        self._expand = list(expand) if expand else None
        self._on_change = on_change
        self._subscription = table.subscribe(expand=expand)
        self._task: asyncio.Task[None] | None = None
        self._loaded = asyncio.Event()
        self.rows: list[R] = []  # a new list after every change: safe to read from any thread
        self.loads = 0  # how many times the list was (re)loaded
        self.error: BaseException | None = None  # what stopped it, if anything did

    @property
    def status(self) -> str:
        return self._subscription.status

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def ready(self) -> list[R]:
        """The rows once the first load is done (raises what stopped it, if anything did)."""
        self.start()
        await self._loaded.wait()
        if self.error is not None:
            raise self.error
        return self.rows

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._subscription.close()

    async def __aenter__(self) -> AsyncLiveQuery[R]:
        await self.ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self) -> None:
        stale = 0  # events applied since the rows stopped being known right
        try:
            async for event in self._subscription:
                if self._reload_now(event):
                    await self._load(fresh_kinds=event.reason == "schema_change")
                    stale = 0
                    continue
                if not self._apply(event) or stale:
                    stale += 1
                # A burst is followed by one load, after its last event (or every 100 events).
                if stale and (self._subscription.pending() == 0 or stale >= 100):
                    await self._load()
                    stale = 0
        except Exception as exc:  # a refusal: the query cannot go on
            self.error = exc
            self._loaded.set()

    def _reload_now(self, event: Event[Any]) -> bool:
        if event.op == "resync":
            return True
        # Connected without a position: changes may have been missed since the last load.
        return event.op == "connected" and (self._subscription.last_event_id is None
                                            or not self._loaded.is_set())

    def _apply(self, event: Event[Any]) -> bool:
        """Apply one event; False when the rows must be loaded again to be right."""
        if event.op in ("insert", "update") and isinstance(event.row, Mapping):
            if self._expand and "expand" not in event.row:
                return False  # the stream sent the row unexpanded: only a list expands it
            done = self._window.upsert(event.row)
        elif event.op == "delete":
            done = self._window.remove(event.row_uid)
        else:
            return True
        self._publish()
        return done

    async def _load(self, fresh_kinds: bool = False) -> None:
        attempt = 0
        while True:
            try:
                await self._read_kinds(fresh_kinds)
                rows, complete = await self._fetch()
                break
            except httpx.TransportError:  # the server is restarting: the stream will resume too
                await asyncio.sleep(self._subscription.backoff.delay(attempt))
                attempt += 1
        self._window.load(rows, complete)
        self.loads += 1
        self._publish()
        self._loaded.set()

    async def _read_kinds(self, fresh: bool) -> None:
        if self._kinds_read and not fresh:
            return
        try:
            self._window.kinds = await self._table.kinds(fresh)
        except AuthoricError:  # no document for this user: judge by the values instead
            self._window.kinds = {}
        self._kinds_read = True

    async def _fetch(self) -> tuple[list[Any], bool]:
        window = self._window
        if window.limit is not None:
            page = await self._table.list(filter=window.filter, order=_spec(window), limit=window.limit,
                                          expand=self._expand)
            return list(page.items), page.next is None
        rows: list[Any] = []
        after: str | None = None
        while True:
            page = await self._table.list(filter=window.filter, order=_spec(window), limit=PAGE,
                                          after=after, expand=self._expand)
            rows.extend(page.items)
            if page.next is None:
                return rows, True
            after = page.next

    def _publish(self) -> None:
        self.rows = list(self._window.rows)
        if self._on_change is not None:
            self._on_change(self.rows)


def _spec(window: Window) -> str:
    return ("-" if window.order.descending else "") + window.order.field
