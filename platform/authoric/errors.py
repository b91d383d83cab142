"""The closed catalogue of errors clients can see, each with a stable code and status, and the
envelope they are answered in (`ErrorBody`, as the OpenAPI documents declare it).

Services raise these; one handler in `http.errors` turns them into the contract's envelope.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class AuthoricError(Exception):
    """Base of every error a client may receive."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class ErrorDetail(BaseModel):
    """The contract's error object (section 1): in every error answer, and wherever an answer
    reports an error of its own (an index whose build failed)."""

    model_config = ConfigDict(extra="forbid")

    code: str
    message: str
    details: dict[str, Any]


class ErrorBody(BaseModel):
    """Every error response: `{"error": {"code", "message", "details"}}`."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


class BadRequest(AuthoricError):
    status, code = 400, "BAD_REQUEST"


class Unauthenticated(AuthoricError):
    status, code = 401, "UNAUTHENTICATED"


class TokenExpired(AuthoricError):
    status, code = 401, "TOKEN_EXPIRED"


class Forbidden(AuthoricError):
    status, code = 403, "FORBIDDEN"


class TableLocked(AuthoricError):
    status, code = 403, "TABLE_LOCKED"


class NotFound(AuthoricError):
    status, code = 404, "NOT_FOUND"


class NotAcceptable(AuthoricError):
    status, code = 406, "NOT_ACCEPTABLE"


class Conflict(AuthoricError):
    status, code = 409, "CONFLICT"


class PayloadTooLarge(AuthoricError):
    status, code = 413, "PAYLOAD_TOO_LARGE"


class UnsupportedMediaType(AuthoricError):
    status, code = 415, "UNSUPPORTED_MEDIA_TYPE"


class ValidationFailed(AuthoricError):
    status, code = 422, "VALIDATION_FAILED"


class TooManyRequests(AuthoricError):
    status, code = 429, "TOO_MANY_REQUESTS"


class ServiceUnavailable(AuthoricError):
    status, code = 503, "UNAVAILABLE"


class InternalError(AuthoricError):
    status, code = 500, "INTERNAL"


# A 422 lists at most this many problems (as a CSV import lists at most 100 lines): a body
# of 60,000 unknown keys gets a short answer, not one as large as itself.
MAX_LISTED_ERRORS = 100


def invalid_body(exc: Exception, message: str = "the request body is invalid") -> ValidationFailed:
    """A 422 listing each field pydantic refused (`exc` is a pydantic ValidationError), at
    most MAX_LISTED_ERRORS of them."""
    errors: list[Any] = getattr(exc, "errors", lambda: [])()
    return ValidationFailed(message, {"errors": [
        {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
        for e in errors[:MAX_LISTED_ERRORS]
    ]})
