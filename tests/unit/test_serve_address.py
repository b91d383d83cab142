"""What `authoric serve` prints and checks before it starts: an address people can open, and
a taken port refused up front with a way out."""

from __future__ import annotations

import socket

from authoric.cli import announced_base, listen_refusal


def test_an_operator_serving_on_every_interface_is_shown_localhost_not_0_0_0_0() -> None:
    assert announced_base("0.0.0.0", 8000) == "http://localhost:8000"
    assert announced_base("::", 8001) == "http://localhost:8001"


def test_an_operator_serving_on_one_address_is_shown_that_address() -> None:
    assert announced_base("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert announced_base("::1", 8000) == "http://[::1]:8000"


def test_an_operator_behind_a_proxy_is_shown_the_public_url_they_set() -> None:
    assert announced_base("0.0.0.0", 8000, "http://localhost:9000/") == "http://localhost:9000"


def test_an_operator_whose_port_is_held_is_told_which_and_offered_the_next() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        refusal = listen_refusal("127.0.0.1", port)
    assert refusal is not None
    assert refusal.startswith(f"cannot listen on 127.0.0.1:{port}")
    assert f"--port {port + 1}" in refusal


def test_an_operator_whose_port_is_free_is_not_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert listen_refusal("127.0.0.1", port) is None
