"""`/admin` routes of accounts: an app's mailbox, and a user's sessions (for the console)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from authoric.accounts import service
from authoric.accounts.models import SessionList
from authoric.catalog.apps import find_app
from authoric.http.admin import require_admin
from authoric.http.answers import declared
from authoric.http.bodies import ERROR_RESPONSES, TypedRoute
from authoric.http.context import services
from authoric.mail.outbox import MailPage, list_mailbox
from authoric.tenancy.service import find_user

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(require_admin)],
                   route_class=TypedRoute, responses=ERROR_RESPONSES)


@router.get("/apps/{app}/mail", response_model=None, responses=declared(200, MailPage))
async def mailbox(request: Request, app: str, limit: str | None = None,
                  after: str | None = None) -> dict[str, Any]:
    """The app's mail, newest first: the whole message without SMTP, `to`, `subject` and
    `status` with it."""
    async with services(request).tx() as conn:
        return await list_mailbox(conn, (await find_app(conn, app))["uid"], limit, after)


async def _user_uid(conn: Any, app: str, user: str) -> uuid.UUID:
    uid: uuid.UUID = (await find_user(conn, app, user)).uid
    return uid


@router.get("/apps/{app}/users/{user}/sessions", response_model=None,
            responses=declared(200, SessionList))
async def user_sessions(request: Request, app: str, user: str) -> dict[str, Any]:
    async with services(request).tx() as conn:
        return await service.list_sessions(conn, await _user_uid(conn, app, user), None)


@router.delete("/apps/{app}/users/{user}/sessions/{session}", status_code=204)
async def end_user_session(request: Request, app: str, user: str, session: str) -> Response:
    async with services(request).tx() as conn:
        await service.end_session(conn, await _user_uid(conn, app, user), session)
    return Response(status_code=204)
