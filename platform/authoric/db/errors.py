"""Database errors a client can cause, translated by SQLSTATE into the contract's errors."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from authoric.errors import (
    AuthoricError,
    Conflict,
    InternalError,
    ServiceUnavailable,
    ValidationFailed,
)


def sqlstate(exc: DBAPIError) -> str | None:
    orig = exc.orig
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


def translate(exc: DBAPIError) -> AuthoricError:
    state = sqlstate(exc) or ""
    if state == "23505":
        return Conflict("a row with this value already exists", {"reason": "unique_violation"})
    if state == "23503":
        return Conflict("the row references a missing row, or is referenced by another",
                        {"reason": "foreign_key_violation"})
    if state in ("57014", "55P03", "40P01", "40001"):
        return ServiceUnavailable("the database gave up on this request; retry it",
                                  {"reason": "timeout_or_conflict"}, {"Retry-After": "1"})
    if state == "54000":  # program_limit_exceeded: a value too long to index or search
        return ValidationFailed("a value is too large to index or search; shorten it",
                                {"reason": "program_limit_exceeded"})
    if state.startswith("22") or state.startswith("23"):
        return ValidationFailed("a value does not fit its column", {"reason": state})
    if state.startswith("08") or state.startswith("57P"):
        return ServiceUnavailable("the database is unavailable", headers={"Retry-After": "1"})
    return InternalError("internal error")
