"""Webhook targets with private addresses refused (contract section 8), as an operator who has
not set AUTHORIC_WEBHOOK_ALLOW_PRIVATE runs the server.

Callers: the operator (admin token). Every refused target answers 422 and creates nothing.
The rules at delivery time (a name that resolves there later, DNS rebinding, the connection
to the address just checked) are in tests/unit/test_webhook_targets.py, with an injected
resolver.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.receivers import Receiver
from tests.scenario import AppWorld, expect
from tests.servers import ServerProcess, start_server


@pytest.fixture(scope="module")
def guarded_server(database_url: str, tmp_path_factory: pytest.TempPathFactory,
                   ) -> Iterator[ServerProcess]:
    proc = start_server(database_url, tmp_path_factory.mktemp("webhooks-ssrf"),
                        AUTHORIC_WEBHOOK_DELIVERY="true")
    yield proc
    proc.stop()


@pytest.fixture
def world(guarded_server: ServerProcess) -> Iterator[AppWorld]:
    with httpx.Client(base_url=guarded_server.url, timeout=30) as client:
        world = AppWorld.create(guarded_server, client)
        world.table("invoices", [{"name": "number", "type": "text"}])
        yield world


@pytest.mark.parametrize("url", [
    "http://localhost:{port}/hook",  # a host name that resolves to 127.0.0.1
    "http://127.0.0.1:{port}/hook",
    "http://[::ffff:127.0.0.1]:{port}/hook",  # IPv4-mapped IPv6
    "http://[::1]:{port}/hook",
    "http://10.1.2.3/hook",
    "http://192.168.0.10/hook",
    "http://169.254.169.254/latest/meta-data",  # the cloud metadata address
    "http://0.0.0.0:{port}/",
    "https://[fd00:ec2::254]/",
])
def test_operator_creating_a_webhook_to_a_private_address_gets_422(world: AppWorld,
                                                                   url: str) -> None:
    receiver = Receiver().start()
    try:
        port = receiver.url.rsplit(":", 1)[1].split("/")[0]
        body = {"url": url.format(port=port), "tables": ["invoices"]}
        expect(world.admin.post(f"{world.base}/webhooks", json=body), 422, "VALIDATION_FAILED")
        assert expect(world.admin.get(f"{world.base}/webhooks"), 200)["items"] == []
        assert receiver.received() == []
    finally:
        receiver.stop()


def test_operator_changing_a_webhooks_url_to_loopback_gets_422_and_it_keeps_its_url(
        world: AppWorld) -> None:
    # 192.0.2.1 (TEST-NET-1) is documentation space: Python calls it private; 8.8.8.8 is public.
    made = expect(world.admin.post(f"{world.base}/webhooks",
                                   json={"url": "http://8.8.8.8:9/hook", "tables": ["invoices"]}),
                  201)
    path = f"{world.base}/webhooks/{made['uid']}"
    try:
        expect(world.admin.patch(path, json={"status": "paused"}), 200)
        expect(world.admin.patch(path, json={"url": "http://localhost/x"}), 422,
               "VALIDATION_FAILED")
        assert expect(world.admin.get(path), 200)["url"] == "http://8.8.8.8:9/hook"
    finally:
        world.admin.delete(path)


def test_operator_creating_a_webhook_with_another_scheme_gets_422(world: AppWorld) -> None:
    for url in ("file:///etc/passwd", "gopher://example.com/", "http://", "http://u:p@example.com/"):
        expect(world.admin.post(f"{world.base}/webhooks",
                                json={"url": url, "tables": ["invoices"]}), 422,
               "VALIDATION_FAILED")
