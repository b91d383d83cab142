"""The SSRF rules of webhook delivery (webhooks/targets.py), with an injected resolver: a
name resolved on every attempt, private answers refused, and the connection made to the
address just checked, with the name in the Host header.
And the kept connections (webhooks/connections.py): reused per host while the receiver keeps
them, a new one once it closed its end; and a response read up to 4 KiB of its body."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from authoric.errors import ValidationFailed
from authoric.webhooks.connections import BODY_LIMIT, Host, exchange, opened
from authoric.webhooks.targets import (
    PinnedTransport,
    TargetRefused,
    check_url,
    refusal,
    split_target,
)


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.1", "172.16.0.1", "192.168.1.1",
                                     "169.254.169.254", "0.0.0.0", "::1", "::", "fe80::1",
                                     "fd00:ec2::254", "::ffff:127.0.0.1", "::ffff:8.8.8.8",
                                     "224.0.0.1",
                                     # shared space (CGNAT; a cloud's metadata service),
                                     # documentation, benchmarking, site-local, NAT64 of
                                     # loopback and of a private address
                                     "100.64.0.1", "100.100.100.200", "192.0.2.1",
                                     "198.18.0.1", "fec0::1", "64:ff9b::7f00:1",
                                     "64:ff9b::a00:1"])
def test_a_private_or_mapped_address_is_refused(address: str) -> None:
    assert refusal(address) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111",
                                     "64:ff9b::808:808"])  # NAT64 of a public address
def test_a_public_address_is_allowed(address: str) -> None:
    assert refusal(address) is None


@pytest.mark.parametrize("url", ["http://8.8.8.8\t/hook", "http://8.8.8.8/ho ok",
                                 "http://8.8.8.8/\x00", "http://[8.8.8.8/"])
def test_a_url_httpx_would_not_send_as_written_is_refused(url: str) -> None:
    with pytest.raises(ValidationFailed):
        split_target(url)


@pytest.mark.parametrize("host", ["a..b", "x" * 64 + ".example.com"])
def test_a_host_name_no_resolver_accepts_is_refused_not_an_error(host: str) -> None:
    with pytest.raises(ValidationFailed, match="refused"):
        asyncio.run(check_url(f"http://{host}/hook", False))


def test_only_http_and_https_urls_with_a_host_are_targets() -> None:
    assert split_target("https://example.com/x") == ("https", "example.com", 443)
    assert split_target("http://[::1]:8080/") == ("http", "::1", 8080)
    for url in ("ftp://example.com/", "http:///x", "http://a:b@example.com/", "http://x:99999/"):
        with pytest.raises(ValidationFailed):
            split_target(url)


@pytest.fixture
def local_server() -> Iterator[tuple[int, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def _post(transport: PinnedTransport, url: str) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport) as client:
            return await client.post(url, content=b"{}")
    return asyncio.run(go())


def test_a_name_that_resolves_to_loopback_is_refused_at_delivery(
        local_server: tuple[int, list[dict[str, str]]]) -> None:
    port, seen = local_server

    async def to_loopback(host: str, _: int) -> list[str]:
        return ["127.0.0.1"]

    with pytest.raises(TargetRefused, match="loopback"):
        _post(PinnedTransport(to_loopback), f"http://receiver.example:{port}/")
    with pytest.raises(TargetRefused, match="IPv4-mapped"):
        _post(PinnedTransport(to_loopback), f"http://[::ffff:127.0.0.1]:{port}/")
    assert seen == []


def test_a_name_is_resolved_on_every_attempt_so_a_rebinding_is_refused(
        local_server: tuple[int, list[dict[str, str]]]) -> None:
    port, seen = local_server
    answers = iter([["8.8.8.8"], ["127.0.0.1"]])
    asked: list[str] = []

    async def rebinding(host: str, _: int) -> list[str]:
        asked.append(host)
        return next(answers)

    transport = PinnedTransport(rebinding)

    async def twice() -> list[Any]:
        out: list[Any] = []
        async with httpx.AsyncClient(transport=transport, timeout=0.5) as client:
            for _ in range(2):
                try:
                    out.append(await client.post(f"http://rebind.example:{port}/", content=b""))
                except Exception as exc:  # the first goes to 8.8.8.8 and times out
                    out.append(type(exc))
        return out

    results = asyncio.run(twice())
    assert asked == ["rebind.example", "rebind.example"]
    assert results[1] is TargetRefused and seen == []


def test_the_connection_goes_to_the_address_just_resolved_with_the_names_host_header(
        local_server: tuple[int, list[dict[str, str]]]) -> None:
    port, seen = local_server

    async def to_loopback(host: str, _: int) -> list[str]:
        return ["127.0.0.1"]

    response = _post(PinnedTransport(to_loopback, allow_private=True),
                     f"http://receiver.example:{port}/hook")
    assert response.status_code == 204
    assert seen[0]["host"] == f"receiver.example:{port}"


def test_a_redirect_is_not_followed() -> None:
    async def go() -> httpx.Response:
        async def to_loopback(host: str, _: int) -> list[str]:
            return ["127.0.0.1"]

        seen: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                seen.append(self.path)
                self.send_response(302)
                self.send_header("location", "/elsewhere")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            async with httpx.AsyncClient(transport=PinnedTransport(to_loopback, True)) as client:
                response = await client.post(f"http://r.example:{server.server_address[1]}/a")
        finally:
            server.shutdown()
            server.server_close()
        assert seen == ["/a"]
        return response

    assert asyncio.run(go()).status_code == 302


class KeepAlive:
    """An HTTP/1.1 receiver on loopback that keeps connections open (as most do): counts the
    connections it accepted and the requests it answered; `close_after` ends each connection
    after that many answers."""

    def __init__(self, close_after: int = 0) -> None:
        self.connections = 0
        self.answered = 0
        self.close_after = close_after
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                self.answered += 1
                served += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
                if self.close_after and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


async def _statuses(transport: PinnedTransport, url: str, count: int) -> list[int]:
    out = []
    for _ in range(count):
        response = await transport.handle_async_request(httpx.Request("POST", url, content=b"{}"))
        body = b"".join([chunk async for chunk in response.aiter_raw()])
        await response.aclose()
        assert body == b"ok"
        out.append(response.status_code)
        await asyncio.sleep(0.05)  # a receiver's close, if any, is seen before the next
    return out


def test_deliveries_to_one_host_reuse_its_kept_connection() -> None:
    async def go() -> tuple[list[int], int]:
        receiver = KeepAlive()
        port = await receiver.start()
        transport = PinnedTransport(allow_private=True)
        try:
            return await _statuses(transport, f"http://127.0.0.1:{port}/hook", 5), \
                receiver.connections
        finally:
            await transport.aclose()
            await receiver.stop()

    statuses, connections = asyncio.run(go())
    assert statuses == [200] * 5 and connections == 1


def test_a_connection_the_receiver_closed_is_not_reused() -> None:
    async def go() -> tuple[list[int], int]:
        receiver = KeepAlive(close_after=2)
        port = await receiver.start()
        transport = PinnedTransport(allow_private=True)
        try:
            return await _statuses(transport, f"http://127.0.0.1:{port}/hook", 5), \
                receiver.connections
        finally:
            await transport.aclose()
            await receiver.stop()

    statuses, connections = asyncio.run(go())
    assert statuses == [200] * 5 and connections == 3


HUGE = 1 << 20  # a receiver answering a delivery with a megabyte


def test_a_receiver_answering_a_megabyte_has_only_4_kib_of_its_body_read() -> None:
    """Contract section 8: responses are read up to 4 KiB. What the delivery read of the
    connection's stream is the head and 4 KiB of the body: the rest is all still there."""
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {HUGE}\r\n\r\n".encode()

    async def go() -> tuple[int, int, int]:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)
            writer.write(head + b"x" * HUGE)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = int(server.sockets[0].getsockname()[1])
        host = Host("http", "127.0.0.1", port)
        request = httpx.Request("POST", f"http://127.0.0.1:{port}/hook", content=b"{}")
        try:
            conn = await opened(host, "127.0.0.1", request, None)
            response = await exchange(host, conn, request)
            # The body's own iteration: httpx's `aiter_raw` would close the connection after it.
            body = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
            left = 0
            while chunk := await conn.reader.read(1 << 16):
                left += len(chunk)
            await response.aclose()
            return response.status_code, len(body), left
        finally:
            server.close()

    status, body, left = asyncio.run(go())
    assert (status, body) == (200, BODY_LIMIT)
    assert left == HUGE - BODY_LIMIT  # nothing of the body beyond the limit was taken


def test_a_connection_whose_answer_was_cut_at_4_kib_is_not_reused() -> None:
    """A delivery answered with a megabyte succeeds; the next opens a new connection, since
    the rest of that answer still stands in the old one."""

    class Chatty(KeepAlive):
        async def _serve(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                while True:
                    await reader.readuntil(b"\r\n\r\n")
                    await reader.readexactly(2)
                    self.answered += 1
                    writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {HUGE}\r\n\r\n".encode()
                                 + b"x" * HUGE)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            writer.close()

    async def go() -> tuple[list[int], int]:
        receiver = Chatty()
        port = await receiver.start()
        transport = PinnedTransport(allow_private=True)
        statuses = []
        try:
            for _ in range(3):
                response = await transport.handle_async_request(
                    httpx.Request("POST", f"http://127.0.0.1:{port}/hook", content=b"{}"))
                body = b"".join([chunk async for chunk in response.aiter_raw()])
                await response.aclose()
                assert len(body) == BODY_LIMIT
                statuses.append(response.status_code)
            return statuses, receiver.connections
        finally:
            await transport.aclose()
            await receiver.stop()

    statuses, connections = asyncio.run(go())
    assert statuses == [200] * 3 and connections == 3
