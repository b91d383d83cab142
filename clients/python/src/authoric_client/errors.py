"""`AuthoricError`: every refusal of the server (contract section 1) as one exception type."""

from __future__ import annotations

from typing import Any

import httpx


class AuthoricError(Exception):
    """The server refused a call: `status` (HTTP), `code` (stable, e.g. `VALIDATION_FAILED`),
    `message` (for people) and `details` (what exactly, e.g. which column)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.retry_after = retry_after  # seconds, from a 429's Retry-After

    @classmethod
    def from_response(cls, response: httpx.Response) -> AuthoricError:
        """The error a non-2xx response carries (a body that is not section 1's is still one)."""
        try:
            error = response.json()["error"]
            code, message = str(error["code"]), str(error.get("message", ""))
            details = error.get("details") or {}
        except (ValueError, KeyError, TypeError):
            code, message, details = _status_code(response.status_code), response.text[:200], {}
        return cls(response.status_code, code, message, details, retry_after(response))


def _status_code(status: int) -> str:
    return {401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND",
            429: "TOO_MANY_REQUESTS"}.get(status, "SERVER_ERROR" if status >= 500 else "BAD_REQUEST")


def retry_after(response: httpx.Response) -> float | None:
    """Seconds a `Retry-After` header asks for (the seconds form; a date is not sent here)."""
    raw = response.headers.get("Retry-After")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None
