"""`/console/`: the built console served by the server itself.

Caller: a browser with no token (the console's files are public; its data needs the admin token).
"""

from __future__ import annotations

import re

import httpx

from tests.servers import ServerProcess


def test_a_browser_gets_the_console_page_and_its_hashed_assets(http: httpx.Client) -> None:
    page = http.get("/console/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<title>Authoric console</title>" in page.text
    asset = re.search(r'src="(/console/assets/[^"]+\.js)"', page.text)
    assert asset, page.text
    script = http.get(asset.group(1))
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert "immutable" in script.headers["cache-control"]


def test_a_reload_on_a_client_side_route_gets_the_same_page(http: httpx.Client) -> None:
    assert http.get("/console/apps/shop/data/invoices").text == http.get("/console/").text
    redirect = http.get("/console", follow_redirects=False)
    assert redirect.status_code == 308
    assert redirect.headers["location"] == "/console/"


def test_a_missing_asset_or_a_path_outside_the_console_gets_the_contract_404(http: httpx.Client) -> None:
    for path in ["/console/assets/gone-1234.js", "/no-such-app/console"]:
        response = http.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "NOT_FOUND", path


def test_a_path_climbing_out_of_the_build_never_serves_that_file(http: httpx.Client) -> None:
    response = http.get("/console/%2e%2e/%2e%2e/%2e%2e/pyproject.toml")
    assert "[project]" not in response.text
    assert response.text == http.get("/console/").text


def test_console_is_not_a_name_an_app_can_take(http: httpx.Client, server: ServerProcess) -> None:
    response = http.post("/admin/apps", json={"name": "console"},
                         headers={"Authorization": f"Bearer {server.admin_token}"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "VALIDATION_FAILED"
