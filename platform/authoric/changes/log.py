"""Recording a change in the writer's own transaction, so a rollback announces nothing."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.db import tables as t
from authoric.realtime.source import BULK, DELETE, INSERT, SCHEMA, UPDATE

__all__ = ["BULK", "DELETE", "INSERT", "SCHEMA", "UPDATE", "record_change"]


async def record_change(conn: AsyncConnection, *, app_uid: uuid.UUID, table: str, op: str,
                        org_uid: uuid.UUID, row_uid: uuid.UUID | None,
                        actor_uid: uuid.UUID | None, old_row: dict[str, Any] | None = None) -> None:
    """Append one change; its position is stamped after commit by the sequencer."""
    await conn.execute(t.changes.insert().values(
        app_uid=app_uid, table_name=table, op=op, row_uid=row_uid, org_uid=org_uid,
        actor_uid=actor_uid, old_row=old_row))
