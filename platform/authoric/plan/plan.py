"""The Plan: access (org, permission decision, row policy, redaction) + filter tree + order + page,
and the governed SELECT, UPDATE, DELETE and INSERT it compiles to.

The governed clause (org, live rows, row policy) is written here and only here. REST, the SDK,
bulk writes, CSV export, the feed's judge and the console's preview all ask a plan for it.

    plan = Plan(admit(snapshot, principal, "invoices", "read_list"), parse_filter(doc))
    statement, ordering, limit = plan.select_page(Page(order="-createdAt", limit=20))

An operator plan (`operator_access`) sees every org, with no row policy and nothing redacted.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, and_, any_, false, func, literal, literal_column, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import searched_columns
from authoric.db import tables as t
from authoric.db.changelog import INSERT
from authoric.plan.access import Access
from authoric.plan.binds import Shaped, named
from authoric.plan.guard import Guard, facts_where_no_row, guarded_select
from authoric.plan.listing import (
    DEFAULT_LIMIT,
    Ordering,
    cursor_clause,
    cursor_params,
    decode_cursor,
    parse_order,
)
from authoric.policy.decision import Decision
from authoric.policy.principal import Principal
from authoric.query.fields import table_fields
from authoric.query.filters import EVERYTHING, FilterScope, Node, compile_filter


@dataclass(frozen=True)
class Page:
    """The order and page of a list request, typed at the edge."""

    order: str | None = None
    limit: int = DEFAULT_LIMIT
    after: str | None = None


def governed_rows(table: CompiledTable, decision: Decision, principal: Principal | None,
                  operator: bool = False) -> ColumnElement[bool]:
    """The rows a decision covers: the principal's org, live rows, the row policy. An operator
    sees every org's live rows."""
    if operator or principal is None:
        live: ColumnElement[bool] = table.live()
        return live
    clauses = [table.table.c.org_uid == named("B_org", principal.org_uid,
                                              table.table.c.org_uid.type),
               table.live()]
    if decision.policy is not None:
        clauses.append(decision.policy)
    return and_(*clauses)


