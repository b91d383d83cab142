"""Streams of one org in one worker: a subscribe request is handed, connection and all, to the
worker whose slot its org falls in.

Why: with several workers, every worker that holds a stream of a change's org pays for the
change: the wake-up, the judge's statement and its reply, and its own socket writes
(docs/benchmarks-journal.md, section 16). The kernel hands each connection to a worker before a byte of
the request is read (SO_REUSEPORT, authoric/workers.py), so the streams of one org land on
every worker. Here they are gathered: each change of an org is judged by one worker, once.

How:
- `authoric serve` with N workers gives them a private directory. Each worker takes one of N
  slots there: an exclusive lock on `slot-<i>.lock`, held for its life (the kernel frees it
  when the worker dies, and the worker started in its place takes it). The holder of a slot
  receives on the Unix datagram socket `slot-<i>.sock`.
- A subscribe request whose bearer token names an org is due to slot `crc32(org) mod N`.
  When that is another worker's, this worker sends it the connection's file descriptor
  (SCM_RIGHTS) with the request's head, and closes its own copy without writing a byte. The
  receiver serves the connection as if it had accepted it: uvicorn's own HTTP protocol, the
  same application, and the same keep-alive afterwards.

Routing saves work; it is never a condition for serving. Every worker can serve every stream:
when the slot's worker is down, has not taken its slot yet or lets its queue stay full, the
worker that received the request serves it itself, as without routing. The org is read from
the token unverified: it only picks the worker, which then authenticates the request as any
other, so a forged token can choose no more than which worker refuses it. Not routed: the
operator's feed (`/admin/...`, every org), requests without a bearer token, requests with a
body (this worker may have read part of it), and requests over TLS terminated in this
server (an encrypted connection cannot change hands; Authoric serves plain HTTP behind a
proxy that terminates TLS).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import logging
import os
import socket
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
from starlette.datastructures import State
from starlette.types import ASGIApp, Receive, Scope, Send

from authoric.auth.principals import bearer
from authoric.errors import Unauthenticated
from authoric.observability.metrics import Metrics
from authoric.serving.wire import transport_of
from authoric.settings import Settings

log = logging.getLogger("authoric.handoff")
MAX_HEAD = 65_536  # bytes of request head handed on; a longer head is served where it came in
PATIENCE = 1.0  # seconds a full queue of the slot's worker is waited out before serving here
RETAKE = 1.0  # seconds between tries to take a slot while all are held
BODY_HEADERS = (b"content-length", b"transfer-encoding")


def stream_org(scope: Scope) -> str | None:
    """The org named by a subscribe request's bearer token, unverified (it picks a worker, and
    grants nothing); None for every other request and for the operator's feed."""
    path: str = scope["path"]
    if scope["method"] != "GET" or not path.endswith("/subscribe") or path.startswith("/admin/"):
        return None
    org = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            org = _org_claim(value)
        elif name in BODY_HEADERS and value.strip() != b"0":
            # A body, part of which this worker may have read already: the request stays here,
            # where the route answers it as without routing.
            return None
    return org


def _org_claim(authorization: bytes) -> str | None:
    try:
        token = bearer(authorization.decode("latin-1"))
        claims = jwt.decode(token, options={"verify_signature": False})
    except (Unauthenticated, jwt.InvalidTokenError):
        return None
    org = claims.get("org")
    return org if isinstance(org, str) else None


def slot_of(org: str, slots: int) -> int:
    """The slot an org's streams are served from: the same in every worker (a stable hash)."""
    return zlib.crc32(org.encode()) % slots


def request_head(scope: Scope) -> bytes:
    """The request's head as the client sent it (a subscribe request has no body), for the
    worker that takes the connection over to read."""
    target = scope.get("raw_path") or scope["path"].encode()
    if scope["query_string"]:
        target += b"?" + scope["query_string"]
    lines = [b"%s %s HTTP/%s" % (scope["method"].encode(), target,
                                 scope["http_version"].encode())]
    lines += [name + b": " + value for name, value in scope["headers"]]
    return b"\r\n".join(lines) + b"\r\n\r\n"


