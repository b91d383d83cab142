"""The request pipeline: a typed `TableRequest` (plan.request), run for one `Caller`, by `execute`.

Every caller goes through here: REST (http/autocrud.py), the server-side SDK (sdk.py), the
console's rows (console/rows.py), CSV import and export, and the CLI (through the SDK).

A `Caller` is who is asking, resolved once: it admits an action on a table (the gate:
404, 403 TABLE_LOCKED, 403 FORBIDDEN) and gives the executor its statements run on. There
are two kinds:
- the request path's (callers.py `Guarded`), planned from cached facts, whose single statement
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
- a transaction's statements were planned for the catalog version its facts were read at, so
  before it ends it confirms that version (`confirmed`, the same guard the one statement
  carries): a rename or swap that committed in between, before a statement took its table's
  lock, fails the guard (StaleFacts), the transaction rolls back and the caller plans again;
  a write never lands in a column that moved, nor answers with it;
- an update or delete whose one statement changed nothing (no such row, a row the policy does
  not let this writer change, or a change that would leave the policy) runs again in a
  transaction, which answers 404 or 403 exactly and rolls back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import BadRequest, InternalError
from authoric.plan.access import Access, admit
from authoric.plan.expand import expand_rows, expansion_tree, unexpanded
from authoric.plan.guard import PLAN_ATTEMPTS, Guard, StaleFacts, until_held
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
    alone = OPERATIONS[request.operation].alone
    return "statement" if at_once and alone(access, request) else "transaction"


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
            return await _fresh(caller, request, chunks)
        return await _answer(caller, request, chunks)
    except UnexplainedConflict as pending:  # the transaction rolled back: ask on a fresh one
        async with caller.transaction() as tx:
            await explain_after_rollback(tx.ex, pending)


async def _fresh(caller: Fresh, request: TableRequest,
                 chunks: AsyncIterator[bytes] | Spool | None) -> Any:
    """`request` in a transaction of its own, planned again (in a new one) when the catalog
    moved under the first (`confirmed` failed, and the transaction rolled back). A streamed
    import body is read once: it gets one attempt (a spool is read from its start again)."""
    async def attempt() -> Any:
        async with caller.transaction() as tx:
            return await _answer(tx, request, chunks)

    spent_once = chunks is not None and not isinstance(chunks, Spool)
    return await until_held(attempt, 1 if spent_once else PLAN_ATTEMPTS)


async def confirmed(tx: InTransaction) -> None:
    """StaleFacts unless the transaction's facts (its catalog version, and for a member its
    roles) still hold: every statement it ran was then run at the version it was planned
    for. Run before the transaction ends (plan.guard `Guard.confirmation`)."""
    guard = tx.guard or Guard.for_catalog(tx.snapshot.uid, tx.snapshot.version)
    guard.check(await tx.ex.fetch(guard.confirmation()))


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
                raise  # a read is planned again (callers.py), whole
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
    if isinstance(caller, InTransaction):  # its expansions and count ran in it as well
        await confirmed(caller)
    return result


async def _run(caller: Caller, access: Access, request: TableRequest,
               chunks: AsyncIterator[bytes] | Spool | None) -> Any:
    unit = OPERATIONS[request.operation]
    if strategy(access, request, caller.at_once) == "statement":
        done, answer = await unit.run(Step(caller.ex, access, request, None, chunks))
        if done:
            return answer
        # A miss: the same write in a transaction says 403 or 404, and rolls back a row that
        # would leave the writer's policy.
    async with caller.transaction() as tx:
        current = tx.admit(request.table, request.action) if tx is not caller else access
        answer = (await unit.run(Step(tx.ex, current, request, tx, chunks)))[1]
        if tx is not caller:  # a caller that is its transaction confirms once, at the end
            await confirmed(tx)
    return answer if unit.after is None else await unit.after(answer)


@dataclass(frozen=True)
class Step:
    """What an operation's unit runs with: statements run on `ex`, for the admitted `access`;
    `tx` is the transaction when there is one (None: one guarded statement in autocommit)."""

    ex: Executor
    access: Access
    request: TableRequest
    tx: InTransaction | None
    chunks: AsyncIterator[bytes] | Spool | None = None

    @property
    def in_tx(self) -> InTransaction:
        assert self.tx is not None, "this operation runs in a transaction only"
        return self.tx


@dataclass(frozen=True)
class Unit:
    """One operation: `run` answers (done, answer), where not done is a single-row write's
    miss on its one statement; `alone` says whether it may run as one guarded statement."""

    run: Callable[[Step], Awaitable[tuple[bool, Any]]]
    alone: Callable[[Access, TableRequest], bool]
    # What the answer still needs once its transaction has ended (an export's first rows).
    after: Callable[[Any], Awaitable[Any]] | None = None


def _always(access: Access, request: TableRequest) -> bool:
    return True


def _never(access: Access, request: TableRequest) -> bool:
    return False


def _single_write(access: Access, request: TableRequest) -> bool:
    return not writes.needs_transaction(access, request.action)


async def _read(step: Step) -> tuple[bool, Any]:
    return True, await reads.read_one(step.ex, step.access, step.request.row_uid())


async def _list(step: Step) -> tuple[bool, Any]:
    request = step.request
    return True, await reads.list_page(step.ex, step.access, request.filter.get(),
                                       request.page.get())


async def _create(step: Step) -> tuple[bool, Any]:
    values = column_values(step.access.table, step.request.body.get(), creating=True)
    return True, await writes.create_row(step.ex, step.access, values)


async def _update(step: Step) -> tuple[bool, Any]:
    access, uid = step.access, step.request.row_uid()
    values = column_values(access.table, step.request.body.get(), creating=False)
    if step.tx is None:
        return await writes.write_at_once(step.ex, access, uid, values)
    return True, await writes.update_row(step.in_tx.ex, access, uid, values)


async def _delete(step: Step) -> tuple[bool, Any]:
    access, uid = step.access, step.request.row_uid()
    if step.tx is None:
        return await writes.write_at_once(step.ex, access, uid, None)
    await writes.delete_row(step.in_tx.ex, access, uid)
    return True, None


async def _update_where(step: Step) -> tuple[bool, Any]:
    access, request = step.access, step.request
    plan = bulk.checked_plan(access, request.filter.get())
    values = bulk_set_values(access.table, request.body.get())
    return True, {"count": await bulk.bulk_update(step.in_tx.ex, access, plan, values)}


async def _delete_where(step: Step) -> tuple[bool, Any]:
    return True, {"count": await bulk.bulk_delete(step.in_tx.ex, step.access,
                                                  step.request.filter.get())}


async def _import(step: Step) -> tuple[bool, Any]:
    assert step.chunks is not None, "an import needs its body"
    return True, {"inserted": await csv_import.import_csv(step.in_tx.conn, step.access,
                                                          step.chunks)}


async def _export(step: Step) -> tuple[bool, Any]:
    access, request = step.access, step.request
    tx = step.in_tx
    statement = csv_export.export_statement(access, request.filter.get(),
                                            request.page.get().order, tx.guard)
    return True, csv_export.export_csv(tx.engine, access, statement, tx.guard)


# Every operation of a table request, found here (plan.request names them).
OPERATIONS: dict[str, Unit] = {
    "read": Unit(_read, _always),
    "list": Unit(_list, _always),
    "create": Unit(_create, _single_write),
    "update": Unit(_update, _single_write),
    "delete": Unit(_delete, _single_write),
    "update_where": Unit(_update_where, _never),
    "delete_where": Unit(_delete_where, _never),
    "import": Unit(_import, _never),
    # The first rows are read before the response starts, outside the transaction: a
    # catalog that moved since planning is found there (StaleFacts, planned again), never
    # halfway through a body.
    "export": Unit(_export, _never, csv_export.primed),
}
