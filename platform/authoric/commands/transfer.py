"""`authoric import` and `authoric export`: CSV in and out through the SDK (so imports emit events).

Exit codes: 0 done; 1 the file was refused (errors are listed, nothing was written);
2 a name was wrong (app, table, org) or the request was refused; 3 anything else.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from authoric.errors import (
    AuthoricError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    TableLocked,
    Unauthenticated,
    ValidationFailed,
)
from authoric.sdk import Authoric

CHUNK = 1 << 20
EXIT_OK, EXIT_REFUSED, EXIT_NAMES, EXIT_OTHER = 0, 1, 2, 3


async def _file_chunks(path: Path, progress: Progress, task: Any) -> AsyncIterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            progress.advance(task, len(chunk))
            yield chunk


def _error_table(details: dict[str, Any]) -> Table:
    table = Table(title="Rows refused (nothing was imported)")
    for heading in ("line", "column", "message"):
        table.add_column(heading)
    for row in details.get("rows", []):
        table.add_row(str(row.get("line")), str(row.get("column") or ""), str(row.get("message")))
    return table


async def run_import(path: Path, app: str, table: str, org: str) -> int:
    console = Console(stderr=True)
    if not path.is_file():
        console.print(f"[red]no such file: {path}")
        return EXIT_NAMES

    async def load(sdk: Authoric) -> int:
        try:
            with Progress("[progress.description]{task.description}", BarColumn(),
                          DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                          console=console) as progress:
                task = progress.add_task(f"importing {path.name}", total=path.stat().st_size)
                async with sdk.as_app(app, org) as session:
                    inserted = await session.import_csv(table, _file_chunks(path, progress, task))
        except ValidationFailed as exc:
            console.print(f"[red]{exc.message}")
            if "rows" in exc.details:
                console.print(_error_table(exc.details))
            return EXIT_REFUSED
        console.print(f"[green]imported {inserted} rows into {table}")
        return EXIT_OK

    return await _with_sdk(console, load)


async def _with_sdk(console: Console, job: Callable[[Authoric], Awaitable[int]]) -> int:
    """`job`'s exit code, run with an SDK connected for it; a refusal it does not handle itself
    is printed and mapped to its exit code."""
    sdk = await Authoric.connect()
    try:
        return await job(sdk)
    except AuthoricError as exc:
        console.print(f"[red]{exc.code}: {exc.message}")
        return _exit_code(exc)
    finally:
        await sdk.close()


def _exit_code(exc: AuthoricError) -> int:
    """A name the operator got wrong (or one they may not use) is 2; a file that conflicts with
    the table's rows (a unique value taken meanwhile) is refused, 1; anything else is 3."""
    if isinstance(exc, NotFound | Forbidden | TableLocked | Unauthenticated | BadRequest):
        return EXIT_NAMES
    if isinstance(exc, Conflict):
        return EXIT_REFUSED
    return EXIT_OTHER


async def run_export(app: str, table: str, org: str, out: Path | None, filter_json: str | None) -> int:
    console = Console(stderr=True)
    try:
        filter_doc = json.loads(filter_json) if filter_json else {}
    except ValueError:
        console.print("[red]--filter is not valid JSON")
        return EXIT_NAMES

    async def save(sdk: Authoric) -> int:
        sink = out.open("wb") if out else sys.stdout.buffer
        try:
            async with sdk.as_app(app, org) as session:
                async for chunk in session.export_csv(table, filter_doc):
                    sink.write(chunk)
        finally:
            if out:
                sink.close()
        return EXIT_OK

    return await _with_sdk(console, save)
