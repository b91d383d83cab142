"""Incremental CSV parsing of a byte stream: records with their line numbers, never the
whole body in memory. UTF-8 (a leading BOM is dropped), CRLF or LF, RFC 4180 quoting."""

from __future__ import annotations

import codecs
import csv
from collections.abc import AsyncIterator
from dataclasses import dataclass


class CsvProblem(ValueError):
    """The stream is not readable CSV at `line` (bad encoding, unterminated quote)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


# One record (a line, or the lines of a quoted field that holds newlines) may span at most
# this much: the JSON body limit's default. Past it the stream is refused at once, instead of
# holding the rest of the file in memory (a stray quote near the top of a 1 GB file).
MAX_RECORD_CHARS = 1 << 20


@dataclass(frozen=True)
class Record:
    line: int  # the physical line the record starts on (1 = header)
    fields: list[str]


async def records(chunks: AsyncIterator[bytes],
                  max_record: int = MAX_RECORD_CHARS) -> AsyncIterator[list[Record]]:
    """Batches of complete records as the bytes arrive.

    A run of lines is a complete set of records when it holds an even number of `"`:
    RFC 4180 doubles quotes inside quoted fields, so an odd count means a quoted field
    (possibly holding newlines) is still open.
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    pending = ""  # text after the last newline
    held: list[str] = []  # complete lines waiting for their quoted field to close
    quotes = 0
    size = 0  # characters in `held`
    line = 1  # physical line of held[0]
    async for chunk in chunks:
        try:
            text = pending + decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            raise CsvProblem(line + len(held), "the file is not valid UTF-8") from exc
        *complete, pending = text.split("\n")
        batch: list[Record] = []
        for raw in complete:
            held.append(raw + "\n")
            quotes += raw.count('"')
            size += len(raw) + 1
            if quotes % 2 == 0:
                batch.extend(_parse(held, line))
                line += len(held)
                held, quotes, size = [], 0, 0
            elif size > max_record:
                raise CsvProblem(line, "a quoted field is never closed "
                                       f"(a record may span at most {max_record} characters)")
        if size + len(pending) > max_record:
            raise CsvProblem(line, f"a record is longer than {max_record} characters")
        if batch:
            yield batch
    try:
        tail = pending + decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise CsvProblem(line + len(held), "the file is not valid UTF-8") from exc
    if tail:
        held.append(tail)
        quotes += tail.count('"')
    if quotes % 2:
        raise CsvProblem(line, "a quoted field is never closed")
    if held:
        yield _parse(held, line)


def _parse(lines: list[str], first_line: int) -> list[Record]:
    out: list[Record] = []
    reader = csv.reader(lines, strict=True)
    start = first_line
    try:
        for fields in reader:
            if fields:
                out.append(Record(start, fields))
            start = first_line + reader.line_num
    except csv.Error as exc:
        raise CsvProblem(first_line + reader.line_num - 1, f"malformed CSV: {exc}") from exc
    return out
