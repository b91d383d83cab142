"""Request limits at the edge: the URL's length (400 past MAX_URL_BYTES), the body's size,
enforced while the body streams in (413 before it is all read), and what a JSON body may hold
(422 for nesting past MAX_JSON_DEPTH, however deep, and for NUL characters, which PostgreSQL
cannot store). Also the test-only header that counts a request's database round trips."""

from __future__ import annotations

import json
import os
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from authoric.catalog.types.builtin import MAX_JSON_DEPTH, json_nul_path
from authoric.errors import AuthoricError, BadRequest, PayloadTooLarge, ValidationFailed
from authoric.http.errors import error_body
from authoric.plan.runner import round_trips

MAX_URL_BYTES = 8192  # path and query string together
COUNT_FLAG = "AUTHORIC_TEST_COUNT_ROUND_TRIPS"


def too_deep() -> ValidationFailed:
    """The answer to a JSON body nested past MAX_JSON_DEPTH, at any depth (even past what the
    parser itself can follow)."""
    return ValidationFailed(f"the body is nested deeper than {MAX_JSON_DEPTH} levels",
                            {"limit": MAX_JSON_DEPTH, "reason": "too_deep"})


def refuse_nul(raw: bytes, value: Any) -> None:
    """422 for a JSON body with U+0000 in any key or string: no column can store it, and it
    must not reach a statement. (Only bodies that spell `\\u0000` are walked.)"""
    path = json_nul_path(value) if b"\\u0000" in raw else None
    if path is not None:
        raise ValidationFailed("NUL characters (\\u0000) cannot be stored, in a key or a value",
                               {"reason": "nul_character", "field": path.replace("\x00", "\\u0000")})


def url_refusal(scope: Scope) -> BadRequest | None:
    """400 for a URL (path + query) over MAX_URL_BYTES: longer filters belong in fewer terms,
    and a bound here keeps parsing cheap for every route."""
    size = len(scope.get("raw_path") or scope["path"].encode()) + len(scope.get("query_string", b""))
    if size <= MAX_URL_BYTES:
        return None
    return BadRequest(f"the URL is over {MAX_URL_BYTES} bytes",
                      {"limit": MAX_URL_BYTES, "reason": "url_too_long"})


def declared_over(scope: Scope, limit: int) -> bool:
    """Whether the request's Content-Length alone is over `limit` (413 before reading)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.isdigit() and int(value) > limit
    return False


def limited(receive: Receive, limit: int) -> Receive:
    """`receive`, raising PayloadTooLarge once the body read so far is over `limit` bytes."""
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise PayloadTooLarge(f"the body is over {limit} bytes", {"limit": limit})
        return message

    return counted


def counting_round_trips() -> bool:
    """AUTHORIC_TEST_COUNT_ROUND_TRIPS=1 (tests only): responses say how many statements
    their request sent to PostgreSQL, in `X-Authoric-Round-Trips`."""
    return os.environ.get(COUNT_FLAG) == "1"


def round_trips_header(counter: list[int]) -> tuple[bytes, bytes]:
    return (b"x-authoric-round-trips", str(counter[0]).encode())


class UrlLimit:
    """Refuse a URL over MAX_URL_BYTES with 400 BAD_REQUEST (`url_refusal`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = url_refusal(scope) if scope["type"] == "http" else None
        if refusal is not None:
            await send_error(send, refusal)
            return
        await self.app(scope, receive, send)


class RoundTripHeader:
    """With AUTHORIC_TEST_COUNT_ROUND_TRIPS=1 (tests only), each response says how many
    statements its request sent to PostgreSQL, in `X-Authoric-Round-Trips`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.enabled = counting_round_trips()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.enabled or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        counter = [0]
        token = round_trips.set(counter)

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  round_trips_header(counter)]}
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            round_trips.reset(token)


class BodyLimit:
    """Refuse bodies over `limit` bytes (`import_limit` for CSV import routes) with 413."""

    def __init__(self, app: ASGIApp, limit: int, import_limit: int) -> None:
        self.app, self.limit, self.import_limit = app, limit, import_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.import_limit if scope["path"].endswith("/import") else self.limit
        if declared_over(scope, limit):
            await refuse_body(send, limit)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited(receive, limit), tracked)
        except PayloadTooLarge:
            if not started:
                await refuse_body(send, limit)


async def refuse_body(send: Send, limit: int) -> None:
    await send_error(send, PayloadTooLarge(f"the body is over {limit} bytes", {"limit": limit}))


async def send_error(send: Send, error: AuthoricError) -> None:
    """Answer with `error` from the edge, before any route ran."""
    body = json.dumps(error_body(error)).encode()
    headers: list[Any] = [(b"content-type", b"application/json"),
                          (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
