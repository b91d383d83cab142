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


class UrlLimit:
    """Refuse a URL (path + query) over MAX_URL_BYTES with 400 BAD_REQUEST: longer filters
    belong in fewer terms, and a bound here keeps parsing cheap for every route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = len(scope.get("raw_path") or scope["path"].encode()) + len(
                scope.get("query_string", b""))
            if size > MAX_URL_BYTES:
                await _send_error(send, BadRequest(
                    f"the URL is over {MAX_URL_BYTES} bytes",
                    {"limit": MAX_URL_BYTES, "reason": "url_too_long"}))
                return
        await self.app(scope, receive, send)


class RoundTripHeader:
    """With AUTHORIC_TEST_COUNT_ROUND_TRIPS=1 (tests only), each response says how many
    statements its request sent to PostgreSQL, in `X-Authoric-Round-Trips`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.enabled = os.environ.get(COUNT_FLAG) == "1"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.enabled or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        counter = [0]
        token = round_trips.set(counter)

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-authoric-round-trips", str(counter[0]).encode()))
                message = {**message, "headers": headers}
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
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _refuse(send, limit)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise PayloadTooLarge(f"the body is over {limit} bytes", {"limit": limit})
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except PayloadTooLarge:
            if not started:
                await _refuse(send, limit)


async def _refuse(send: Send, limit: int) -> None:
    await _send_error(send, PayloadTooLarge(f"the body is over {limit} bytes", {"limit": limit}))


async def _send_error(send: Send, error: AuthoricError) -> None:
    body = json.dumps(error_body(error)).encode()
    headers: list[Any] = [(b"content-type", b"application/json"),
                          (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
