"""Worker sockets (authoric.workers), in process: what `authoric serve` hands each worker
process is a socket of the worker's own on the supervisor's address, so the kernel spreads
clients over the workers instead of letting the first to wake take them all."""

from __future__ import annotations

import socket
from multiprocessing.reduction import ForkingPickler

from authoric.workers import per_worker_socket


def test_a_worker_receiving_the_supervisors_socket_gets_its_own_on_the_same_address() -> None:
    shared = per_worker_socket("127.0.0.1", 0)
    workers = [ForkingPickler.loads(ForkingPickler.dumps(shared)) for _ in range(2)]
    try:
        address = shared.getsockname()
        assert address[1] != 0  # port 0: one port chosen by the supervisor, for all
        for sock in workers:
            assert isinstance(sock, socket.socket) and sock.getsockname() == address
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
            sock.listen()
        assert len({s.fileno() for s in (shared, *workers)}) == 3  # not duplicates of one
        client = socket.create_connection(address, timeout=5)
        client.close()
    finally:
        for sock in (shared, *workers):
            sock.close()


def test_the_supervisors_own_socket_never_listens() -> None:
    shared = per_worker_socket("127.0.0.1", 0)
    try:
        assert shared.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 0
    finally:
        shared.close()
