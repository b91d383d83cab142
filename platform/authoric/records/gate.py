"""The gate every table route passes; it lives in the plan layer (`authoric.plan.access`), where
access is the first part of every plan. Re-exported here for the record services."""

from __future__ import annotations

from authoric.plan.access import (
    OPERATION_OF,
    READ_ACTIONS,
    Access,
    admit,
    operation_enabled,
    reader,
)

__all__ = ["OPERATION_OF", "READ_ACTIONS", "Access", "admit", "operation_enabled", "reader"]
