"""Audit entries for the section 2 admin routes, recorded at the edge.

An ASGI middleware watches mutating `/admin` requests. After the route has answered 2xx, and
before the response leaves, it records one entry: the action the route names where it is
declared (`create_table` is `table.create`, `put_member` is `member.put`), the target (what
was changed, as a path under the app), and a summary with secrets removed
(`console.audit.sanitized`): the created object as the response shows it (a user's email and
uid, never the password), the body of a change, or nothing for a delete. Routes that record
their own entries in their own transaction (the console routes of section 2a) mark the
request with `audited_by_route`, and are skipped.

Recording at the edge keeps the admin services free of audit calls. The price: the entry is
written just after the change commits, in a transaction of its own; a crash between the two
loses the entry (the change stands). A failure to record is logged and the response is sent.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import Any

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from authoric.catalog.apps import find_app
from authoric.console import audit
from authoric.errors import NotFound

log = logging.getLogger("authoric.audit")

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
AUDITED_BY_ROUTE = "authoric.audited_by_route"
APP_PATH = re.compile(r"^/admin/apps/([^/]+)")
APPS = "/admin/apps"
MAX_CAPTURE = 1 << 20  # admin bodies are small JSON documents; larger ones are not summarized

# The audit log calls a PATCH an update; every other verb is the route's own word.
VERB_WORDS = {"patch": "update"}


def action_of(route: Any) -> str:
    """The action a section 2 admin route records, read from the route itself: its name (the
    endpoint's, `create_app`, `patch_table`, `put_member`) is `{verb}_{object}`, and the action
    is `{object}.{verb}` (`app.create`, `table.update`, `member.put`). A route is declared once
    and names its own action; a name of another form records `admin.change`."""
    verb, _, noun = str(getattr(route, "name", "")).partition("_")
    return f"{noun}.{VERB_WORDS.get(verb, verb)}" if verb and noun else "admin.change"


def audited_by_route(request: Request) -> None:
    """Dependency: this route records its own audit entries (or has nothing to record)."""
    request.scope[AUDITED_BY_ROUTE] = True


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _target(template: str, params: dict[str, Any], action: str, response: Any,
            app_name: str) -> str:
    """What was changed: the app's name for the app itself, else its path under the app; for
    a create, the object the response returns, by its uid (a table has none: by its name)."""
    rest = template.removeprefix(APPS).removeprefix("/{app}").strip("/")
    if action.endswith(".create") and rest and isinstance(response, dict):
        return f"{rest}/{response.get('uid', response.get('name'))}"
    for key, value in params.items():
        rest = rest.replace("{" + key + "}", str(value))
    return rest or app_name


def _details(method: str, request: Any, response: Any) -> dict[str, Any]:
    """A change's body; a create's (or put's) result; nothing for a delete. Secrets are
    removed when the entry is recorded."""
    body = request if method == "PATCH" else response if method in ("POST", "PUT") else None
    return dict(body) if isinstance(body, dict) else {}


class AdminAudit:
    """Record one audit entry per successful mutating section 2 admin request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (scope["type"] != "http" or scope["method"] not in MUTATING
                or not (path == APPS or path.startswith(APPS + "/"))):
            await self.app(scope, receive, send)
            return
        app_ref = APP_PATH.match(path)
        # Resolved before the request runs, so that an app's own deletion is attributed to it.
        app = await self._app(scope, app_ref.group(1)) if app_ref else None
        request_body = bytearray()
        held: list[Message] = []

        async def teed() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(request_body) < MAX_CAPTURE:
                request_body.extend(message.get("body", b""))
            return message

        async def holding(message: Message) -> None:
            if message["type"] not in ("http.response.start", "http.response.body"):
                await send(message)
                return
            held.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                await self._record(scope, app, bytes(request_body), held)
                for m in held:
                    await send(m)
                held.clear()

        await self.app(scope, teed, holding)

    async def _app(self, scope: Scope, ref: str) -> Any:
        try:
            async with scope["app"].state.services.tx() as conn:
                return await find_app(conn, ref)
        except NotFound:
            return None

    async def _record(self, scope: Scope, app: Any, request_body: bytes,
                      held: list[Message]) -> None:
        status = held[0].get("status", 500) if held else 500
        route = scope.get("route")
        if not 200 <= status < 300 or scope.get(AUDITED_BY_ROUTE) or route is None:
            return
        method, template = scope["method"], str(getattr(route, "path", ""))
        action = action_of(route)
        response = _json(b"".join(m.get("body", b"") for m in held[1:]))
        if app is None and action == "app.create" and isinstance(response, dict):
            app = {"uid": uuid.UUID(str(response["uid"])), "name": response.get("name")}
        if app is None:
            return  # nothing app-scoped changed (no such route today)
        params = dict(scope.get("path_params", {}))
        details = ({"method": method, "route": template} if action == "admin.change"
                   else _details(method, _json(request_body), response))
        try:
            async with scope["app"].state.services.tx() as conn:
                await audit.record(conn, app["uid"], action,
                                   _target(template, params, action, response, app["name"]),
                                   details)
        except Exception:  # the change stands; say loudly that its entry is missing
            log.exception("could not record the audit entry for %s %s", method, scope["path"])
