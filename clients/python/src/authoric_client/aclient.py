"""`AsyncClient` and `AsyncTable`: the whole contract surface on asyncio (httpx).

Every call sends the session's access token, refreshed first when it is in its last tenth;
a `401 TOKEN_EXPIRED` (the server's clock is the one that counts) refreshes once and retries
once. Any other refusal raises `AuthoricError`.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Literal, Protocol, cast

import httpx

from authoric_client.errors import AuthoricError
from authoric_client.kinds import Kind, kinds_of
from authoric_client.live import AsyncLiveQuery
from authoric_client.models import Page, Status
from authoric_client.org import AsyncOrg
from authoric_client.session import Session
from authoric_client.stream import AsyncSubscription, Backoff
from authoric_client.typevars import TypeVar

R = TypeVar("R")  # a row as read
N = TypeVar("N")  # a new row, as given to create
P = TypeVar("P")  # a patch, as given to update and update_where
F = TypeVar("F")  # a filter
Ord = TypeVar("Ord")  # an order (`"-createdAt"`)

Row = dict[str, Any]
Filter = Mapping[str, Any]
Count = bool | Literal["exact"]  # True adds the page's `total`: every row the filter matches


def list_params(filter: Filter | None, order: str | None, limit: int | None, after: str | None,
                expand: Sequence[str] | None, count: Count) -> dict[str, str]:
    """The query string of a list (contract section 4)."""
    params: dict[str, str] = {}
    if filter:
        params["filter"] = json.dumps(filter, separators=(",", ":"))
    if order:
        params["order"] = order
    if limit is not None:
        params["limit"] = str(limit)
    if after:
        params["after"] = after
    params.update(expand_params(expand))
    if count:
        params["count"] = "exact"  # True and "exact" alike: members count exactly
    return params


def expand_params(expand: Sequence[str] | None) -> dict[str, str]:
    return {"expand": ",".join(expand)} if expand else {}


class AsyncTable(Generic[R, N, P, F, Ord]):
    """One table of the app, as the signed-in user may use it."""

    def __init__(self, client: AsyncClient[Any], name: str) -> None:
        self._client = client
        self.name = name
        self.path = f"/{client.app}/autocrud/{name}"

    async def list(self, *, filter: F | None = None, order: Ord | None = None,
                   limit: int | None = None, after: str | None = None,
                   expand: Sequence[str] | None = None, count: Count = False) -> Page[R]:
        body = (await self._client.request("GET", self.path, params=list_params(
            cast(Filter | None, filter), cast(str | None, order), limit, after, expand,
            count))).json()
        return Page(body["items"], body.get("next"), body.get("total"))

    async def get(self, uid: str, *, expand: Sequence[str] | None = None) -> R:
        return cast(R, (await self._client.request("GET", f"{self.path}/{uid}",
                                                   params=expand_params(expand))).json())

    async def create(self, row: N, *, expand: Sequence[str] | None = None) -> R:
        return cast(R, (await self._client.request("POST", self.path, json=row,
                                                   params=expand_params(expand))).json())

    async def update(self, uid: str, patch: P, *, expand: Sequence[str] | None = None) -> R:
        return cast(R, (await self._client.request("PATCH", f"{self.path}/{uid}", json=patch,
                                                   params=expand_params(expand))).json())

    async def delete(self, uid: str) -> None:
        await self._client.request("DELETE", f"{self.path}/{uid}")

    async def update_where(self, filter: F, set: P) -> int:
        """Bulk update: every row matching `filter` (required) gets `set`; how many changed."""
        response = await self._client.request("PATCH", self.path, json={"set": set},
                                              params=_bulk_filter(filter))
        return int(response.json()["count"])

    async def delete_where(self, filter: F) -> int:
        response = await self._client.request("DELETE", self.path, params=_bulk_filter(filter))
        return int(response.json()["count"])

    async def import_csv(self, text: str | bytes) -> int:
        """All or nothing; how many rows were inserted."""
        response = await self._client.request("POST", f"{self.path}/import", content=text,
                                              headers={"Content-Type": "text/csv"})
        return int(response.json()["inserted"])

    async def kinds(self, fresh: bool = False) -> dict[str, Kind]:
        """The kind of each field of this table's rows, from the app's OpenAPI document."""
        return kinds_of(await self._client.openapi(fresh), self.name)

    def subscribe(self, *, last_event_id: str | None = None, expand: Sequence[str] | None = None,
                  on_status: Callable[[Status], None] | None = None) -> AsyncSubscription[R]:
        return self._client.stream(f"{self.path}/subscribe", expand_params(expand),
                                   last_event_id=last_event_id, on_status=on_status)

    def live_query(self, *, filter: F | None = None, order: Ord | None = None,
                   limit: int | None = None, expand: Sequence[str] | None = None,
                   on_change: Callable[[builtins.list[R]], None] | None = None) -> AsyncLiveQuery[R]:
        """The rows of this list query, kept current from the stream (see live.py); call
        `await live.ready()` for the first load, `await live.close()` to stop."""
        return AsyncLiveQuery(self, filter=cast(Filter | None, filter), order=cast(str | None, order),
                              limit=limit, expand=expand, on_change=on_change)


def _bulk_filter(filter: Any) -> dict[str, str]:
    if not filter:  # the server refuses it too (400); say so before sending anything
        raise AuthoricError(400, "BAD_REQUEST", "a bulk write needs a filter",
                            {"reason": "filter_required"})
    return {"filter": json.dumps(filter, separators=(",", ":"))}


class AsyncTables(Protocol):
    """Any table, untyped rows: what `AsyncClient().table` is without generated types."""

    def __call__(self, name: str, /) -> AsyncTable[Row, Mapping[str, Any], Mapping[str, Any], Filter,
                                                   str]: ...


S = TypeVar("S", default=AsyncTables)


class AsyncOrgs:
    """`client.orgs`: orgs the signed-in user creates (contract 3a, `orgCreation: "users"`)."""

    def __init__(self, client: AsyncClient[Any]) -> None:
        self._client = client

    async def create(self, name: str) -> dict[str, Any]:
        """An org owned by the user (the app's `orgOwnerRoles`), signed in to at once."""
        answer = (await self._client.request("POST", f"/{self._client.app}/orgs",
                                             json={"name": name})).json()
        self._client.auth.use(answer["access_token"], answer["refresh_token"],
                              float(answer["expires_in"]))
        org: dict[str, Any] = answer["org"]
        return org


class AsyncClient(Generic[S]):
    """The app `app` of the server at `url`.

    `AsyncClient[AsyncAcmeTables](url, "acme")` (types from `authoric typegen --lang py`) makes
    `table("invoices")` typed: rows, new rows and patches are the app's TypedDicts.
    """

    def __init__(self, url: str, app: str, *, timeout: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, backoff: Backoff = Backoff(),
                 read_timeout: float = 60.0, http: httpx.AsyncClient | None = None,
                 api_key: str | None = None) -> None:
        self.app = app
        self.url = url
        self._http = http or httpx.AsyncClient(base_url=url, timeout=timeout)
        self._backoff = backoff
        self._read_timeout = read_timeout
        self.auth = Session(self._http, f"/{app}", clock, api_key, self.request)
        self.org = AsyncOrg(self)  # the signed-in member's org (sections 3a, 3b)
        self.orgs = AsyncOrgs(self)
        self._openapi: dict[str, Any] | None = None

    @property
    def table(self) -> S:
        """`table(name)`: one table of the app."""
        return cast(S, self._table)

    def _table(self, name: str) -> AsyncTable[Any, Any, Any, Any, Any]:
        return AsyncTable(self, name)

    def subscribe(self, tables: Sequence[str], *, last_event_id: str | None = None,
                  on_status: Callable[[Status], None] | None = None) -> AsyncSubscription[Row]:
        """One stream for several tables (contract section 5b)."""
        return self.stream(f"/{self.app}/subscribe", {"tables": ",".join(tables)},
                           last_event_id=last_event_id, on_status=on_status)

    def stream(self, path: str, params: dict[str, str], *, last_event_id: str | None,
               on_status: Callable[[Status], None] | None) -> AsyncSubscription[Any]:
        return AsyncSubscription(self._http, self.auth, path, params, last_event_id=last_event_id,
                                 on_status=on_status, backoff=self._backoff,
                                 read_timeout=self._read_timeout)

    async def openapi(self, fresh: bool = False) -> dict[str, Any]:
        """The app's OpenAPI document as the signed-in user sees it (read once, and again when
        `fresh`: after a schema change)."""
        if self._openapi is None or fresh:
            self._openapi = (await self.request("GET", f"/{self.app}/openapi.json")).json()
        return self._openapi

    async def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One call with the session's token; a `TOKEN_EXPIRED` refreshes and retries once."""
        token = await self.auth.access_token()
        response = await self._send(method, path, token, kw)
        if response.status_code == 401 and token is not None and \
                AuthoricError.from_response(response).code == "TOKEN_EXPIRED":
            await self.auth.refresh(token)
            response = await self._send(method, path, await self.auth.access_token(), kw)
        if response.status_code >= 400:
            raise AuthoricError.from_response(response)
        return response

    async def _send(self, method: str, path: str, token: str | None,
                    kw: dict[str, Any]) -> httpx.Response:
        headers = dict(kw.get("headers") or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        rest = {key: value for key, value in kw.items() if key != "headers"}
        return await self._http.request(method, path, headers=headers, **rest)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient[S]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
