"""The request pipeline: a typed `TableRequest` (plan.request), run for one `Caller`, by `execute`.

Every caller goes through here: REST (http/autocrud.py), the server-side SDK (sdk.py), the
console's rows (console/rows.py), CSV import and export, and the CLI (through the SDK).

A `Caller` is who is asking, resolved once: it admits an action on a table (the gate:
404, 403 TABLE_LOCKED, 403 FORBIDDEN) and gives the executor its statements run on. There
are two kinds:
- the request path's (http/context.py), planned from cached facts, whose single statement
  carries the facts as a guard (`at_once`): one round trip, in autocommit;
- a transaction's (`InTransaction`), whose facts were read fresh inside it: every request
  whose work needs several statements, and the operator in a console route's transaction
  (console/rows.py `Operator`, whose writes are audited in that same transaction);
- a `Fresh` caller (the SDK), which is never `at_once`: `execute` opens its transaction
  first, reading the facts fresh there, and runs the whole request in it.

`execute` owns the choice between them, and the explanation of a miss:
- a read, a page, and a create or single-row update/delete that touches no soft-delete table
  run as one guarded statement when the caller has one (`at_once`);
- a write that must check references first, or a delete on a soft-delete table, bulk writes,
  imports and exports open the caller's transaction (`Caller.transaction`);
- an update or delete whose one statement changed nothing (no such row, a row the policy does
  not let this writer change, or a change that would leave the policy) runs again in a
  transaction, which answers 404 or 403 exactly and rolls back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import BadRequest, InternalError
from authoric.plan.access import Access, admit
from authoric.plan.expand import expand_rows, expansion_tree, unexpanded
from authoric.plan.guard import Guard, StaleFacts
from authoric.plan.request import TableRequest
from authoric.plan.runner import ConnectionExecutor, Executor
from authoric.policy.principal import Principal
from authoric.records import bulk, csv_export, csv_import, reads, writes
from authoric.records.conflicts import UnexplainedConflict, explain_after_rollback
from authoric.records.csv_fast import Spool
from authoric.records.values import bulk_set_values, column_values

Strategy = Literal["statement", "transaction"]


class Caller(Protocol):
    """Who runs a request: admits it, and gives the executor its statements run on."""

    @property
    def ex(self) -> Executor: ...

    @property
    def at_once(self) -> bool:
        """Whether `ex` runs one guarded statement in autocommit (the request path)."""
        ...

    def admit(self, table: str, action: str) -> Access: ...

    def transaction(self) -> AbstractAsyncContextManager[InTransaction]:
        """The same caller inside a transaction, its facts read fresh there."""
        ...


@dataclass
class InTransaction:
    """A caller inside one transaction on the engine, with facts read in it."""

    conn: AsyncConnection
    engine: AsyncEngine
    principal: Principal
    snapshot: AppSnapshot
    # The facts read in the transaction, for a statement run outside it (CSV export reads
    # on its own connection after this one committed): None for the operator and the SDK.
    guard: Guard | None = None

    at_once = False

    @property
    def ex(self) -> ConnectionExecutor:
        return ConnectionExecutor(self.conn)

    def admit(self, table: str, action: str) -> Access:
        return admit(self.snapshot, self.principal, table, action)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[InTransaction]:
        yield self


@dataclass(frozen=True)
class Fresh:
    """A caller that is never `at_once` (the SDK): each of its transactions
    reads its facts fresh (`open`), so a second one can explain a conflict after a rollback."""

    open: Callable[[], AbstractAsyncContextManager[InTransaction]]

    at_once = False

    def transaction(self) -> AbstractAsyncContextManager[InTransaction]:
        return self.open()


def strategy(access: Access, request: TableRequest, at_once: bool) -> Strategy:
    """One guarded statement, or a transaction, for `request` by a caller that can (`at_once`)
    or cannot run one guarded statement."""
    if not at_once:
        return "transaction"
    if request.operation in ("read", "list"):
        return "statement"
    if request.operation in ("create", "update", "delete"):
        return "transaction" if writes.needs_transaction(access, request.action) else "statement"
    return "transaction"


def admitted(caller: Caller | InTransaction, request: TableRequest) -> Access:
    """The gate for `request` (404, 403), then the media it was sent in (415)."""
    access = caller.admit(request.table, request.action)
    request.media.get()
    return access


async def execute(caller: Caller | Fresh, request: TableRequest,
                  chunks: AsyncIterator[bytes] | Spool | None = None) -> Any:
    """Run `request` as `caller`: the gate, then the request's shape (in the contract's check
    order), the plan, and its statement(s). The answer is the operation's: a row, a page,
    None for a delete, a count, or the CSV bytes of an export. `chunks` is an import's body."""
    try:
        if isinstance(caller, Fresh):
            async with caller.transaction() as tx:
                return await _answer(tx, request, chunks)
        return await _answer(caller, request, chunks)
    except UnexplainedConflict as pending:  # the transaction rolled back: ask on a fresh one
        async with caller.transaction() as tx:
            await explain_after_rollback(tx.ex, pending)


