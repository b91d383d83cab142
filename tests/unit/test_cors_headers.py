"""The pure parts of per-app CORS (http/cors.py): which paths open to browsers, which origins
match a list, and the headers each answer carries."""

from __future__ import annotations

import pytest
from starlette.routing import Route

from authoric.http import cors


@pytest.mark.parametrize("path, app", [
    ("/shop/auth/token", "shop"), ("/shop/autocrud/invoices", "shop"),
    ("/shop/autocrud/invoices/0199/x", "shop"), ("/shop/subscribe", "shop"),
    ("/shop/openapi.json", "shop"),
    ("/admin/apps", None), ("/admin/auth/token", None), ("/admin/subscribe", None),
    ("/openapi.json", None), ("/docs", None), ("/shop/other", None), ("/shop/subscribe/x", None),
])
def test_only_an_apps_auth_autocrud_subscribe_and_openapi_paths_open_to_browsers(
        path: str, app: str | None) -> None:
    assert cors.app_of(path) == app


def test_an_origin_matches_its_list_exactly_or_by_star() -> None:
    listed = ["https://app.example.com", "http://127.0.0.1:5173/"]
    assert cors.origin_allowed("https://app.example.com", listed)
    assert cors.origin_allowed("http://127.0.0.1:5173", listed)  # a trailing slash is no matter
    assert not cors.origin_allowed("https://evil.example.com", listed)
    assert not cors.origin_allowed("https://app.example.com.evil.io", listed)
    assert not cors.origin_allowed("http://app.example.com", listed)  # another scheme
    assert not cors.origin_allowed("null", listed)
    assert not cors.origin_allowed("https://app.example.com", [])
    assert cors.origin_allowed("https://anyone.io", ["*"])


def test_preflight_headers_echo_the_origin_with_the_routes_methods_and_no_credentials() -> None:
    headers = cors.preflight_headers("https://a.io", ["GET", "POST"])
    assert headers["Access-Control-Allow-Origin"] == "https://a.io"
    assert headers["Access-Control-Allow-Methods"] == "GET, POST"
    assert headers["Access-Control-Allow-Headers"] == (
        "Authorization, Content-Type, Accept, Last-Event-ID")
    assert int(headers["Access-Control-Max-Age"]) > 0
    assert "Access-Control-Allow-Credentials" not in headers
    actual = cors.response_headers("https://a.io")
    assert actual["Access-Control-Expose-Headers"] == "Retry-After, Content-Disposition"
    assert actual["Vary"] == "Origin" and "Access-Control-Allow-Credentials" not in actual


def test_route_methods_are_those_of_every_route_serving_the_path() -> None:
    async def endpoint() -> None:
        return None

    routes = [Route("/{app}/autocrud/{table}", endpoint, methods=["GET", "POST"]),
              Route("/{app}/autocrud/{table}", endpoint, methods=["PATCH", "DELETE"]),
              Route("/{app}/autocrud/{table}/{uid}", endpoint, methods=["GET"])]
    assert cors.route_methods(routes, "/shop/autocrud/invoices") == ["DELETE", "GET", "PATCH",
                                                                     "POST"]
    assert cors.route_methods(routes, "/shop/autocrud/invoices/0199") == ["GET"]
    assert cors.route_methods(routes, "/shop/nothing") == []
