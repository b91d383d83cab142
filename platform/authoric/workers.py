"""`authoric serve` with several worker processes: each worker listens on a socket of its own.

uvicorn's supervisor binds one socket and every worker accepts from it. uvloop's libuv takes
every pending connection when the socket wakes it, so the worker that wakes first can take a
whole burst of clients: `bench.peers` saw wrk's 50 connections split 50/0, 47/3 and 44/6
over two workers, one answering everything at twice the latency while the other idled. Here
every worker binds its own socket with `SO_REUSEPORT` on the same address, and the kernel
spreads new connections over them by hash.

The supervisor stays uvicorn's (restarts, signals, health checks). It hands each worker the
"socket" below, which is the parent's bound, never-listening socket (it holds the address
and learns a port 0), and which unpickles in the worker as a fresh socket bound to the same
address. A bound socket that does not listen receives no connections.
"""

from __future__ import annotations

import socket
from typing import Any


def reuse_port_available() -> bool:
    return hasattr(socket, "SO_REUSEPORT")


def _bind_shared(sock: socket.socket, address: tuple[Any, ...]) -> socket.socket:
    """`sock` bound to `address` alongside the other sockets on it (SO_REUSEPORT)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    return sock


def worker_socket(family: int, address: tuple[Any, ...]) -> socket.socket:
    """A worker's own socket on the shared address (called as the parent's is unpickled)."""
    return _bind_shared(socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP), address)


class PerWorkerSocket(socket.socket):
    """The parent's socket: bound with SO_REUSEPORT, never listening; each worker that
    receives it gets a new socket on its address instead of a duplicate of this one."""

    def __reduce__(self) -> tuple[Any, ...]:
        return worker_socket, (self.family, self.getsockname())


def per_worker_socket(host: str, port: int) -> socket.socket:
    """The supervisor's socket for `host:port` (port 0: one chosen now, shared by all)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return _bind_shared(PerWorkerSocket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP),
                        (host, port))