class Handoff:
    """This worker's slot, the socket it receives connections on, and the sending half."""

    def __init__(self, directory: Path, slots: int, app: ASGIApp, settings: Settings,
                 metrics: Metrics) -> None:
        self.directory, self.slots, self.metrics = directory, slots, metrics
        self.slot: int | None = None
        self._app, self._settings = app, settings
        self._lock: int | None = None
        self._inbox: socket.socket | None = None
        self._outbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._outbox.setblocking(False)
        self._retake: asyncio.Task[None] | None = None
        self._serving: set[asyncio.Task[None]] = set()
        self._protocol: Callable[[], asyncio.Protocol] | None = None
        self._connections: set[Any] = set()

    # --- the receiving half ------------------------------------------------------------------

    def start(self) -> None:
        self._protocol = self._protocol_factory()
        if not self._take_slot():
            self._retake = asyncio.get_running_loop().create_task(self._take_later())

    def stop(self) -> None:
        if self._retake is not None:
            self._retake.cancel()
        if self._inbox is not None:
            asyncio.get_running_loop().remove_reader(self._inbox.fileno())
            self._inbox.close()
            with contextlib.suppress(OSError):
                os.unlink(self._slot_path("sock"))
        if self._lock is not None:
            os.close(self._lock)  # frees the slot for the worker started in this one's place
        self._outbox.close()
        for protocol in list(self._connections):
            protocol.shutdown()  # as uvicorn does to the connections it accepted

    def _slot_path(self, kind: str, slot: int | None = None) -> str:
        return str(self.directory / f"slot-{self.slot if slot is None else slot}.{kind}")

    def _take_slot(self) -> bool:
        for slot in range(self.slots):
            fd = os.open(self._slot_path("lock", slot), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                self._listen(slot)
            except OSError as exc:
                # Nobody can hand this worker a stream: the others serve this slot's orgs
                # themselves, as they do while it is free.
                os.close(fd)
                log.warning("not receiving streams of slot %d: %s", slot, exc)
                return True
            self._lock, self.slot = fd, slot
            log.info("serving the streams of slot %d of %d", slot, self.slots)
            return True
        return False

    async def _take_later(self) -> None:
        # All slots held: a worker restarted before the one it replaces had quite gone.
        while not self._take_slot():
            await asyncio.sleep(RETAKE)

    def _listen(self, slot: int) -> None:
        path = self._slot_path("sock", slot)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # the socket of this slot's previous holder, which is gone
        inbox = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        inbox.bind(path)
        inbox.setblocking(False)
        self._inbox = inbox
        asyncio.get_running_loop().add_reader(inbox.fileno(), self._received)

    def _protocol_factory(self) -> Callable[[], asyncio.Protocol]:
        """uvicorn's HTTP protocol, configured as `authoric serve` configures the server's."""
        import uvicorn
        from uvicorn.server import ServerState

        trusted = self._settings.trusted_proxies.strip()
        config = uvicorn.Config(self._app, interface="asgi3", log_config=None,
                                proxy_headers=bool(trusted),
                                forwarded_allow_ips=trusted or None)
        config.load()
        state = ServerState()
        # The server header, as the worker's server sends it (its date header, refreshed by
        # that server's clock tick, is left out).
        state.default_headers = list(config.encoded_headers)
        self._connections = state.connections

        def protocol() -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=state, app_state={})

        return protocol

    def _received(self) -> None:
        assert self._inbox is not None
        while True:
            try:
                head, fds, flags, _ = socket.recv_fds(self._inbox, MAX_HEAD, 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.exception("receiving a handed-over stream failed")
                return
            if len(fds) != 1 or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                for fd in fds:
                    os.close(fd)
                continue
            task = asyncio.get_running_loop().create_task(self._serve(fds[0], head))
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)

    async def _serve(self, fd: int, head: bytes) -> None:
        assert self._protocol is not None
        try:
            connection = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)  # not a socket: nothing a worker of ours sends
            return
        try:
            connection.setblocking(False)
            _, protocol = await asyncio.get_running_loop().connect_accepted_socket(
                self._protocol, connection)
        except OSError:
            connection.close()  # the client left while the connection changed hands
            return
        protocol.data_received(head)

    # --- the sending half --------------------------------------------------------------------

    async def hand_over(self, scope: Scope, send: Send) -> bool:
        """Whether the request's connection went to the worker of its org's slot (then this
        worker has closed its copy and must not answer)."""
        org = stream_org(scope)
        if org is None:
            return False
        slot = slot_of(org, self.slots)
        transport = transport_of(send)
        if slot == self.slot or transport is None or transport.get_extra_info("sslcontext"):
            return False
        sock = transport.get_extra_info("socket")
        head = request_head(scope)
        if sock is None or transport.is_closing() or len(head) > MAX_HEAD:
            return False
        # A descriptor of our own for the connection, taken before anything is awaited: the
        # transport's may be closed meanwhile, and its number given to another socket.
        fd = os.dup(sock.fileno())
        try:
            sent = await self._send(slot, head, fd)
        finally:
            os.close(fd)
        self.metrics.stream_handoffs.labels("sent" if sent else "kept").inc()
        if sent:
            transport.close()  # closes this worker's descriptor only: the receiver holds one
        return sent

    async def _send(self, slot: int, head: bytes, fd: int) -> bool:
        loop = asyncio.get_running_loop()
        deadline, wait = loop.time() + PATIENCE, 0.001
        while True:
            try:
                # socket.send_fds would drop the address (Python 3.11), hence sendmsg.
                self._outbox.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                               array.array("i", [fd]))],
                                   0, self._slot_path("sock", slot))
                return True
            except BlockingIOError:  # the slot's worker has a full queue: wait it out, briefly
                if loop.time() + wait > deadline:
                    return False
                await asyncio.sleep(wait)
                wait = min(2 * wait, 0.05)
            except OSError:  # nobody holds the slot (gone, or not started yet)
                return False


async def until_disconnected(receive: Receive) -> None:
    """Wait for uvicorn to notice the connection this worker closed, so that it answers
    nothing (an application that returns before its response starts would get a 500)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def handed_over(state: State, scope: Scope, receive: Receive, send: Send) -> bool:
    """Whether a request (one not taken by the table routes) was a stream due to another
    worker's slot and went to it; then nothing more is to be done with it here."""
    if not scope["path"].endswith("/subscribe"):
        return False
    handoff: Handoff | None = getattr(state, "handoff", None)
    if handoff is None or not await handoff.hand_over(scope, send):
        return False
    await until_disconnected(receive)
    return True


def start_handoff(settings: Settings, app: ASGIApp, metrics: Metrics) -> Handoff | None:
    """This worker's part in routing streams by org, when `authoric serve` runs several
    workers and routing is on (`AUTHORIC_STREAM_ROUTING`); else None."""
    directory, slots = settings.stream_handoff_dir, settings.workers or 1
    if settings.stream_routing != "org" or directory is None or slots < 2:
        return None
    handoff = Handoff(directory, slots, app, settings, metrics)
    try:
        handoff.start()
    except OSError as exc:  # the directory is gone or not ours: serve every stream here
        log.warning("streams are not routed by org: %s", exc)
        handoff.stop()
        return None
    return handoff
