"""`AUTHORIC_TRUSTED_PROXIES` (issue 19): X-Forwarded-For names the client only when the
peer is a trusted proxy, and no proxy is trusted by default.

Callers: a password guesser on the loopback network who writes a new X-Forwarded-For on
every attempt, against a server that trusts no proxy and one that trusts 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.scenario import AppWorld, unique
from tests.servers import ServerProcess, start_server

PER_CLIENT = 3


def _server(database_url: str, tmp: pytest.TempPathFactory, **env: str) -> ServerProcess:
    return start_server(database_url, tmp.mktemp("proxies"), AUTHORIC_TOKEN_RATE_LIMIT=str(PER_CLIENT),
                        AUTHORIC_RATE_LIMIT_WINDOW="3600", **env)


@pytest.fixture(scope="module")
def servers(database_url: str, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    default = _server(database_url, tmp_path_factory)
    try:
        behind_proxy = _server(database_url, tmp_path_factory, AUTHORIC_TRUSTED_PROXIES="127.0.0.1")
        try:
            yield default, behind_proxy
        finally:
            behind_proxy.stop()
    finally:
        default.stop()


def _spoofing_guesses(server: ServerProcess) -> list[int]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        world = AppWorld.create(server, client)
        return [client.post(f"/{world.name}/auth/token",
                            json={"email": f"{unique('g')}@x.io", "password": "guess"},
                            headers={"X-Forwarded-For": f"203.0.113.{n}"}).status_code
                for n in range(PER_CLIENT + 1)]


def test_guesser_rewriting_x_forwarded_for_is_one_client_when_no_proxy_is_trusted(
        servers: tuple[ServerProcess, ServerProcess]) -> None:
    assert _spoofing_guesses(servers[0]) == [401] * PER_CLIENT + [429]


def test_behind_a_trusted_proxy_each_forwarded_address_is_its_own_client(
        servers: tuple[ServerProcess, ServerProcess]) -> None:
    assert _spoofing_guesses(servers[1]) == [401] * (PER_CLIENT + 1)
