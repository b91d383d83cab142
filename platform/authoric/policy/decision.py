"""One authorization decision: may this principal do this action on this table, and on which
rows, seeing which columns. Routes, the write service and the subscribe fan-out all use it.

How it is computed:
- the roles granting the action are the principal's roles that Casbin says grant
  `{table}:{action}`; none → not allowed;
- the row filter is the principal's org, plus (for tables with soft delete) live rows,
  plus the OR of the granting roles' row policies on the table; a granting role with no
  policy lifts the policy part entirely;
- the redaction set is the columns that every role granting `read` on the table redacts
  (all columns when no role grants `read`).
A policy that no longer compiles (a dropped column, a bad operator) makes the decision fail
closed: the request is refused rather than served without the policy.

Decisions are computed once per (catalog version, table, action, role set, and the principal
attributes the table's row policies name) and kept on the app's snapshot, so Casbin (the
source of truth for grants) is asked once per role set and version, not on every request.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_
from sqlalchemy.sql.elements import ColumnElement

from authoric.catalog.enforcer import granting_roles
from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import BadRequest, Forbidden
from authoric.policy.principal import Principal
from authoric.query.fields import table_fields
from authoric.query.filters import FilterScope, compile_filter


class PolicyBroken(Forbidden):
    """A row policy that no longer compiles; access is refused until it is fixed."""


@dataclass(frozen=True)
class Decision:
    action: str
    allowed: bool
    policy: ColumnElement[bool] | None  # None: no row policy restricts this principal
    redacted: frozenset[str]
    roles: tuple[str, ...]
    # What this decision was computed from, in one version of the app: equal keys mean an
    # equal decision (plan.binds keys statements by it). None on a draft (a policy preview).
    key: Hashable | None = None


MAX_CACHED = 10_000  # decisions kept per snapshot; a bound, not a working-set estimate


def decide(snapshot: AppSnapshot, principal: Principal, compiled: CompiledTable,
           action: str) -> Decision:
    if principal.acting_as_app:
        # The app itself (server-side SDK): every action, no row policy, nothing redacted,
        # but still only inside the one org it was opened for.
        return Decision(action, True, None, frozenset(), (), ("app", action))
    cache = snapshot.decisions
    used = cache.get(("attributes", compiled.name))
    if used is None:
        used = cache[("attributes", compiled.name)] = tuple(
            sorted(policy_attributes(snapshot, compiled.name)))
    values = principal.attributes()
    key = (compiled.name, action, principal.roles, tuple(values.get(a) for a in used))
    found = cache.get(key)
    if found is None:
        if len(cache) > MAX_CACHED:
            cache.clear()
        try:
            found = _decide(snapshot, principal, compiled, action,
                            None if snapshot.draft else key)
        except PolicyBroken as exc:
            found = exc
        cache[key] = found
    if isinstance(found, PolicyBroken):
        raise found
    return found


def _decide(snapshot: AppSnapshot, principal: Principal, compiled: CompiledTable,
            action: str, key: Hashable | None) -> Decision:
    roles = granting_roles(snapshot.enforcer, principal.roles, compiled.name, action)
    readers = roles if action == "read" else granting_roles(
        snapshot.enforcer, principal.roles, compiled.name, "read")
    redacted = _redacted(snapshot, compiled, readers)
    if not roles:
        return Decision(action, False, None, redacted, (), key)
    return Decision(action, True, _policy(snapshot, principal, compiled, roles), redacted,
                    tuple(roles), key)


def _policy(snapshot: AppSnapshot, principal: Principal, compiled: CompiledTable,
            roles: list[str]) -> ColumnElement[bool] | None:
    documents = [snapshot.roles[r].row_policies.get(compiled.name) for r in roles]
    if any(doc is None for doc in documents):
        return None
    fields = table_fields(compiled)
    clauses = []
    for role, doc in zip(roles, documents, strict=True):
        try:
            clauses.append(compile_filter(doc or {}, FilterScope(fields, principal.attributes())))
        except BadRequest as exc:
            raise PolicyBroken(
                f"the row policy of role {role!r} on {compiled.name!r} is invalid; "
                "access is refused until an operator fixes it",
                {"role": role, "table": compiled.name, "reason": exc.message},
            ) from exc
    return or_(*clauses)


def _redacted(snapshot: AppSnapshot, compiled: CompiledTable, readers: list[str]) -> frozenset[str]:
    names = {c.name for c in compiled.definition.columns}
    if not readers:
        return frozenset(names)
    hidden = set(names)
    for role in readers:
        hidden &= set(snapshot.roles[role].redact.get(compiled.name, []))
    return frozenset(hidden)


def policy_attributes(snapshot: AppSnapshot, table: str) -> set[str]:
    """Which `$principal` attributes any row policy on `table` names (read-class keys)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if list(node) == ["$principal"]:
                found.add(str(node["$principal"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for role in snapshot.roles.values():
        walk(role.row_policies.get(table))
    return found
