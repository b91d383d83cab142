"""The one place errors become responses: the contract's envelope, never a stack trace."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException

from authoric.db.errors import translate
from authoric.errors import AuthoricError, BadRequest, InternalError, NotFound
from authoric.observability.logs import request_id

log = logging.getLogger("authoric")

_BY_STATUS: dict[int, type[AuthoricError]] = {404: NotFound, 400: BadRequest}


def error_body(error: AuthoricError) -> dict[str, Any]:
    """The contract's envelope, with the request id in `details.requestId` when there is one."""
    body = error.body()
    rid = request_id.get()
    if rid is not None:
        body["error"]["details"] = {**body["error"]["details"], "requestId": rid}
    return body


def error_response(error: AuthoricError) -> JSONResponse:
    return JSONResponse(error_body(error), status_code=error.status, headers=error.headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(AuthoricError)
    async def _known(request: Request, exc: AuthoricError) -> JSONResponse:
        member = getattr(exc, "hidden_conflict_of", None)
        if member is not None:
            # A guess at a value hidden from the writer: counted (after the write rolled
            # back, on a connection of its own); past the limit, 429 instead of the answer.
            services = request.app.state.services
            async with services.engine.begin() as conn:
                verdict = await services.token_limiter.count_hidden_conflict(conn, *member)
            try:
                verdict.raise_if_over()
            except AuthoricError as over:
                return error_response(over)
        return error_response(exc)

    @app.exception_handler(DBAPIError)
    async def _database(_: Request, exc: DBAPIError) -> JSONResponse:
        error = translate(exc)
        if isinstance(error, InternalError):
            log.exception("unexpected database error", exc_info=exc)
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(BadRequest("the request is malformed", {"errors": [
            {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
            for e in exc.errors()]}))

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        kind = _BY_STATUS.get(exc.status_code)
        if kind is not None:
            return error_response(kind(str(exc.detail)))
        code = "METHOD_NOT_ALLOWED" if exc.status_code == 405 else "HTTP_ERROR"
        rid = request_id.get()
        details = {"requestId": rid} if rid is not None else {}
        return JSONResponse({"error": {"code": code, "message": str(exc.detail), "details": details}},
                            status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(InternalError("internal error"))
