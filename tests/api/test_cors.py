"""Browsers calling an app from its own origin: CORS per app (contract section 2,
`settings.allowedOrigins`), over real HTTP.

Callers: a page on an allowed origin (preflight without a token, then the real request with
one), a page on an origin the app does not list, any origin when the app allows `*`, and pages
trying the platform's `/admin` routes. A browser decides from these headers alone; here the
tests read the headers a browser would read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient

ALLOWED = "http://app.example.test:5173"
OTHER = "http://evil.example.test"
CORS_HEADERS = ("access-control-allow-origin", "access-control-allow-methods",
                "access-control-allow-headers", "access-control-expose-headers",
                "access-control-max-age", "access-control-allow-credentials")


@pytest.fixture
def site(world: AppWorld) -> AppWorld:
    world.table("invoices", [{"name": "number", "type": "text", "required": True}])
    world.role("clerk", ["invoices:*"])
    allow(world, [ALLOWED])
    return world


def allow(world: AppWorld, origins: list[str]) -> None:
    body = expect(world.admin.patch(world.base, json={"settings": {"allowedOrigins": origins}}),
                  200)
    assert body["settings"]["allowedOrigins"] == origins


def preflight(client: httpx.Client, path: str, origin: str, method: str = "GET",
              headers: str = "authorization") -> httpx.Response:
    return client.options(path, headers={"Origin": origin,
                                         "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": headers})


def no_cors(response: httpx.Response | httpx.Headers) -> bool:
    headers = response.headers if isinstance(response, httpx.Response) else response
    return not any(name in headers for name in CORS_HEADERS)


def methods(response: httpx.Response) -> set[str]:
    return {m.strip() for m in response.headers["access-control-allow-methods"].split(",")}


@pytest.mark.parametrize("route, expected", [
    ("/{app}/autocrud/invoices", {"GET", "POST", "PATCH", "DELETE"}),
    ("/{app}/autocrud/invoices/0199aaaa-0000-7000-8000-000000000000", {"GET", "PATCH", "DELETE"}),
    ("/{app}/autocrud/invoices/import", {"POST"}),  # (also matches the `/{uid}` routes)
    ("/{app}/autocrud/invoices/subscribe", {"GET"}),
    ("/{app}/subscribe", {"GET"}),
    ("/{app}/auth/token", {"POST"}),
    ("/{app}/openapi.json", {"GET"}),
])
def test_page_on_an_allowed_origin_gets_its_preflight_answered_204_without_a_token(
        site: AppWorld, route: str, expected: set[str]) -> None:
    response = preflight(site.admin.client, route.format(app=site.name), ALLOWED,
                         headers="authorization, content-type, last-event-id")
    assert response.status_code == 204, response.text
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert expected <= methods(response) <= {"GET", "POST", "PATCH", "DELETE"}
    allowed_headers = {h.strip().lower() for h in
                       response.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "accept", "last-event-id"} <= allowed_headers
    assert int(response.headers["access-control-max-age"]) > 0
    assert "access-control-allow-credentials" not in response.headers
    assert "origin" in response.headers["vary"].lower()


def test_page_on_an_allowed_origin_reads_rows_errors_and_csv_with_the_cors_headers(
        site: AppWorld) -> None:
    org = site.org("Northwind")
    clerk = site.caller(org, ["clerk"])
    origin = {"Origin": ALLOWED}
    created = clerk.post(site.rows("invoices"), json={"number": "A-1"}, headers=origin)
    listed = clerk.get(site.rows("invoices"), headers=origin)
    exported = clerk.get(site.rows("invoices"), headers={**origin, "Accept": "text/csv"})
    unauthenticated = Caller(clerk.client).get(site.rows("invoices"), headers=origin)
    missing = clerk.get(f"{site.rows('invoices')}/0199aaaa-0000-7000-8000-000000000000",
                        headers=origin)
    token = clerk.client.post(f"/{site.name}/auth/token", headers=origin, json={
        "email": "nobody@example.com", "password": "wrong"})
    document = clerk.get(f"/{site.name}/openapi.json", headers=origin)
    for response, status in ((created, 201), (listed, 200), (exported, 200),
                             (unauthenticated, 401), (missing, 404), (token, 401),
                             (document, 200)):
        assert response.status_code == status, (response.request.url, response.text)
        assert response.headers["access-control-allow-origin"] == ALLOWED
        assert response.headers["access-control-expose-headers"] == (
            "Retry-After, Content-Disposition")
        assert "access-control-allow-credentials" not in response.headers
    assert "attachment" in exported.headers["content-disposition"]


@pytest.mark.parametrize("refusal", ["url_too_long", "body_declared_too_large",
                                     "body_streamed_too_large"])
def test_page_on_an_allowed_origin_can_read_a_table_routes_refusal_at_the_edge(
        site: AppWorld, refusal: str) -> None:
    """Refused before any route runs (http/front.py serves table requests in one layer): the
    page still gets the CORS headers, so the browser lets it read the error, and the request
    id, so an operator can find it."""
    clerk = site.caller(site.org("Northwind"), ["clerk"])
    headers = {"Origin": ALLOWED, "Content-Type": "application/json",
               "X-Request-ID": f"page-{refusal}"}
    over = json.dumps({"number": "x" * 1_100_000}).encode()  # the default limit is 1 MiB
    if refusal == "url_too_long":
        response = clerk.get(site.rows("invoices"), params={"number": "x" * 9000},
                             headers=headers)
        status, code = 400, "BAD_REQUEST"
    elif refusal == "body_declared_too_large":
        response = clerk.post(site.rows("invoices"), content=over, headers=headers)
        status, code = 413, "PAYLOAD_TOO_LARGE"
    else:
        response = clerk.post(site.rows("invoices"),
                              content=(over[i:i + 65536] for i in range(0, len(over), 65536)),
                              headers=headers)
        status, code = 413, "PAYLOAD_TOO_LARGE"
    expect(response, status, code)
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert "origin" in response.headers["vary"].lower()
    assert response.headers["x-request-id"] == f"page-{refusal}"
    assert expect(clerk.get(site.rows("invoices")), 200)["items"] == []


def test_page_on_an_allowed_origin_gets_the_cors_headers_on_its_event_stream(
        site: AppWorld) -> None:
    clerk = site.caller(site.org("Northwind"), ["clerk"])
    for path, params in ((f"{site.rows('invoices')}/subscribe", None),
                         (f"/{site.name}/subscribe", {"tables": "invoices"})):
        with SSEClient(site.server.url, path, clerk.token, params=params,
                       headers={"Origin": ALLOWED}) as stream:
            assert stream.status_code == 200
            assert stream.headers["access-control-allow-origin"] == ALLOWED
            assert "Retry-After" in stream.headers["access-control-expose-headers"]
            row = expect(clerk.post(site.rows("invoices"), json={"number": path}), 201)
            stream.wait_for_change(row["uid"])


def test_page_on_an_origin_the_app_does_not_list_gets_no_cors_header_at_all(
        site: AppWorld) -> None:
    clerk = site.caller(site.org("Northwind"), ["clerk"])
    assert no_cors(preflight(clerk.client, site.rows("invoices"), OTHER, "POST"))
    assert no_cors(clerk.get(site.rows("invoices"), headers={"Origin": OTHER}))
    with SSEClient(site.server.url, f"/{site.name}/subscribe", clerk.token,
                   params={"tables": "invoices"}, headers={"Origin": OTHER}) as stream:
        assert stream.status_code == 200 and no_cors(stream.headers)


def test_app_with_no_allowed_origins_opens_to_no_origin(world: AppWorld) -> None:
    world.table("invoices", [{"name": "number", "type": "text"}])
    assert expect(world.admin.get(world.base), 200)["settings"]["allowedOrigins"] == []
    assert no_cors(preflight(world.admin.client, world.rows("invoices"), ALLOWED))
    assert no_cors(world.admin.client.get(world.rows("invoices"), headers={"Origin": ALLOWED}))


def test_app_allowing_star_answers_any_origin_by_echoing_it(site: AppWorld) -> None:
    allow(site, ["*"])
    for origin in (OTHER, "http://127.0.0.1:4000"):
        response = preflight(site.admin.client, site.rows("invoices"), origin)
        assert response.status_code == 204
        assert response.headers["access-control-allow-origin"] == origin
        actual = site.admin.client.get(site.rows("invoices"), headers={"Origin": origin})
        assert actual.status_code == 401  # no token: the error is readable by the page
        assert actual.headers["access-control-allow-origin"] == origin
        assert "access-control-allow-credentials" not in actual.headers


@pytest.mark.parametrize("path", ["/admin/apps", "/admin/apps/{app}",
                                  "/admin/apps/{app}/tables/invoices/rows/subscribe",
                                  "/openapi.json"])
def test_admin_and_platform_routes_never_open_cross_origin_even_to_star(
        site: AppWorld, path: str) -> None:
    allow(site, ["*"])
    target = path.format(app=site.name)
    assert no_cors(preflight(site.admin.client, target, ALLOWED, "GET"))
    response = site.admin.get(target, headers={"Origin": ALLOWED})
    assert no_cors(response)


def test_request_without_origin_gets_no_cors_headers(site: AppWorld) -> None:
    assert no_cors(site.admin.client.get(site.rows("invoices")))


@pytest.fixture(scope="module")
def replica(database_url: str, data_dir: Path) -> Iterator[ServerProcess]:
    proc = start_server(database_url, data_dir)
    yield proc
    proc.stop()


def test_a_change_of_allowed_origins_applies_to_the_next_request_on_another_process(
        site: AppWorld, replica: ServerProcess) -> None:
    with httpx.Client(base_url=replica.url, timeout=30) as other:
        path = site.rows("invoices")
        assert preflight(other, path, ALLOWED).status_code == 204
        allow(site, [OTHER])  # through the first process
        assert no_cors(preflight(other, path, ALLOWED))
        assert preflight(other, path, OTHER).headers["access-control-allow-origin"] == OTHER
        allow(site, [])
        assert no_cors(preflight(other, path, OTHER))


@pytest.mark.parametrize("origins", [["not an origin"], ["https://x.io/path"], [""], "*", [1]])
def test_admin_setting_a_malformed_origin_list_gets_422_and_nothing_changes(
        site: AppWorld, origins: Any) -> None:
    response = site.admin.patch(site.base, json={"settings": {"allowedOrigins": origins}})
    expect(response, 422, "VALIDATION_FAILED")
    assert expect(site.admin.get(site.base), 200)["settings"]["allowedOrigins"] == [ALLOWED]
