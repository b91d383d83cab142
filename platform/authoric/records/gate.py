"""The gate every table route passes, in the contract's order: table exists (404), operation
switched on (403 TABLE_LOCKED), permission (403 FORBIDDEN). It yields the decision to use."""

from __future__ import annotations

from dataclasses import dataclass

from authoric.catalog.schema import CompiledTable
from authoric.catalog.snapshot import AppSnapshot
from authoric.errors import Forbidden, TableLocked
from authoric.policy.decision import Decision, decide
from authoric.policy.principal import Principal

READ_ACTIONS = frozenset({"read_list", "read"})
OPERATION_OF = {"read_list": "list", "read": "read", "create": "create", "update": "update",
                "delete": "delete"}


@dataclass(frozen=True)
class Access:
    """What a principal may do on one table for one action: the table and the decision."""

    snapshot: AppSnapshot
    principal: Principal
    table: CompiledTable
    decision: Decision


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
        raise Forbidden("an impersonation token is read-only",
                        {"permission": f"{table_name}:{action}",
                         "reason": "impersonation_read_only"})
    decision = decide(snapshot, principal, table, action)
    if not decision.allowed:
        raise Forbidden(f"missing permission {table_name}:{action}",
                        {"permission": f"{table_name}:{action}"})
    return Access(snapshot, principal, table, decision)


def reader(snapshot: AppSnapshot, principal: Principal, table: CompiledTable) -> Decision | None:
    """The read decision, when this principal may read single rows of the table at all."""
    if not operation_enabled(table, "read"):
        return None
    decision = decide(snapshot, principal, table, "read")
    return decision if decision.allowed else None
