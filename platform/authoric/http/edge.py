"""The edge parser: an HTTP request on a table turned, once, into a `TableRequest` (plan.request),
and the media types and JSON bodies every route reads.

Nothing here touches the database. What does not parse is kept with its error inside the
request (`Checked`), to be answered at the contract's step: after the gate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request

from authoric.catalog.types.builtin import MAX_JSON_DEPTH, json_depth_exceeds
from authoric.errors import BadRequest, UnsupportedMediaType
from authoric.http.limits import refuse_nul, too_deep
from authoric.plan.request import (
    Checked,
    Operation,
    TableRequest,
    checked_filter,
    checked_page,
    checked_uid,
    parse_count,
    parse_expand,
)
from authoric.query.filters import EVERYTHING, Node, query_string_filter

JSON, CSV = "application/json", "text/csv"
# Query parameters of a list that are not filter terms.
RESERVED_PARAMS = frozenset({"order", "limit", "after", "filter", "lastEventId", "count",
                             "expand"})


def media_type(header: str | None) -> str:
    """The media type of a Content-Type header, without its parameters, lower case."""
    return (header or "").split(";", 1)[0].strip().lower()


def accepts(header: str | None, media: str) -> bool:
    """Whether an Accept header names `media` (exactly; parameters and weights ignored)."""
    return any(media_type(part) == media for part in (header or "").split(","))


def require_media(content_type: str | None, media: str, what: str = "the body") -> None:
    """415 unless the request says its body is `media`."""
    if media_type(content_type) != media:
        raise UnsupportedMediaType(f"send {what} as {media}", {"contentType": content_type or ""})


def json_value(content_type: str | None, raw: bytes) -> Any:
    """A JSON body already read whole: 415 for another content type, 400 for malformed JSON,
    422 for nesting deeper than MAX_JSON_DEPTH (at any depth) or a NUL in a key or string."""
    require_media(content_type, JSON)
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest("the body is not valid JSON") from exc
    except RecursionError as exc:  # nesting deeper than the parser goes: past the limit too
        raise too_deep() from exc
    if json_depth_exceeds(value, MAX_JSON_DEPTH):
        raise too_deep()
    refuse_nul(raw, value)  # 422 before any statement: no column can store U+0000
    return value


def filter_document(params: Sequence[tuple[str, str]], raw_filter: str | None,
                    reserved: frozenset[str] = RESERVED_PARAMS) -> Any:
    """The filter document of a query: its terms AND `?filter=` JSON (None when neither)."""
    terms = [k for k in params if k[0] not in reserved]
    documents = [query_string_filter(terms)] if terms else []
    if raw_filter is not None:
        try:
            documents.append(json.loads(raw_filter))
        except (ValueError, RecursionError) as exc:
            raise BadRequest("`filter` is not valid JSON", {"filter": raw_filter[:200]}) from exc
    if not documents:
        return None
    return documents[0] if len(documents) == 1 else {"and": documents}


def query_filter(params: Sequence[tuple[str, str]], raw_filter: str | None,
                 reserved: frozenset[str] = RESERVED_PARAMS) -> Checked[Node]:
    """The filter tree of a query, parsed (or its error kept)."""
    try:
        document = filter_document(params, raw_filter, reserved)
    except BadRequest as exc:
        return Checked(EVERYTHING, exc)
    return checked_filter(document)


def table_request(request: Request, operation: Operation, path: Mapping[str, str],
                  raw: bytes | None = None,
                  reserved: frozenset[str] = RESERVED_PARAMS) -> TableRequest:
    """The `TableRequest` of an HTTP request on a table route: `path` holds `app`, `table` and
    perhaps `uid`; `raw` is the body, already read whole, for operations that take one."""
    q, headers = request.query_params, request.headers
    uid = path.get("uid")
    content_type = headers.get("content-type")
    # The parts this operation takes, then one frozen request built from them.
    parts: dict[str, Any] = {}
    if operation in ("list", "export", "update_where", "delete_where"):
        parts["filter"] = query_filter(q.multi_items(), q.get("filter"), reserved)
        parts["page"] = checked_page(q.get("order"), q.get("limit"), q.get("after"))
    if operation == "list":
        parts["count"] = Checked.of(lambda: parse_count(q.get("count")), None)
    if operation in ("read", "list", "create", "update"):
        parts["expand"] = Checked.of(lambda: parse_expand(q.get("expand")), ())
    if raw is not None:
        parts["body"] = Checked.of(lambda: json_value(content_type, raw), None)
    if operation == "import":
        parts["media"] = Checked.of(lambda: require_media(content_type, CSV, "the file"), None)
    return TableRequest(path["app"], path["table"], operation,
                        None if uid is None else checked_uid(uid), **parts)
