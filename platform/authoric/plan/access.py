"""Who may do what on one table: the gate every table route passes, and the access it yields.

The gate runs in the contract's order: table exists (404), operation switched on (403
TABLE_LOCKED), permission (403 FORBIDDEN). Its answer, an `Access`, is the first part of every
plan. An operator access (the admin console) sees every org, with no row policy and nothing
redacted; it is only ever built from the admin token, never from an app token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from authoric.catalog.enforcer import build_enforcer
from authoric.catalog.roles import RoleDef
from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import Forbidden, TableLocked, read_only
from authoric.policy.decision import Decision, decide
from authoric.policy.principal import Principal

OPERATION_OF = {"read_list": "list", "read": "read", "create": "create", "update": "update",
                "delete": "delete"}
READ_ACTIONS = frozenset({"read_list", "read"})


@dataclass(frozen=True)
class Access:
    """What a principal may do on one table for one action: the table and the decision."""

    snapshot: AppSnapshot
    principal: Principal
    table: CompiledTable
    decision: Decision
    operator: bool = False  # the admin console's view: every org, no policy, no redaction
    # Asked by the operator (admin token), in every org or in one: rows carry their org, and
    # a count may be the planner's estimate (records.pipeline).
    for_operator: bool = False

    def row_json(self, row: Any, redacted: frozenset[str]) -> dict[str, Any]:
        """The contract's row shape; the operator's rows also carry their org (`org`)."""
        shown = self.table.row_json(row, redacted)
        if self.for_operator:
            shown["org"] = str(row["org_uid"])
        return shown


def operation_enabled(table: CompiledTable, action: str) -> bool:
    return bool(getattr(table.definition.operations, OPERATION_OF[action]))


def admit(snapshot: AppSnapshot, principal: Principal, table_name: str, action: str) -> Access:
    table = snapshot.table(table_name)
    # Operation switches govern the generic API; the app's own jobs may still write.
    if not principal.acting_as_app and not operation_enabled(table, action):
        raise TableLocked(f"{OPERATION_OF[action]} is switched off on {table_name!r}",
                          {"table": table_name, "operation": OPERATION_OF[action]})
    if principal.read_only and action not in READ_ACTIONS:
        # An impersonation token is refused at the permission step, whatever the roles say.
        raise read_only(f"{action} on {table_name!r}", {"permission": f"{table_name}:{action}"})
    decision = decide(snapshot, principal, table, action)
    if not decision.allowed:
        raise Forbidden(f"missing permission {table_name}:{action}",
                        {"permission": f"{table_name}:{action}"})
    return Access(snapshot, principal, table, decision)


def operator_access(snapshot: AppSnapshot, principal: Principal, table_name: str,
                    action: str) -> Access:
    """The operator's access (admin token): every org, no row policy, nothing redacted,
    operation switches ignored. `principal` names the org a write goes to."""
    table = snapshot.table(table_name)
    return Access(snapshot, principal, table,
                  Decision(action, True, None, frozenset(), (), ("operator", action)),
                  operator=True, for_operator=True)


def reader(snapshot: AppSnapshot, principal: Principal, table: CompiledTable) -> Decision | None:
    """The read decision, when this principal may read single rows of the table at all."""
    if not operation_enabled(table, "read"):
        return None
    decision = decide(snapshot, principal, table, "read")
    return decision if decision.allowed else None


def with_draft_role(snapshot: AppSnapshot, name: str, role: RoleDef | None) -> AppSnapshot:
    """The app as it would be with role `name` replaced by `role` (removed when None), for a
    dry run: admit and plan against it exactly as a request would, nothing saved."""
    roles = {k: v for k, v in snapshot.roles.items() if k != name}
    if role is not None:
        roles[name] = role
    return replace(snapshot, roles=roles, enforcer=build_enforcer(roles), draft=True)
