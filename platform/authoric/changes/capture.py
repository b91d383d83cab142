"""SQL capture: writes made directly in the database to a table with `captureSqlWrites`
reach the change log, in the writer's own transaction, with the same positions as any other
change (the sequencer stamps them in commit order).

How (the trade-off against logical decoding is measured in docs/benchmarks-journal.md, "SQL
capture"):
- three statement-level AFTER triggers per captured table (INSERT, UPDATE, DELETE; a trigger
  with transition tables takes one event), calling `authoric.capture_sql_writes()` (migration
  0007) with the app uid, the table name and whether it soft-deletes;
- the function files one change per row (a delete with its old image, so it is judged as it
  stood); a statement touching more than 1,000 rows files one `bulk` change per org instead;
- a fourth, AFTER TRUNCATE, files one `bulk` change per org of the app (migration 0009);
- the platform's own connections carry `authoric.platform_write = on` (db/engine.py,
  `db.changelog.PLATFORM_WRITE`), and
  the function returns at once for them: a platform write filed its change itself, in the
  same statement, and is never filed twice;
- nothing of ours runs in a SQL writer's process to wake the sequencer, and a NOTIFY from
  the trigger would serialise the writers' commits; instead, while any table is captured,
  the sequencer's leader looks for unstamped rows every 20 ms (changes/sequencer.py).
"""

from __future__ import annotations

import uuid

from sqlalchemy import TextClause
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.schema import schema_name
from authoric.db.sql import Sql, literal, quoted, statement

EVENTS = {"ins": "INSERT", "upd": "UPDATE", "del": "DELETE"}
REFERENCING = {"ins": "NEW TABLE AS new_rows", "upd": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
               "del": "OLD TABLE AS old_rows"}


def sql_name(app_uid: uuid.UUID, table: str) -> str:
    """The PostgreSQL name of an app's table, as the definition's `sqlName` shows it."""
    return quoted(schema_name(app_uid), table)


def capture_ddl(app_uid: uuid.UUID, table: str, soft_delete: bool,
                on: bool) -> list[TextClause]:
    """The statements that install (or remove) a table's capture triggers; names come from
    the catalog only."""
    target = (schema_name(app_uid), table)
    # The trigger functions' arguments: DDL binds no parameters, so they are literals.
    app, name = literal(str(app_uid)), literal(table)
    out = []
    if on:  # a SQL writer may omit `uid`, as the platform's rows have one (a UUIDv7)
        out.append(statement("ALTER TABLE {target} ALTER COLUMN uid SET DEFAULT "
                             "authoric.uuid_v7()", target=target))
    for short, event in EVENTS.items():
        trigger = "authoric_capture_" + short
        out.append(statement("DROP TRIGGER IF EXISTS {trigger} ON {target}",
                             trigger=trigger, target=target))
        if on:
            out.append(statement(
                "CREATE TRIGGER {trigger} AFTER {event} ON {target} REFERENCING {referencing} "
                "FOR EACH STATEMENT EXECUTE FUNCTION "
                "authoric.capture_sql_writes({app}, {name}, {mode})",
                trigger=trigger, event=Sql(event), target=target,
                referencing=Sql(REFERENCING[short]), app=app, name=name,
                mode=literal("soft" if soft_delete else "hard")))
    # TRUNCATE has no transition tables: every org of the app resyncs (migration 0009).
    out.append(statement("DROP TRIGGER IF EXISTS authoric_capture_trunc ON {target}",
                         target=target))
    if on:
        out.append(statement(
            "CREATE TRIGGER authoric_capture_trunc AFTER TRUNCATE ON {target} "
            "FOR EACH STATEMENT EXECUTE FUNCTION authoric.capture_sql_truncate({app}, {name})",
            target=target, app=app, name=name))
    return out


async def set_capture(conn: AsyncConnection, app_uid: uuid.UUID, table: str, soft_delete: bool,
                      on: bool) -> None:
    """Install (or remove) the capture triggers of a table, in the caller's transaction."""
    for ddl in capture_ddl(app_uid, table, soft_delete, on):
        await conn.execute(ddl)
