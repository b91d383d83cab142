"""`/{app}/auth`: token, refresh, logout."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from authoric.auth import sessions
from authoric.auth.credentials import Login, RefreshToken
from authoric.auth.ratelimit import LOGIN
from authoric.catalog.apps import find_app
from authoric.http.bodies import ERROR_RESPONSES, Body, TypedRoute
from authoric.http.context import services

router = APIRouter(tags=["sessions"], route_class=TypedRoute, responses=ERROR_RESPONSES)



async def throttle(request: Request, app: str, email: str | None = None,
                   kinds: tuple[str, str] = LOGIN) -> None:
    """Count the attempt in a transaction of its own (kept when the request fails) on the
    `kinds` counters (auth.ratelimit); 404 for an unknown app, 429 past a limit. The account
    is the email the request names."""
    client = request.client.host if request.client else "unknown"
    svc = services(request)
    async with svc.tx() as conn:
        verdict = await svc.token_limiter.count(conn, app, client, email, kinds)
    verdict.raise_if_over()


@router.post("/{app}/auth/token")
async def token(request: Request, app: str, body: Body[Login]) -> dict[str, Any]:
    svc = services(request)
    async with svc.password_work:
        await throttle(request, app, body.email)
        return await sessions.login(svc.tx, svc.jwt_secret, app, body,
                                    request.headers.get("user-agent"))


@router.post("/{app}/auth/refresh")
async def refresh(request: Request, app: str, body: Body[RefreshToken]) -> dict[str, Any]:
    await throttle(request, app)
    svc = services(request)
    async with svc.tx() as conn:
        return await sessions.refresh(conn, svc.jwt_secret, await find_app(conn, app), body)


@router.post("/{app}/auth/logout", status_code=204)
async def logout(request: Request, app: str, body: Body[RefreshToken]) -> Response:
    svc = services(request)
    async with svc.tx() as conn:
        await sessions.logout(conn, svc.jwt_secret, await find_app(conn, app), body)
    return Response(status_code=204)
