"""A stream's frames written straight to its connection, outside the stream's task.

A live frame used to cost the stream's task a wake-up: the hub queued it, resolved the
stream's future, and one loop turn later the task packed it, went through the async
generator and awaited uvicorn's `send`. For an idle stream (its task waits, nothing queued,
everything before written) the hub can write the frame itself on its own turn: that is what
`send` does for a body chunk of a chunked response, minus the await, which it needs only when
the client has stopped reading.

This module is the one place that knows uvicorn's request cycle (httptools, the protocol
`authoric serve` runs): `send` is a bound method of it, and it keeps the transport, the flow
control and the chunked framing. For any other server, `chunk_writer` gives None and every
frame goes through the task as before.
"""

from __future__ import annotations

from typing import Any

from starlette.types import Send
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

CYCLE_STATE = ("transport", "flow", "disconnected", "response_started", "response_complete",
               "chunked_encoding")


def chunked(body: bytes) -> bytes:
    """`body` as one chunk of a chunked HTTP/1.1 body, as uvicorn frames a body message."""
    return b"%x\r\n%b\r\n" % (len(body), body)


class ChunkWriter:
    """Writes body chunks of one started, chunked response, when that needs no wait."""

    __slots__ = ("_cycle", "_flow", "_transport")

    def __init__(self, cycle: Any) -> None:
        # The cycle's flow control and transport are its connection's, fixed for its life:
        # held here, a write does not look them up in the cycle's attribute dict each time.
        self._cycle, self._flow, self._transport = cycle, cycle.flow, cycle.transport

    def ready(self) -> bool:
        """Whether uvicorn's own `send` would simply write now. Not when the client has stopped
        reading (writes paused: the frames then wait, bounded, in the stream's queue), the
        connection is gone or closing, or the response has ended: the caller then gives the
        frames to the stream's task, whose `send` waits or finds out."""
        cycle = self._cycle
        return not (self._flow.write_paused or cycle.disconnected or cycle.response_complete
                    or self._transport.is_closing())

    def write(self, body: bytes) -> None:
        """Write `body` as one chunk (call `ready` first). What the transport raises goes to
        the caller: the frames may be lost on this connection, so the stream ends there
        (http/subscribe.py, `DirectFrames`) and its client resumes from the
        last frame it received."""
        if body:  # an empty chunk would be the end of the body
            self._transport.write(chunked(body))

    def write_chunk(self, chunk: bytes) -> None:
        """Write a chunk framed already (`chunked` of a body that is not empty): the frames of
        a read class, framed once for all its streams. Raises as `write` does."""
        self._transport.write(chunk)


def chunk_writer(send: Send) -> ChunkWriter | None:
    """A writer for the response `send` has started, if `send` is uvicorn's httptools request
    cycle and the response is chunked (a stream's always is); else None."""
    cycle = getattr(send, "__self__", None)
    if not isinstance(cycle, RequestResponseCycle):
        return None
    # What `ready` and `write` read; a uvicorn that renamed any of it gets no writer.
    if not all(hasattr(cycle, name) for name in CYCLE_STATE) or not hasattr(
            cycle.flow, "write_paused"):
        return None
    if not cycle.response_started or not cycle.chunked_encoding:
        return None
    return ChunkWriter(cycle)


def transport_of(send: Send) -> Any:
    """The connection's transport behind the server's own `send` (uvicorn's request cycle
    keeps it as `transport`); None when `send` is not uvicorn's."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None or not hasattr(transport, "get_extra_info"):
        return None
    return transport
