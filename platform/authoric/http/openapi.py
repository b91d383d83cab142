"""`GET /{app}/openapi.json`: the app's own OpenAPI document (admin token or the app's tokens)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from authoric.auth.admin import is_admin_token
from authoric.auth.principals import authenticate
from authoric.catalog.apps import find_app
from authoric.catalog.openapi_doc import app_openapi
from authoric.http.context import services

router = APIRouter(tags=["openapi"])


@router.get("/{app}/openapi.json")
async def app_document(request: Request, app: str) -> dict[str, Any]:
    svc = services(request)
    header = request.headers.get("authorization")
    async with svc.tx() as conn:
        if is_admin_token(header, svc.admin_token):
            row = await find_app(conn, app)
            uid, version = row["uid"], row["version"]
        else:
            auth = await authenticate(conn, svc.jwt_secret, header, app)
            uid, version = auth.principal.app_uid, auth.version
        return app_openapi(await svc.snapshot(conn, uid, version))
