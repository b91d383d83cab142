"""`?expand=` on a stream: the references of each event's row, read for the subscriber's read
class at delivery, like the row itself.

A class's key holds its expand paths (and the principal attributes the expanded tables'
policies use, realtime/classes.py), so every subscriber of a class sees the same expansion and
it is judged once per class. The walk is REST's (`plan.expand.expand_all`); here are its
two feed-specific parts: the admit (the same gate as `GET` of the referenced row, for the
class's principal) and the fetch, which puts every class's read of one referenced table at
one level into ONE statement (a `UNION ALL` of the plan's `read_many`, one branch per class).
So a batch costs one more statement per expanded table and level, never one per row or class.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from sqlalchemy import Integer, literal
from sqlalchemy.ext.asyncio import AsyncConnection

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.plan.access import admit, operator_access
from authoric.plan.expand import (
    Admit,
    Branch,
    Expansion,
    expand_all,
    governed_reader,
    paths_tree,
)
from authoric.plan.guard import Guard, guarded_branches
from authoric.plan.plan import Plan
from authoric.plan.request import ExpandPaths
from authoric.policy.principal import Principal

BRANCH = "_expand_branch"  # no column can be named so (names start with a letter)


def expanded_tables(snapshot: AppSnapshot, table: str, paths: ExpandPaths) -> set[str]:
    """The tables `paths` reach from `table` (names that are not references are skipped)."""
    found: set[str] = set()
    for path in paths:
        current = snapshot.tables.get(table)
        for name in path:
            column = None if current is None else current.definition.column(name)
            if column is None or column.references is None:
                break
            found.add(column.references)
            current = snapshot.tables.get(column.references)
    return found


async def expand_for_classes(conn: AsyncConnection, snapshot: AppSnapshot,
                             table: CompiledTable,
                             classes: Sequence[tuple[Principal, ExpandPaths,
                                                     list[dict[str, Any]]]]) -> None:
    """Fill `expand` in each class's rendered rows (in place), for its principal and paths."""
    expansions = [Expansion(_reader(snapshot, principal), table, rows, paths_tree(paths))
                  for principal, paths, rows in classes if paths and rows]
    if not expansions:
        return

    guard = Guard.for_catalog(snapshot.uid, snapshot.version)

    async def fetch(branches: list[Branch]) -> list[Sequence[Mapping[str, Any]]]:
        return await _fetch_together(conn, guard, branches)

    await expand_all(expansions, fetch)


async def expand_for_operator(conn: AsyncConnection, snapshot: AppSnapshot,
                              table: CompiledTable, rows: list[dict[str, Any]],
                              paths: ExpandPaths) -> None:
    """Fill `expand` in the operator's rendered rows (in place): each referenced row read as
    the operator reads it (every org, live rows, nothing redacted; section 2a)."""
    if not paths or not rows:
        return
    principal = Principal(snapshot.uid, None, uuid.UUID(int=0), None, (), acting_as_app=True)
    reader = governed_reader(
        lambda name, action: operator_access(snapshot, principal, name, action))
    guard = Guard.for_catalog(snapshot.uid, snapshot.version)

    async def fetch(branches: list[Branch]) -> list[Sequence[Mapping[str, Any]]]:
        return await _fetch_together(conn, guard, branches)

    await expand_all([Expansion(reader, table, rows, paths_tree(paths))], fetch)


def _reader(snapshot: AppSnapshot, principal: Principal) -> Admit:
    """The governed read of a referenced table for a class's principal: REST's gate."""
    return governed_reader(lambda table, action: admit(snapshot, principal, table, action))


async def _fetch_together(conn: AsyncConnection, guard: Guard,
                          branches: list[Branch]) -> list[Sequence[Mapping[str, Any]]]:
    """Each branch's rows; the branches reading one table share one statement, run only at
    the catalog version they were planned for (`guard`: StaleFacts when it moved)."""
    out: list[list[Mapping[str, Any]]] = [[] for _ in branches]
    by_table: dict[Hashable, list[int]] = defaultdict(list)
    for i, (access, _) in enumerate(branches):
        by_table[access.table.name].append(i)
    for indexes in by_table.values():
        selects: list[Any] = [Plan(branches[i][0]).select_many(branches[i][1])
                              .add_columns(literal(i, Integer).label(BRANCH)) for i in indexes]
        statement = guarded_branches(guard, selects)
        for row in guard.check((await conn.execute(statement)).mappings().all()):
            out[row[BRANCH]].append(row)
    return list(out)
