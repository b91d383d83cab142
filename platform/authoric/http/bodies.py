"""Typed request bodies: JSON parsed straight into a Pydantic model, and declared in OpenAPI.

A route takes its body as a parameter typed `Body[Model]`, which stands for
`Annotated[Model, Depends(body_of(Model))]`: the model to a type checker, and to FastAPI a
dependency that parses it. The dependency runs after the router's own dependencies (the admin
token check), so a caller without credentials gets 401 whatever it sends. (FastAPI's own body
parameters would read the body before any dependency, and answer 422 for a wrong content
type.) It answers:
- 415 `UNSUPPORTED_MEDIA_TYPE` for a content type other than application/json;
- 400 `BAD_REQUEST` for bytes that are not JSON, or JSON nested deeper than the parser goes;
- 422 `VALIDATION_FAILED` for JSON of the wrong shape (wrong types, unknown or missing fields),
  `details.errors` naming each field.

Parsing is strict: no coercion of "5" into 5 or 1 into true. Routes built with `TypedRoute`
declare the model as the operation's request body, and the error envelope as its error
responses, in the platform's `/openapi.json`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from authoric.catalog.types.builtin import MAX_JSON_DEPTH, json_depth_exceeds
from authoric.errors import BadRequest, ErrorBody, invalid_body
from authoric.http.edge import JSON, require_media
from authoric.http.limits import refuse_nul, too_deep

M = TypeVar("M", bound=BaseModel)


def require_json(request: Request) -> None:
    """415 unless the request says its body is application/json."""
    require_media(request.headers.get("content-type"), JSON)


def parse_body(raw: bytes, model: type[M]) -> M:
    """`raw` as a `model`: 400 when it is not JSON, 422 when it does not fit or nests deeper
    than every JSON body may (MAX_JSON_DEPTH, as on the row routes)."""
    try:
        parsed = model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        if any("recursion limit" in str(error["msg"]) for error in exc.errors()):
            raise too_deep() from exc
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            raise BadRequest("the body is not valid JSON",
                             {"reason": exc.errors()[0]["msg"]}) from exc
        raise invalid_body(exc) from exc
    # Free-form parts (row policies, column defaults) could otherwise nest past the cap. The
    # parser above stops at 200 levels, so this second look cannot overflow.
    value = json.loads(raw)
    if json_depth_exceeds(value, MAX_JSON_DEPTH):
        raise too_deep()
    refuse_nul(raw, value)
    return parsed


def body_of(model: type[M]) -> Callable[[Request], Awaitable[M]]:
    """A FastAPI dependency returning the request body as a `model`."""

    async def typed_body(request: Request) -> M:
        require_json(request)
        return parse_body(await request.body(), model)

    typed_body.body_model = model  # type: ignore[attr-defined]  # read by TypedRoute
    return typed_body


if TYPE_CHECKING:
    Body = Annotated[M, "the request body, parsed by body_of"]
else:
    class Body:
        """`Body[Model]`: a route parameter that is the request body parsed as `Model`."""

        def __class_getitem__(cls, model: type[BaseModel]) -> Any:
            return _parsed(model)

    @cache  # one dependency a model, however many routes take it
    def _parsed(model: type[BaseModel]) -> Any:
        return Annotated[model, Depends(body_of(model))]


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description} for status, description in (
        (400, "malformed JSON or parameters"), (401, "missing or bad credentials"),
        (404, "unknown app, table, org, user or role"), (409, "name taken, or in use"),
        (413, "body over the configured limit"), (415, "not application/json"),
        (422, "a field of the wrong type, unknown or missing; details.errors names it"),
        (429, "too many attempts"),
    )
}


ROW_ERRORS: dict[int | str, dict[str, Any]] = {
    **{status: ERROR_RESPONSES[status] for status in (400, 401, 404, 409, 413, 415, 422)},
    403: {"model": ErrorBody, "description": "the permission is missing, or the operation is "
                                              "switched off for the table"},
}


ROW_VALUES: dict[str, Any] = {
    "title": "RowValues", "type": "object", "additionalProperties": True,
    "description": "The table's columns by name, each with a value of its column's type. "
                   "GET /{app}/openapi.json declares every table's columns."}


def row_body(what: str, *, in_org: bool = False, bulk: bool = False) -> dict[str, Any]:
    """The OpenAPI request body of a generic row write (`openapi_extra` of its route): a JSON
    object of the app's columns; with `in_org`, also the org the operator writes the row into;
    with `bulk`, the columns wrapped in `{"set": ...}` (the filter is in the query). Which
    columns, and their types, are the table's own, so the platform document says so and
    points at the app's document, which declares each table."""
    schema: dict[str, Any] = ROW_VALUES
    if in_org:
        schema = {**schema, "title": "OrgRowValues", "required": ["org"], "properties": {
            "org": {"type": "string", "format": "uuid", "description": "the row's org (uid)"}}}
    if bulk:
        schema = {"title": "BulkSet", "type": "object", "required": ["set"],
                  "additionalProperties": False, "properties": {"set": schema},
                  "description": "The columns to set on every matching row. "
                                 + ROW_VALUES["description"]}
    return {"requestBody": {"required": True, "description": what,
                            "content": {"application/json": {"schema": schema}}}}


def csv_body(what: str) -> dict[str, Any]:
    """The OpenAPI request body of a CSV import: text/csv, a header line naming columns."""
    return {"requestBody": {"required": True, "description": what, "content": {
        "text/csv": {"schema": {"type": "string", "description": "UTF-8 CSV; the header line "
                                                                 "names the table's columns"}}}}}


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    """`schema` with its local `$ref`s replaced by the definitions (request models are trees)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {key: _inline(value, defs) for key, value in schema.items() if key != "$defs"}
    if isinstance(schema, list):
        return [_inline(item, defs) for item in schema]
    return schema


def request_body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of `model` as clients send it (aliases), self-contained."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    inlined: dict[str, Any] = _inline(schema, schema.get("$defs", {}))
    return inlined


class TypedRoute(APIRoute):
    """A route whose `body_of` parameter is declared as its OpenAPI request body."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        models = [getattr(d.call, "body_model", None) for d in self.dependant.dependencies]
        model = next((m for m in models if m is not None), None)
        if model is not None:
            self.openapi_extra = {**(self.openapi_extra or {}), "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": request_body_schema(model)}},
            }}
