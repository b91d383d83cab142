"""Server-Sent Events framing: text chunks in, frames out (the WHATWG parsing rules).

Pure: no I/O, so the stream loop (stream.py) feeds it whatever the transport hands over.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    event: str  # "message" when the frame names none
    data: str
    id: str | None  # None: the frame carried no `id:` field


class FrameParser:
    """Feed text as it arrives; get the frames it completes. Comments (`: ping`) are dropped."""

    def __init__(self) -> None:
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, text: str) -> list[Frame]:
        self._buffer += text
        frames: list[Frame] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                return frames
            line, rest = cut
            self._buffer = rest
            frame = self._line(line)
            if frame is not None:
                frames.append(frame)

    def _line(self, line: str) -> Frame | None:
        if line == "":
            if not self._data and not self._event and self._id is None:
                return None
            frame = Frame(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._id = "", [], None
            return frame
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


def _line_end(buffer: str) -> tuple[str, str] | None:
    """The first complete line and what follows it (CRLF, LF or a lone CR ends a line); a CR
    at the very end waits for the next chunk, which may start with its LF."""
    lf, cr = buffer.find("\n"), buffer.find("\r")
    if cr == -1 or (lf != -1 and lf < cr):
        return None if lf == -1 else (buffer[:lf], buffer[lf + 1:])
    if cr + 1 == len(buffer):
        return None
    return buffer[:cr], buffer[cr + (2 if buffer[cr + 1] == "\n" else 1):]
