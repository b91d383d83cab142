"""`/{app}/auth`: token, refresh, logout."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from authoric.auth import sessions
from authoric.catalog.apps import find_app
from authoric.http.context import json_body, services

router = APIRouter(tags=["sessions"])


async def _throttle(request: Request, app: str, body: Any = None) -> None:
    """Count the attempt in a transaction of its own (kept when the login fails); 404 for an
    unknown app, 429 past a limit. The account is the email of a login body."""
    client = request.client.host if request.client else "unknown"
    email = body.get("email") if isinstance(body, dict) else None
    svc = services(request)
    async with svc.tx() as conn:
        verdict = await svc.token_limiter.count(conn, app, client,
                                                email if isinstance(email, str) else None)
    verdict.raise_if_over()


@router.post("/{app}/auth/token")
async def token(request: Request, app: str) -> dict[str, Any]:
    body = await json_body(request)
    await _throttle(request, app, body)
    svc = services(request)
    async with svc.tx() as conn:
        return await sessions.login(conn, svc.jwt_secret, await find_app(conn, app), body)


@router.post("/{app}/auth/refresh")
async def refresh(request: Request, app: str) -> dict[str, Any]:
    body = await json_body(request)
    await _throttle(request, app)
    svc = services(request)
    async with svc.tx() as conn:
        return await sessions.refresh(conn, svc.jwt_secret, await find_app(conn, app), body)


@router.post("/{app}/auth/logout", status_code=204)
async def logout(request: Request, app: str) -> Response:
    body = await json_body(request)
    svc = services(request)
    async with svc.tx() as conn:
        await sessions.logout(conn, svc.jwt_secret, await find_app(conn, app), body)
    return Response(status_code=204)
