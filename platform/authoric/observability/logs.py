"""Log lines: plain text for a terminal, or one JSON object per line
(`AUTHORIC_LOG_FORMAT=json`) for a log pipeline, each carrying the request id of the request
that caused it (the `X-Request-ID` header, see http.observe).

The request id travels in a context variable: set by the middleware for the request's task,
read by a logging filter and by the error envelope.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
from typing import Any

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "authoric_request_id", default=None)

# Attributes every LogRecord has: anything else was passed in `extra=` and is kept.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "request_id", "color_message"}


class RequestIdFilter(logging.Filter):
    """Puts the current request id (or None) on every record as `request_id`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, pid, message, requestId, extras, exc."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,  # which worker, with --workers N
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None)
        if rid is not None:
            out["requestId"] = rid
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def log_config(fmt: str, level: str = "info", access_log: bool = True) -> dict[str, Any]:
    """The `logging.dictConfig` for uvicorn and for our own loggers. In JSON mode the access
    log is ours (`authoric.access`, with the request id and route), not uvicorn's."""
    level = level.upper()
    access_level = "INFO" if access_log and fmt == "json" else "WARNING"
    formatter: dict[str, Any] = (
        {"()": JsonFormatter} if fmt == "json"
        else {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"})
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {"default": formatter},
        "handlers": {"default": {"class": "logging.StreamHandler", "formatter": "default",
                                 "filters": ["request_id"], "stream": "ext://sys.stderr"}},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["default"], "level": level, "propagate": False},
            "authoric": {"handlers": ["default"], "level": level, "propagate": False},
            "authoric.access": {"level": access_level},
        },
    }