@dataclass(frozen=True)
class Plan:
    access: Access
    filter: Node = EVERYTHING

    @property
    def table(self) -> CompiledTable:
        return self.access.table

    def scope(self, page: bool = False) -> FilterScope:
        searched = frozenset(searched_columns(
            self.access.snapshot.indexes.get(self.table.name, []))) if page else frozenset()
        org = None if self.access.operator else self.access.principal.org_uid
        return FilterScope(table_fields(self.table), self.access.principal.attributes(),
                           self.access.decision.redacted, search_by_index=searched, org=org)

    def governed(self) -> ColumnElement[bool]:
        a = self.access
        return governed_rows(a.table, a.decision, a.principal, a.operator)

    def where(self, page: bool = False) -> ColumnElement[bool]:
        """The governed clause AND the request's filter (`page`: compiled for a list page,
        query.filters `search_by_index`)."""
        if self.filter == EVERYTHING:
            return self.governed()
        return and_(self.governed(), compile_filter(self.filter, self.scope(page)))

    def ordering(self, order: str | None) -> Ordering:
        return parse_order(order, table_fields(self.table), self.access.decision.redacted)

    # ---------------------------------------------------------------- shapes (plan.binds)

    def shape_key(self, kind: str, guard: Guard | None, *more: Any,
                  read: Decision | None = None) -> tuple[Any, ...] | None:
        """What decides the SQL of this plan's `kind` statement, besides its named values;
        None when the plan has no such key (a filter: its values shape its SQL; a decision,
        or the writer's `read` decision, made on a draft role)."""
        decision = self.access.decision
        if self.filter != EVERYTHING or decision.key is None:
            return None
        if read is not None and read.key is None:
            return None
        return (kind, self.table.name, decision.key, read and read.key, self.access.operator,
                guard is not None, *more)

    def params(self, guard: Guard | None) -> dict[str, Any]:
        """The named values every governed statement of this plan binds."""
        found = {"B_org": self.access.principal.org_uid}
        if guard is not None:
            found.update(guard.params())
        return found

    # ---------------------------------------------------------------- reads

    def read_one(self, uid: uuid.UUID, guard: Guard | None) -> Shaped:
        """The row `uid` if the plan covers it (with the guard's facts)."""
        return Shaped(self.shape_key("one", guard), {**self.params(guard), "B_uid": uid},
                      lambda: guarded_select(guard, self.select_one(uid)))

    def read_page(self, page: Page, guard: Guard | None) -> tuple[Shaped, Ordering]:
        """One page plus one row (to know whether there is a next page), in order."""
        ordering = self.ordering(page.order)
        after = decode_cursor(ordering, page.after) if page.after else None
        params = {**self.params(guard), "B_limit": page.limit + 1}
        if after is not None:
            params.update(cursor_params(after))
        key = self.shape_key("page", guard, ordering.spec,
                             None if after is None else after[0] is None)
        order = [(ordering.field.column.name, ordering.descending), ("uid", ordering.descending)]
        return Shaped(key, params, lambda: guarded_select(
            guard, self.select_page(page, ordering, after), order)), ordering

    def read_many(self, uids: list[uuid.UUID], guard: Guard | None) -> Shaped:
        """The rows among `uids` the plan covers (an expanded reference: one statement for a
        whole page's references, its uids bound as one array), with the guard's facts."""
        return Shaped(self.shape_key("many", guard), {**self.params(guard), "B_uids": uids},
                      lambda: guarded_select(guard, self.select_many(uids)))

    def select_many(self, uids: list[uuid.UUID]) -> Any:
        c = self.table.table.c
        wanted = named("B_uids", uids, ARRAY(c.uid.type))
        return select(self.table.table).where(and_(c.uid == any_(wanted), self.where()))

    def select_one(self, uid: uuid.UUID) -> Any:
        c = self.table.table.c
        return select(self.table.table).where(and_(c.uid == named("B_uid", uid, c.uid.type),
                                                   self.where()))

    def select_page(self, page: Page, ordering: Ordering,
                    after: tuple[Any, Any] | None) -> Any:
        uid = self.table.table.c.uid
        where = [self.where(page=True)]
        if after is not None:
            where.append(cursor_clause(ordering, after, uid))
        return (select(self.table.table).where(and_(*where))
                .order_by(*ordering.order_by(uid))
                .limit(named("B_limit", page.limit + 1, Integer)))

    def select_all(self, order: str | None, guard: Guard | None = None) -> Any:
        """Every row, in order (CSV export), with the guard's facts."""
        ordering = self.ordering(order)
        inner = (select(self.table.table).where(self.where())
                 .order_by(*ordering.order_by(self.table.table.c.uid)))
        order_by = [(ordering.field.column.name, ordering.descending),
                    ("uid", ordering.descending)]
        return guarded_select(guard, inner, order_by)

    def count_rows(self, guard: Guard | None = None) -> Any:
        """How many rows the plan covers (`?count=exact`): the governed clause and filter.
        With a guard, one row (`total`, and a non-null `uid` standing for "counted") where
        it held, the "no row" row with the current facts where it did not."""
        counted = select(func.count().label("total")).select_from(self.table.table).where(
            self.where())
        if guard is None:
            return counted
        inner = counted.subquery("counted")
        return guarded_select(guard, select(inner.c.total, literal(True).label("uid")))

    # ---------------------------------------------------------------- writes

    def policy_holds(self) -> ColumnElement[bool]:
        """Whether a row matches the writer's row policy for this action (true without one)."""
        policy = self.access.decision.policy
        return true() if policy is None else func.coalesce(policy, false())

    def readable(self, read: Decision | None) -> ColumnElement[bool]:
        """Whether the writer may read a row afterwards (false when it may not read at all)."""
        if read is None:
            return false()
        return func.coalesce(
            governed_rows(self.table, read, self.access.principal, self.access.operator), false())

    def write_params(self, uid: uuid.UUID, values: dict[str, Any] | None,
                     actor: uuid.UUID | None, guard: Guard | None) -> dict[str, Any]:
        """The named values of a single-row write (`insert`, `write_one`)."""
        found = {**self.params(guard), "B_uid": uid, "B_app": self.access.principal.app_uid,
                 "B_actor": actor}
        found.update({f"B_v_{name}": value for name, value in (values or {}).items()})
        return found

    def create(self, uid: uuid.UUID, values: dict[str, Any], read: Decision | None,
               guard: Guard | None, actor: uuid.UUID | None) -> Shaped:
        """`insert` by shape."""
        key = self.shape_key("insert", guard, tuple(values), read=read)
        return Shaped(key, self.write_params(uid, values, actor, guard),
                      lambda: self.insert(uid, values, read, guard, actor))

    def change_one(self, uid: uuid.UUID, op: str, values: dict[str, Any] | None,
                   read: Decision | None, actor: uuid.UUID | None,
                   guard: Guard | None = None) -> Shaped:
        """`write_one` by shape."""
        key = self.shape_key("write", guard, op, None if values is None else tuple(values),
                             read=read)
        return Shaped(key, self.write_params(uid, values, actor, guard),
                      lambda: self.write_one(uid, op, values, read, actor, guard))

    def insert(self, uid: uuid.UUID, values: dict[str, Any], read: Decision | None,
               guard: Guard | None, actor: uuid.UUID | None) -> Any:
        """One statement: insert the row, only when it matches the writer's row policy (and the
        guard holds), with its change-log row; returns the row and whether the writer may read
        it. No row back (with the guard holding) means the policy refused it."""
        table = self.table.table
        principal = self.access.principal
        bound = {"uid": named("B_uid", uid, table.c.uid.type),
                 "org_uid": named("B_org", principal.org_uid, table.c.org_uid.type),
                 **{name: named(f"B_v_{name}", value, table.c[name].type)
                    for name, value in values.items()}}
        # The policy is judged on the row as it will be, before it exists: columns not given
        # are NULL, timestamps are now().
        now = func.now()
        stand_in: dict[Any, Any] = {table.c[c.name]: bound.get(c.name, literal(None, table.c[c.name].type))
                    for c in self.table.definition.columns}
        stand_in.update({table.c.uid: bound["uid"], table.c.org_uid: bound["org_uid"],
                         table.c.created_at: now, table.c.updated_at: now})
        allowed = _substituted(self.policy_holds(), stand_in)
        condition: list[Any] = [allowed]
        facts = guard.cte() if guard is not None else None
        if guard is not None:
            condition.append(guard.holds(facts))
        source = select(*bound.values()).where(and_(*condition))
        inserted = (table.insert().from_select(list(bound), source)
                    .returning(*table.c, self.readable(read).label("_readable"))
                    .cte("inserted"))
        log = self._log(inserted, INSERT, actor)
        if facts is None:
            return select(*inserted.c).add_cte(log)
        return (select(*facts_where_no_row(facts, inserted.c.uid), *inserted.c)
                .select_from(facts.outerjoin(inserted, true())).add_cte(log))

    def _log(self, written: Any, op: str, actor: uuid.UUID | None, old: bool = False) -> Any:
        """The change-log rows of what `written` (a DML CTE) returned, in the same statement,
        so the write and its log entry commit or roll back together."""
        principal = self.access.principal
        c = t.changes.c
        columns = ["app_uid", "table_name", "op", "row_uid", "org_uid", "actor_uid"]
        picked = [named("B_app", principal.app_uid, c.app_uid.type), literal(self.table.name),
                  literal(op), written.c.uid, written.c.org_uid,
                  named("B_actor", actor, c.actor_uid.type)]
        if old:
            columns.append("old_row")
            picked.append(written.c._old.op("-")(literal("deleted_at")))
        return t.changes.insert().from_select(columns, select(*picked).select_from(written)
                                              ).cte("logged")

    def write_one(self, uid: uuid.UUID, op: str, values: dict[str, Any] | None,
                  read: Decision | None, actor: uuid.UUID | None,
                  guard: Guard | None = None) -> Any:
        """UPDATE (values given) or DELETE of one planned row with its change-log row, in one
        statement. Returns the row, whether it still matches the writer's policy (`_allowed`)
        and whether the writer may read it (`_readable`); for a delete, its old image.

        With a guard, the statement also checks the facts (and returns them), and an update
        only happens when the row as updated still matches the writer's policy: no row back
        (with the guard holding) is a miss for the caller to explain."""
        table = self.table.table
        match: ColumnElement[bool] = table.c.uid == named("B_uid", uid, table.c.uid.type)
        facts = guard.cte() if guard is not None else None
        if guard is not None:
            match = and_(match, guard.holds(facts))
        if values is not None:
            if guard is not None:
                after: dict[Any, Any] = {table.c[k]: named(f"B_v_{k}", v, table.c[k].type)
                                         for k, v in values.items()}
                after[table.c.updated_at] = func.clock_timestamp()
                match = and_(match, _substituted(self.policy_holds(), after))
            dml = self.update(values, match).returning(
                *table.c, self.policy_holds().label("_allowed"),
                self.readable(read).label("_readable"))
            written = dml.cte("written")
            log = self._log(written, op, actor)
        else:
            dml = self.delete(match).returning(table.c.uid, table.c.org_uid,
                                               self.old_image().label("_old"))
            written = dml.cte("written")
            log = self._log(written, op, actor, old=True)
        if facts is None:
            return select(*written.c).add_cte(log)
        return (select(*facts_where_no_row(facts, written.c.uid), *written.c)
                .select_from(facts.outerjoin(written, true())).add_cte(log))

    def update(self, values: dict[str, Any], extra: ColumnElement[bool] | None = None) -> Any:
        """UPDATE of the planned rows (and `extra`), stamping updated_at."""
        table = self.table.table
        where = self.where() if extra is None else and_(extra, self.where())
        return table.update().where(where).values(
            **{k: named(f"B_v_{k}", v, table.c[k].type) for k, v in values.items()},
            updated_at=func.clock_timestamp())

    def delete(self, extra: ColumnElement[bool] | None = None) -> Any:
        """DELETE of the planned rows (soft delete: stamp deleted_at)."""
        table = self.table.table
        where = self.where() if extra is None else and_(extra, self.where())
        if self.table.soft_delete:
            return table.update().where(where).values(deleted_at=func.clock_timestamp())
        return table.delete().where(where)

    def old_image(self) -> Any:
        """The row as it stood, as JSON (what a delete's change-log entry keeps)."""
        return literal_column(f'to_jsonb("{self.table.name}".*)')


def _substituted(clause: ColumnElement[bool], columns: dict[Any, Any]) -> ColumnElement[bool]:
    """`clause` with the table's columns replaced by the given expressions."""

    def replace(element: Any, **_: Any) -> Any:
        return columns.get(element)

    replaced: ColumnElement[bool] = visitors.replacement_traverse(clause, {}, replace)
    return replaced