async def _answer(caller: Caller, request: TableRequest,
                  chunks: AsyncIterator[bytes] | Spool | None) -> Any:
    access = admitted(caller, request)
    tree = expansion_tree(access, request.expand.get())
    count = request.count.get()
    if count == "estimate" and not access.for_operator:
        raise BadRequest("count=estimate is the operator's (the console's rows); members "
                         "count exactly", {"count": count})
    result = await _run(caller, access, request, chunks)
    if tree:
        shown = result["items"] if request.operation == "list" else [result]
        # A writer who may not read the row gets {"uid"} alone: nothing to expand.
        readable = [r for r in shown if len(r) > 1]
        try:
            await expand_rows(caller, access.snapshot, access.table, readable, tree)
        except (StaleFacts, InternalError):
            if not request.writes:
                raise  # a read is planned again (http/context.py), whole
            # The write is done and must not run twice: its expansions, planned for a catalog
            # that has since moved (the guard failed, or the statement on a renamed column),
            # are left null (fail closed) rather than read.
            unexpanded(readable, tree)
    if count == "exact":
        result["total"] = await reads.count_rows(caller.ex, access, request.filter.get())
    elif count == "estimate":  # the operator's, whose caller is always in a transaction
        ex = caller.ex
        assert isinstance(ex, ConnectionExecutor), "an estimate is asked on a connection"
        result["total"] = await reads.estimate_rows(ex.conn, access, request.filter.get())
        result["estimated"] = True
    return result


async def _run(caller: Caller, access: Access, request: TableRequest,
               chunks: AsyncIterator[bytes] | Spool | None) -> Any:
    op = request.operation
    if strategy(access, request, caller.at_once) == "statement":
        return await _at_once(caller, access, request)
    if op == "export":
        async with caller.transaction() as tx:
            current = tx.admit(request.table, request.action) if tx is not caller else access
            statement = csv_export.export_statement(current, request.filter.get(),
                                                    request.page.get().order, tx.guard)
            rows = csv_export.export_csv(tx.engine, current, statement, tx.guard)
        # The first rows are read before the response starts, outside the transaction: a
        # catalog that moved since planning is found there (StaleFacts, planned again),
        # never halfway through a body.
        return await csv_export.primed(rows)
    async with caller.transaction() as tx:
        current = tx.admit(request.table, request.action) if tx is not caller else access
        if op == "import":
            assert chunks is not None, "an import needs its body"
            return {"inserted": await csv_import.import_csv(tx.conn, current, chunks)}
        return await _in_transaction(tx.ex, current, request)


# Operations whose statement is the same alone or inside a transaction.
_ONE_STATEMENT = frozenset({"read", "list", "create"})


async def _one_statement(ex: Executor, access: Access, request: TableRequest) -> Any:
    op = request.operation
    if op == "read":
        return await reads.read_one(ex, access, request.row_uid())
    if op == "list":
        return await reads.list_page(ex, access, request.filter.get(), request.page.get())
    body = request.body.get()
    return await writes.create_row(ex, access, column_values(access.table, body, creating=True))


async def _at_once(caller: Caller, access: Access, request: TableRequest) -> Any:
    ex, op = caller.ex, request.operation
    if op in _ONE_STATEMENT:
        return await _one_statement(ex, access, request)
    uid = request.row_uid()
    changes: dict[str, Any] | None = None
    if op == "update":
        changes = column_values(access.table, request.body.get(), creating=False)
    done, row = await writes.write_at_once(ex, access, uid, changes)
    if done:
        return row
    # A miss: the same write in a transaction says 403 or 404, and rolls back a row that
    # would leave the writer's policy.
    async with caller.transaction() as tx:
        return await _in_transaction(tx.ex, tx.admit(request.table, request.action), request)


async def _in_transaction(ex: ConnectionExecutor, access: Access, request: TableRequest) -> Any:
    op = request.operation
    if op in _ONE_STATEMENT:
        return await _one_statement(ex, access, request)
    if op == "update":
        uid, body = request.row_uid(), request.body.get()
        return await writes.update_row(ex, access, uid,
                                       column_values(access.table, body, creating=False))
    if op == "delete":
        await writes.delete_row(ex, access, request.row_uid())
        return None
    tree = request.filter.get()
    if op == "update_where":
        plan = bulk.checked_plan(access, tree)
        values = bulk_set_values(access.table, request.body.get())
        return {"count": await bulk.bulk_update(ex, access, plan, values)}
    if op == "delete_where":
        return {"count": await bulk.bulk_delete(ex, access, tree)}
    raise AssertionError(f"no such operation {op!r}")
