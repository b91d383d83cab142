"""`Client`: the same surface as `AsyncClient`, blocking.

A blocking client runs one `AsyncClient` on an event loop of its own, in a daemon thread, and
waits for each call there. So there is one implementation of every rule (refresh, retry,
reconnection), and the lock that makes refreshes single-flight is the same for every thread
that uses the client.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, cast

from authoric_client.aclient import AsyncClient, AsyncTable, Count, Filter, Row
from authoric_client.live import AsyncLiveQuery
from authoric_client.models import Event, Page, Status
from authoric_client.org import AsyncInvitations, AsyncKeys, AsyncMembers, AsyncOrg
from authoric_client.stream import AsyncSubscription, Backoff
from authoric_client.typevars import TypeVar

T = TypeVar("T")
R = TypeVar("R")
N = TypeVar("N")
P = TypeVar("P")
F = TypeVar("F")
Ord = TypeVar("Ord")  # an order (`"-createdAt"`)


class _Loop:
    """An event loop in a daemon thread; `run` waits for a coroutine to finish there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="authoric-client",
                                        daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a blocking Client called from its own callback: use AsyncClient")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


async def _call(fn: Callable[[], T]) -> T:
    return fn()


class Auth:
    """`client.auth`: sign in, refresh, sign out."""

    def __init__(self, client: AsyncClient[Any], loop: _Loop) -> None:
        self._session = client.auth
        self._loop = loop

    def sign_in(self, email: str, password: str, org: str | None = None) -> dict[str, Any]:
        return self._loop.run(self._session.sign_in(email, password, org))

    def refresh(self) -> None:
        self._loop.run(self._session.refresh())

    def accept_invitation(self, token: str, password: str | None = None) -> dict[str, Any]:
        return self._loop.run(self._session.accept_invitation(token, password))

    def sign_out(self) -> None:
        self._loop.run(self._session.sign_out())

    def use(self, access_token: str, refresh_token: str, expires_in: float) -> None:
        self._session.use(access_token, refresh_token, expires_in)

    def sign_up(self, email: str, password: str) -> dict[str, Any]:
        return self._loop.run(self._session.sign_up(email, password))

    def verify_email(self, token: str) -> None:
        self._loop.run(self._session.verify_email(token))

    def resend_verification(self, email: str) -> None:
        self._loop.run(self._session.resend_verification(email))

    def request_password_reset(self, email: str) -> None:
        self._loop.run(self._session.request_password_reset(email))

    def reset_password(self, token: str, password: str) -> None:
        self._loop.run(self._session.reset_password(token, password))

    def change_password(self, current: str, password: str) -> None:
        self._loop.run(self._session.change_password(current, password))

    def me(self) -> dict[str, Any]:
        return self._loop.run(self._session.me())

    def sessions(self) -> list[dict[str, Any]]:
        return self._loop.run(self._session.sessions())

    def end_session(self, session_id: str) -> None:
        self._loop.run(self._session.end_session(session_id))

    def switch_org(self, org: str) -> dict[str, Any]:
        return self._loop.run(self._session.switch_org(org))

    @property
    def refreshes(self) -> int:
        return self._session.refreshes


class Orgs:
    """`client.orgs`: orgs the signed-in user creates."""

    def __init__(self, client: AsyncClient[Any], loop: _Loop) -> None:
        self._orgs = client.orgs
        self._loop = loop

    def create(self, name: str) -> dict[str, Any]:
        return self._loop.run(self._orgs.create(name))


