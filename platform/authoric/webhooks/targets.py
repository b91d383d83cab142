"""Where a delivery may go, and an HTTP transport that goes exactly there (SSRF).

A webhook's host is resolved on every attempt, and every address it resolves to must be
public: loopback, private, link-local, unspecified, multicast, reserved and IPv4-mapped IPv6
addresses are refused (the cloud metadata addresses 169.254.169.254 and fd00:ec2::254 are in
those ranges), unless the operator set `AUTHORIC_WEBHOOK_ALLOW_PRIVATE=true`. The connection
then goes to the address just checked: the request's URL names the address, its Host header
and TLS SNI the name, so nothing resolves the name a second time and a DNS answer that
changes between the check and the connection (rebinding) cannot steer it. Redirects are not
followed (httpx does not by default; a 3xx is a failed delivery).

Each host gets its own pool of keep-alive connections (webhooks/connections.py), keyed by
scheme, name and port; a connection is reused only for the address it was opened to, so a host
whose address changed gets a new connection.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import httpx

from authoric.errors import ValidationFailed
from authoric.webhooks.connections import Host, exchange, opened

Resolve = Callable[[str, int], Awaitable[list[str]]]
SCHEMES = {"http": 80, "https": 443}


class TargetRefused(Exception):
    """The URL may not be delivered to (its message says why; it holds no secret)."""


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to now (the system resolver)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # well-known prefix: an IPv4 address inside


@functools.lru_cache(maxsize=4096)  # a pure judgement of a string, asked on every attempt
def refusal(address: str) -> str | None:
    """Why a delivery to `address` is refused, or None for a public address. Only globally
    routable unicast addresses pass: shared (100.64.0.0/10), documentation, benchmarking and
    site-local space is as internal to some network as private space is."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped or ip.sixtofour:
            return "an IPv4-mapped or 6to4 IPv6 address"
        if ip in NAT64:  # judged as the IPv4 address a NAT64 gateway would reach
            inner = refusal(str(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
            return None if inner is None else f"a NAT64 address of {inner}"
        if ip.is_site_local:
            return "a site-local address"
    for attribute in ("is_loopback", "is_private", "is_link_local", "is_unspecified",
                      "is_multicast", "is_reserved"):
        if getattr(ip, attribute):
            return f"a {attribute.removeprefix('is_').replace('_', '-')} address"
    if not ip.is_global:
        return "an address that is not globally routable"
    return None


def split_target(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a webhook URL; ValidationFailed for anything but an http(s) URL
    that httpx sends as written (no whitespace or control characters that a parser would
    strip or refuse later, at delivery)."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValidationFailed("the url may not contain spaces or control characters",
                               {"url": url})
    try:
        parts = urlsplit(url)
        port = parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise ValidationFailed("the url is not a URL", {"url": url}) from exc
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ValidationFailed("the url must be http:// or https:// with a host", {"url": url})
    if parts.username or parts.password:
        raise ValidationFailed("the url may not carry credentials", {"url": "userinfo"})
    return parts.scheme, parts.hostname, port or SCHEMES[parts.scheme]


async def check_url(url: str, allow_private: bool, resolve: Resolve = resolve_host) -> None:
    """422 for a URL that is not http(s), or whose host resolves (now) where deliveries may
    not go: what an operator is told when creating or changing a webhook."""
    _, host, port = split_target(url)
    try:
        await checked_address(host, port, resolve, allow_private)
    except TargetRefused as exc:
        raise ValidationFailed(f"the url is refused: {exc}", {"url": url}) from exc


async def checked_address(host: str, port: int, resolve: Resolve, allow_private: bool) -> str:
    """The address to connect to: `host` resolved now, every answer checked."""
    try:
        addresses = [host.strip("[]")] if _is_address(host) else await resolve(host, port)
    except (OSError, UnicodeError, ValueError) as exc:  # a label too long or empty: no name
        raise TargetRefused(f"{host} does not resolve") from exc
    if not addresses:
        raise TargetRefused(f"{host} does not resolve")
    if not allow_private:
        for address in addresses:
            why = refusal(address)
            if why is not None:
                raise TargetRefused(f"{host} resolves to {why}")
    return addresses[0]


@functools.lru_cache(maxsize=4096)  # parsing the host is a tenth of an attempt's checks
def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to the address its host resolves to right now, if allowed."""

    def __init__(self, resolve: Resolve = resolve_host, allow_private: bool = False) -> None:
        self.resolve, self.allow_private = resolve, allow_private
        self.hosts: dict[tuple[str, str, int], Host] = {}
        self._tls: ssl.SSLContext | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme, name = url.scheme, url.host
        port = url.port or SCHEMES.get(scheme, 0)
        if scheme not in SCHEMES:
            raise TargetRefused(f"scheme {scheme!r} is not http or https")
        address = await checked_address(name, port, self.resolve, self.allow_private)
        host = self.hosts.get((scheme, name, port))
        if host is None:
            host = self.hosts[(scheme, name, port)] = Host(scheme, name, port)
        # The Host header was set from the name when the request was built; the connection
        # goes to the checked address, with no second lookup.
        conn = host.take(address)
        if conn is None:
            conn = await opened(host, address, request, self._context() if scheme == "https"
                                else None)
        return await exchange(host, conn, request)

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    async def aclose(self) -> None:
        for host in self.hosts.values():
            host.close()
        self.hosts.clear()
