"""What the serving layer (platform/authoric/serving) reaches for inside uvicorn and FastAPI
is still there, with the shape it uses. An upgrade of either that moves any of it fails here,
before a stream's direct writes quietly fall back to the slow path or a handed-over connection
is served by a protocol built the wrong way. The behaviour itself is exercised on a real
server by tests/unit/test_direct_frames.py and tests/unit/test_handoff.py."""

from __future__ import annotations

import asyncio
import inspect
import re
from importlib.metadata import version
from pathlib import Path

import uvicorn
from fastapi.routing import APIRoute
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
from uvicorn.server import ServerState
from uvicorn.supervisors import Multiprocess

from authoric.serving import FASTAPI_CHECKED, UVICORN_CHECKED
from authoric.serving.wire import CYCLE_STATE, chunked

LOCK = Path(__file__).resolve().parents[2] / "requirements.lock"


def assigned_in_init(cls: type, name: str) -> bool:
    return re.search(rf"self\.{name}\b\s*(:[^=\n]*)?=", inspect.getsource(cls.__init__)) is not None


def parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


async def noop_app(scope: object, receive: object, send: object) -> None:
    return None


def test_the_installed_server_and_framework_are_the_versions_the_serving_layer_was_checked_on() -> None:
    assert version("uvicorn") == UVICORN_CHECKED
    assert version("fastapi") == FASTAPI_CHECKED


def test_the_lock_pins_the_versions_the_serving_layer_was_checked_on() -> None:
    lock = LOCK.read_text()
    assert f"\nuvicorn=={UVICORN_CHECKED} " in lock
    assert f"\nfastapi=={FASTAPI_CHECKED} " in lock


def test_uvicorn_s_request_cycle_keeps_the_state_the_direct_writer_reads() -> None:
    assert inspect.iscoroutinefunction(RequestResponseCycle.send)
    assert {"transport", "flow"} <= set(parameters(RequestResponseCycle.__init__))
    missing = [name for name in CYCLE_STATE if not assigned_in_init(RequestResponseCycle, name)]
    assert missing == []
    assert assigned_in_init(FlowControl, "write_paused")


def test_a_chunk_is_framed_as_uvicorn_s_own_send_frames_a_chunked_body() -> None:
    source = inspect.getsource(RequestResponseCycle.send)
    assert 'b"%x\\r\\n"' in source or "b'%x\\r\\n'" in source
    assert chunked(b"frame") == b"5\r\nframe\r\n"


def test_uvicorn_s_config_and_server_state_still_build_the_protocol_a_handed_over_connection_gets() -> None:
    async def build() -> object:
        config = uvicorn.Config(noop_app, interface="asgi3", log_config=None,
                                proxy_headers=False, forwarded_allow_ips=None)
        config.load()
        state = ServerState()
        state.default_headers = list(config.encoded_headers)
        assert isinstance(state.connections, set)
        return config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=state, app_state={})

    protocol = asyncio.run(build())
    assert isinstance(protocol, asyncio.Protocol)
    assert callable(getattr(protocol, "data_received", None))
    assert callable(getattr(protocol, "shutdown", None))


def test_fastapi_still_builds_a_route_s_app_from_get_route_handler() -> None:
    assert parameters(APIRoute.get_route_handler) == ["self"]
    assert "self.get_route_handler()" in inspect.getsource(APIRoute.__init__)


def test_the_command_line_s_server_and_supervisor_take_what_authoric_serve_gives_them() -> None:
    assert parameters(Multiprocess.__init__)[1:3] == ["config", "sockets"]
    assert parameters(uvicorn.Server.__init__)[1:2] == ["config"]
    config = set(parameters(uvicorn.Config.__init__))
    assert {"app", "interface", "log_config", "proxy_headers", "forwarded_allow_ips",
            "factory", "host", "port", "workers", "log_level", "access_log",
            "timeout_graceful_shutdown", "timeout_worker_healthcheck"} <= config
