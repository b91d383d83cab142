"""The server's own small account pages, `/{app}/auth/pages/{verify|reset|invite}`: where
mailed links point when the app sets no `settings.links`. They work without the console,
carry no inline script (one static file, pages.js, does the step) and are served with a
Content-Security-Policy that allows nothing else."""

from __future__ import annotations

import html
from functools import cache
from importlib import resources
from string import Template

from fastapi import APIRouter, Request
from fastapi.responses import Response

from authoric.catalog.apps import find_app
from authoric.errors import NotFound
from authoric.http.context import services

router = APIRouter(tags=["account pages"], include_in_schema=False)

# (title, button) per page
PAGES = {"verify": ("Confirm your email", ""), "reset": ("Choose a new password", "Save"),
         "invite": ("Accept the invitation", "Accept")}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
           "X-Frame-Options": "DENY"}
ASSETS = {"pages.js": "text/javascript; charset=utf-8", "pages.css": "text/css; charset=utf-8"}


@cache
def _file(name: str) -> str:
    return resources.files("authoric.http").joinpath("pages", name).read_text()


@router.get("/{app}/auth/pages/{name}")
async def page(request: Request, app: str, name: str) -> Response:
    if name in ASSETS:
        return Response(_file(name), media_type=ASSETS[name], headers=HEADERS)
    if name not in PAGES:
        raise NotFound("no such page", {"page": name})
    svc = services(request)
    async with svc.engine.connect() as conn:
        row = await find_app(conn, app)
    title, button = PAGES[name]
    body = Template(_file("page.html")).substitute(
        title=html.escape(title), app=html.escape(row["name"]), page=name,
        button=html.escape(button))
    return Response(body, media_type="text/html; charset=utf-8", headers=HEADERS)
