"""Expanding references (`?expand=vendor,vendor.country`, contract sections 4 and 5).

Each expanded row is read through the referenced table's governed read for the same caller,
as `GET /{app}/autocrud/{reftable}/{uid}` would read it: the `read` permission and the `read`
operation (the gate), the caller's org, the row policy, live rows only, and redaction. A row
the caller may not read, a null reference, or a reference the caller sees redacted expands to
`null`; the `<name>_uid` field is there either way.

`expand_all` is the one walk, level by level, for any number of readers at once: REST expands
one caller's rows (one statement per expanded path, `uid = ANY(...)`), the feed's judge expands
the rows of every read class of a batch (realtime/expansion.py puts the classes' reads of one
table into one statement). The statements are always the plan's `read_many`; never one per row.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from authoric.catalog.model import TableDef
from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import BadRequest, Forbidden, NotFound, TableLocked
from authoric.plan.access import Access
from authoric.plan.plan import Plan
from authoric.plan.request import ExpandPaths
from authoric.plan.runner import Executor

REDACTED = "[redacted]"
Tree = dict[str, "Tree"]
# The governed read of a table for one reader, or None when it may not read that table.
Admit = Callable[[str], Access | None]
# Runs reads (an access and the uids wanted), answering each one's rows in the same order.
Branch = tuple[Access, list[uuid.UUID]]
Fetch = Callable[[list[Branch]], Awaitable[list[Sequence[Mapping[str, Any]]]]]


class Reader(Protocol):
    """The caller whose governed reads the expansion runs (records.pipeline.Caller)."""

    @property
    def ex(self) -> Executor: ...

    def admit(self, table: str, action: str) -> Access: ...


@dataclass
class Expansion:
    """One reader's rows of `table` (rendered, filled in place) to expand along `tree`."""

    admit: Admit
    table: CompiledTable
    rows: list[dict[str, Any]]
    tree: Tree


def paths_tree(paths: ExpandPaths) -> Tree:
    """The paths as a tree of reference names (unchecked)."""
    tree: Tree = {}
    for path in paths:
        level = tree
        for name in path:
            level = level.setdefault(name, {})
    return tree


def unfollowed(table: TableDef | None, path: tuple[str, ...],
               definition_of: Callable[[str], TableDef | None]) -> tuple[str, str] | None:
    """Where `path` stops following reference columns from `table`: (that table's name, the
    name that is not a reference column of it), or None when it follows them to the end. The
    one rule for REST's `expand`, a stream's and a webhook's."""
    for name in path:
        if table is None:
            return "", name
        column = table.column(name)
        if column is None or column.references is None:
            return table.name, name
        table = definition_of(column.references)
    return None


def expansion_tree(access: Access, paths: ExpandPaths) -> Tree:
    """The paths as a tree of reference names, each checked against its table (400 for a name
    that is not a reference column)."""
    for path in paths:
        stop = unfollowed(access.table.definition, path,
                          lambda name: access.snapshot.table(name).definition)
        if stop is not None:
            raise BadRequest(f"{stop[1]!r} is not a reference column of {stop[0]!r}",
                             {"expand": ".".join(path)})
    return paths_tree(paths)


def unreached_paths(definitions: Mapping[str, TableDef], tables: Sequence[str],
                    paths: ExpandPaths) -> list[str]:
    """The paths (dotted) that no table of `tables` follows through reference columns: a
    webhook over several tables expands each path where its table has it, so a path only
    needs one table to reach it; one that none reaches is a mistake (a typo, a plain column)."""
    return [".".join(path) for path in paths
            if all(unfollowed(definitions.get(name), path, definitions.get) is not None
                   for name in tables)]


def governed_reader(admit: Callable[[str, str], Access]) -> Admit:
    """`admit(table, "read")`, None where the gate refuses (the expansion is then null)."""

    def read(table: str) -> Access | None:
        try:
            return admit(table, "read")
        except (Forbidden, TableLocked, NotFound):
            return None

    return read


async def expand_rows(reader: Reader, snapshot: AppSnapshot, table: CompiledTable,
                      rows: list[dict[str, Any]], tree: Tree) -> None:
    """Add `expand` to each row (in place), level by level: one statement per path."""

    async def fetch(branches: list[Branch]) -> list[Sequence[Mapping[str, Any]]]:
        return [await _read_many(reader.ex, access, uids) for access, uids in branches]

    await expand_all([Expansion(governed_reader(reader.admit), table, rows, tree)], fetch)


async def _read_many(ex: Executor, access: Access,
                     uids: list[uuid.UUID]) -> Sequence[Mapping[str, Any]]:
    """The rows among `uids` the reader may read, guarded like the rows they expand: planned
    for one catalog version, read only at that version (plan.guard)."""
    rows = await ex.fetch(Plan(access).read_many(uids, ex.guard), retry=True)
    return rows if ex.guard is None else ex.guard.check(rows)


async def expand_all(expansions: list[Expansion], fetch: Fetch) -> None:
    """Fill `expand` in every expansion's rows, level by level: each level's reads go to
    `fetch` together. A name that is no longer a reference column of its table (a stream's
    table changed since it subscribed) expands to null, like a row the reader may not read."""
    while expansions:
        branches: list[Branch] = []
        slots: list[tuple[Expansion, str, Tree, Access | None, int]] = []
        for expansion in expansions:
            for name, below in expansion.tree.items():
                column = expansion.table.definition.column(name)
                uids = _referenced(expansion.rows, f"{name}_uid")
                access = None
                if column is not None and column.references is not None and uids:
                    access = expansion.admit(column.references)
                if access is not None:
                    branches.append((access, uids))
                slots.append((expansion, name, below, access, len(branches) - 1))
        results = await fetch(branches) if branches else []
        below_level: list[Expansion] = []
        for expansion, name, below, access, index in slots:
            found = {} if access is None else {
                str(r["uid"]): access.table.row_json(r, access.decision.redacted)
                for r in results[index]}
            key = f"{name}_uid"
            for row in expansion.rows:
                row.setdefault("expand", {})[name] = found.get(str(row.get(key)))
            if below and found and access is not None:
                below_level.append(Expansion(expansion.admit, access.table,
                                             list(found.values()), below))
        expansions = below_level


def unexpanded(rows: list[dict[str, Any]], tree: Tree) -> None:
    """Every expansion of `tree` in `rows` null, as for a row the reader may not read."""
    for row in rows:
        row["expand"] = dict.fromkeys(tree)


def _referenced(rows: list[dict[str, Any]], key: str) -> list[uuid.UUID]:
    """The uids the rows reference under `key`, once each, in order (a redacted one is not
    a uid: the reader may not know it, so it expands to null)."""
    found = {r[key] for r in rows if isinstance(r.get(key), str) and r[key] != REDACTED}
    return [uuid.UUID(u) for u in sorted(found)]
