"""The delivery worker's POST (webhooks/worker.py `delivery_request`): what the receiver gets
is what httpx's own `content=` request would send. Caller: the worker, on every attempt."""

from __future__ import annotations

import httpx

from authoric.webhooks.worker import TIMEOUT, delivery_request

HEADERS = {"content-type": "application/json", "webhook-id": "42",
           "webhook-timestamp": "1700000000", "webhook-signature": "v1,c2lnbmF0dXJl"}
BODY = b'{"type":"insert","position":"42"}'


def sent(request: httpx.Request) -> tuple[str, bytes, list[tuple[bytes, bytes]], bytes]:
    return (request.method, request.url.raw_path,
            sorted((k.lower(), v) for k, v in request.headers.raw), request.read())


def test_the_worker_sends_what_httpx_would_send_for_the_same_post() -> None:
    for url in ("https://hooks.example.com/in?team=7", "http://127.0.0.1:8080/hook",
                "https://[2001:db8::1]:8443/a%20b"):
        expected = httpx.Request("POST", url, content=BODY, headers=HEADERS)
        assert sent(delivery_request({}, url, HEADERS, BODY)) == sent(expected)


def test_the_worker_parses_each_target_once_and_bounds_only_the_connect_itself() -> None:
    urls: dict[str, httpx.URL] = {}
    first = delivery_request(urls, "https://hooks.example.com/in", HEADERS, BODY)
    second = delivery_request(urls, "https://hooks.example.com/in", HEADERS, b"{}")
    assert list(urls) == ["https://hooks.example.com/in"]
    assert second.headers["content-length"] == "2"
    # Reads are bounded by the attempt's own timeout (the worker's `asyncio.timeout`).
    assert first.extensions["timeout"] == {"connect": TIMEOUT, "read": None}


def test_a_url_httpx_refuses_raises_so_the_attempt_fails() -> None:
    try:
        delivery_request({}, "http://[::1/hook", HEADERS, BODY)
    except httpx.InvalidURL:
        return
    raise AssertionError("an invalid URL was accepted")
