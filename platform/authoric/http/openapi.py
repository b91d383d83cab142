"""`GET /{app}/openapi.json`: the app's own OpenAPI document.

The admin token gets every table; a member's access token gets the tables it may read.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from authoric.auth.admin import is_admin_token
from authoric.auth.principals import authenticate
from authoric.catalog.apps import find_app
from authoric.http.context import services
from authoric.openapi.document import app_openapi, member_openapi

router = APIRouter(tags=["openapi"])


@router.get("/{app}/openapi.json")
async def app_document(request: Request, app: str) -> dict[str, Any]:
    svc = services(request)
    header = request.headers.get("authorization")
    async with svc.tx() as conn:
        if is_admin_token(header, svc.admin_token):
            row = await find_app(conn, app)
            return app_openapi(await svc.snapshot(conn, row["uid"], row["version"]))
        auth = await authenticate(conn, svc.jwt_secret, header, app)
        snapshot = await svc.snapshot(conn, auth.principal.app_uid, auth.version)
        return member_openapi(snapshot, auth.principal)