class Subscription(Generic[R]):
    """An iterator of `Event`s; `close()` (or leaving `with`) ends it."""

    def __init__(self, inner: AsyncSubscription[R], loop: _Loop) -> None:
        self._inner = inner
        self._loop = loop

    def __iter__(self) -> Iterator[Event[R]]:
        return self

    def __next__(self) -> Event[R]:
        try:
            return self._loop.run(self._inner.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def next(self, timeout: float | None = None) -> Event[R]:
        """The next event; `TimeoutError` if none comes within `timeout` seconds."""
        try:
            return self._loop.run(asyncio.wait_for(self._inner.__anext__(), timeout))
        except StopAsyncIteration:
            raise StopIteration from None

    def start(self) -> None:
        self._loop.run(_call(self._inner.start))

    def close(self) -> None:
        self._loop.run(self._inner.close())

    def __enter__(self) -> Subscription[R]:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_event_id(self) -> str | None:
        return self._inner.last_event_id

    @property
    def status(self) -> Status:
        return self._inner.status

    @property
    def connections(self) -> int:
        return self._inner.connections

    @property
    def retry_after(self) -> float | None:
        return self._inner.retry_after


class LiveQuery(Generic[R]):
    """`rows`, kept current in the client's thread; `close()` stops it."""

    def __init__(self, inner: AsyncLiveQuery[R], loop: _Loop) -> None:
        self._inner = inner
        self._loop = loop
        loop.run(inner.ready())

    @property
    def rows(self) -> list[R]:
        return self._inner.rows

    @property
    def loads(self) -> int:
        return self._inner.loads

    @property
    def error(self) -> BaseException | None:
        return self._inner.error

    @property
    def status(self) -> str:
        return self._inner.status

    def close(self) -> None:
        self._loop.run(self._inner.close())

    def __enter__(self) -> LiveQuery[R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Table(Generic[R, N, P, F, Ord]):
    """One table of the app (see `AsyncTable`), blocking."""

    def __init__(self, inner: AsyncTable[R, N, P, F, Ord], loop: _Loop) -> None:
        self._inner = inner
        self._loop = loop
        self.name = inner.name

    def list(self, *, filter: F | None = None, order: Ord | None = None,
             limit: int | None = None, after: str | None = None,
             expand: Sequence[str] | None = None, count: Count = False) -> Page[R]:
        return self._loop.run(self._inner.list(filter=filter, order=order, limit=limit, after=after,
                                               expand=expand, count=count))

    def get(self, uid: str, *, expand: Sequence[str] | None = None) -> R:
        return self._loop.run(self._inner.get(uid, expand=expand))

    def create(self, row: N, *, expand: Sequence[str] | None = None) -> R:
        return self._loop.run(self._inner.create(row, expand=expand))

    def update(self, uid: str, patch: P, *, expand: Sequence[str] | None = None) -> R:
        return self._loop.run(self._inner.update(uid, patch, expand=expand))

    def delete(self, uid: str) -> None:
        self._loop.run(self._inner.delete(uid))

    def update_where(self, filter: F, set: P) -> int:
        return self._loop.run(self._inner.update_where(filter, set))

    def delete_where(self, filter: F) -> int:
        return self._loop.run(self._inner.delete_where(filter))

    def import_csv(self, text: str | bytes) -> int:
        return self._loop.run(self._inner.import_csv(text))

    def subscribe(self, *, last_event_id: str | None = None, expand: Sequence[str] | None = None,
                  on_status: Callable[[Status], None] | None = None) -> Subscription[R]:
        return Subscription(self._inner.subscribe(last_event_id=last_event_id, expand=expand,
                                                  on_status=on_status), self._loop)

    def live_query(self, *, filter: F | None = None, order: Ord | None = None,
                   limit: int | None = None, expand: Sequence[str] | None = None,
                   on_change: Callable[[builtins.list[R]], None] | None = None) -> LiveQuery[R]:
        """The rows of this list query, loaded before it returns and kept current (from the
        client's thread: `on_change` runs there and must not call the blocking client)."""
        return LiveQuery(self._loop.run(_call(lambda: self._inner.live_query(
            filter=filter, order=order, limit=limit, expand=expand, on_change=on_change))),
            self._loop)


class Members:
    def __init__(self, inner: AsyncMembers, loop: _Loop) -> None:
        self._inner, self._loop = inner, loop

    def list(self, *, limit: int | None = None, after: str | None = None) -> dict[str, Any]:
        return self._loop.run(self._inner.list(limit=limit, after=after))

    def update(self, user: str, roles: Sequence[str]) -> dict[str, Any]:
        return self._loop.run(self._inner.update(user, roles))

    def remove(self, user: str) -> None:
        self._loop.run(self._inner.remove(user))


class Invitations:
    def __init__(self, inner: AsyncInvitations, loop: _Loop) -> None:
        self._inner, self._loop = inner, loop

    def create(self, email: str, roles: Sequence[str]) -> dict[str, Any]:
        return self._loop.run(self._inner.create(email, roles))

    def list(self) -> builtins.list[dict[str, Any]]:
        return self._loop.run(self._inner.list())

    def revoke(self, uid: str) -> None:
        self._loop.run(self._inner.revoke(uid))


class Keys:
    def __init__(self, inner: AsyncKeys, loop: _Loop) -> None:
        self._inner, self._loop = inner, loop

    def create(self, name: str, roles: Sequence[str], expires_at: str | None = None) -> dict[str, Any]:
        return self._loop.run(self._inner.create(name, roles, expires_at))

    def list(self) -> builtins.list[dict[str, Any]]:
        return self._loop.run(self._inner.list())

    def revoke(self, uid: str) -> None:
        self._loop.run(self._inner.revoke(uid))


class Org:
    """`client.org` (see `AsyncOrg`), blocking."""

    def __init__(self, inner: AsyncOrg, loop: _Loop) -> None:
        self.members = Members(inner.members, loop)
        self.invitations = Invitations(inner.invitations, loop)
        self.keys = Keys(inner.keys, loop)


class Tables(Protocol):
    """Any table, untyped rows: what `Client().table` is without generated types."""

    def __call__(self, name: str, /) -> Table[Row, Mapping[str, Any], Mapping[str, Any], Filter, str]: ...


S = TypeVar("S", default=Tables)


class Client(Generic[S]):
    """The app `app` of the server at `url`, blocking. `Client[AcmeTables](url, "acme")` (types
    from `authoric typegen --lang py`) makes `table("invoices")` typed."""

    def __init__(self, url: str, app: str, *, timeout: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, backoff: Backoff = Backoff(),
                 read_timeout: float = 60.0, api_key: str | None = None) -> None:
        self._loop = _Loop()
        self._async: AsyncClient[Any] = self._loop.run(_call(lambda: AsyncClient(
            url, app, timeout=timeout, clock=clock, backoff=backoff, read_timeout=read_timeout,
            api_key=api_key)))
        self.app = app
        self.url = url
        self.auth = Auth(self._async, self._loop)
        self.org = Org(self._async.org, self._loop)
        self.orgs = Orgs(self._async, self._loop)

    @property
    def table(self) -> S:
        """`table(name)`: one table of the app."""
        return cast(S, self._table)

    def _table(self, name: str) -> Table[Any, Any, Any, Any, Any]:
        return Table(AsyncTable(self._async, name), self._loop)

    def subscribe(self, tables: Sequence[str], *, last_event_id: str | None = None,
                  on_status: Callable[[Status], None] | None = None) -> Subscription[Row]:
        """One stream for several tables (contract section 5b)."""
        return Subscription(self._async.subscribe(tables, last_event_id=last_event_id,
                                                  on_status=on_status), self._loop)

    def close(self) -> None:
        self._loop.run(self._async.aclose())
        self._loop.stop()

    def __enter__(self) -> Client[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
