"""The edge parser, in process: an HTTP request on a table becomes one `TableRequest`, parsed once,
with what does not parse kept for the pipeline to answer after the gate. No server, no database."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from starlette.requests import Request

from authoric.errors import BadRequest, NotFound, UnsupportedMediaType, ValidationFailed
from authoric.http.edge import accepts, media_type, table_request
from authoric.plan.plan import Page
from authoric.plan.request import Operation, TableRequest, call
from authoric.query.filters import EVERYTHING, parse_filter

PATH = {"app": "shop", "table": "invoices"}


def http(query: str = "", headers: dict[str, str] | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request({"type": "http", "method": "GET", "path": "/shop/autocrud/invoices",
                    "query_string": query.encode(), "headers": raw})


def parsed(operation: Operation, query: str = "", headers: dict[str, str] | None = None,
           raw: bytes | None = None, **path: str) -> TableRequest:
    return table_request(http(query, headers), operation, {**PATH, **path}, raw)


@pytest.mark.parametrize("header, expected", [
    ("application/json", "application/json"), ("Application/JSON; charset=utf-8", "application/json"),
    (" text/csv ;header=present", "text/csv"), ("", ""), (None, ""),
])
def test_a_content_type_is_read_as_its_media_type_alone(header: str | None, expected: str) -> None:
    assert media_type(header) == expected


def test_an_accept_header_names_csv_among_others_with_weights_and_parameters() -> None:
    assert accepts("application/json;q=0.9, text/csv;q=1", "text/csv")
    assert not accepts("text/csv-schema, application/json", "text/csv")
    assert not accepts(None, "text/csv")


def test_a_list_query_becomes_a_filter_tree_and_a_page() -> None:
    request = parsed("list", "status=paid&order=-amount&limit=20&after=abc")
    assert request.action == "read_list" and not request.writes
    assert request.filter.get() == parse_filter({"status": "paid"})
    assert request.page.get() == Page("-amount", 20, "abc")


def test_query_terms_and_a_filter_document_are_joined_by_and() -> None:
    request = parsed("list", 'status=paid&filter={"amount":{"gt":5}}')
    assert request.filter.get() == parse_filter({"and": [{"status": "paid"},
                                                         {"amount": {"gt": 5}}]})


def test_a_list_without_terms_selects_everything_with_the_default_page() -> None:
    request = parsed("list")
    assert request.filter.get() == EVERYTHING and request.page.get() == Page()


@pytest.mark.parametrize("query, error", [
    ("limit=0", BadRequest), ("limit=ten", BadRequest), ("filter={nope", BadRequest),
    ('filter={"amount":{"between":1}}', BadRequest),
])
def test_a_query_that_does_not_parse_is_kept_and_raised_only_when_asked(
        query: str, error: type[Exception]) -> None:
    request = parsed("list", query)  # building the request raises nothing
    with pytest.raises(error):
        request.filter.get()
        request.page.get()


def test_a_row_uid_is_typed_and_a_uid_that_is_no_uid_is_a_missing_row() -> None:
    uid = uuid.uuid4()
    assert parsed("read", uid=str(uid)).row_uid() == uid
    with pytest.raises(NotFound):
        parsed("read", uid="not-a-uid").row_uid()


def test_a_json_body_is_parsed_once_and_its_errors_keep_their_codes() -> None:
    json_headers = {"Content-Type": "application/json; charset=utf-8"}
    assert parsed("create", headers=json_headers, raw=b'{"n": 1}').body.get() == {"n": 1}
    problems: list[tuple[dict[str, str], bytes, type[Exception]]] = [
        ({"Content-Type": "text/plain"}, b'{"n": 1}', UnsupportedMediaType),
        (json_headers, b'{"n": ', BadRequest),
        (json_headers, b"[" * 40 + b"]" * 40, ValidationFailed),
    ]
    for headers, raw, error in problems:
        request = parsed("create", headers=headers, raw=raw)
        with pytest.raises(error):
            request.body.get()


def test_an_import_in_another_media_type_is_refused_as_415_when_checked() -> None:
    assert parsed("import", headers={"Content-Type": "text/csv"}).media.get() is None
    request = parsed("import", headers={"Content-Type": "application/json"})
    with pytest.raises(UnsupportedMediaType):
        request.media.get()


@pytest.mark.parametrize("operation, action", [
    ("read", "read"), ("list", "read_list"), ("export", "read_list"), ("create", "create"),
    ("update", "update"), ("delete", "delete"), ("update_where", "update"),
    ("delete_where", "delete"), ("import", "create"),
])
def test_each_operation_asks_the_gate_for_its_permission(operation: Operation,
                                                         action: str) -> None:
    request: Any = parsed(operation)
    assert request.action == action
    assert request.writes == (operation not in ("read", "list", "export"))


def test_a_python_caller_s_call_is_parsed_as_the_edge_parses_the_same_query() -> None:
    from_python = call("shop", "invoices", "list", filter={"status": "paid"}, order="-amount",
                       limit=20, after="abc", count="exact")
    from_http = parsed("list", "status=paid&order=-amount&limit=20&after=abc&count=exact")
    assert from_python.filter.get() == from_http.filter.get()
    assert from_python.page.get() == from_http.page.get()
    assert from_python.count.get() == from_http.count.get() == "exact"


def test_a_python_caller_s_bad_parts_wait_for_the_gate_with_the_edge_s_codes() -> None:
    bad = call("shop", "invoices", "list", "not-a-uid", filter={"status": {"nope": 1}},
               limit=0, count="some", expand="a.b.c")
    for part, code in ((bad.row_uid, NotFound), (bad.filter.get, BadRequest),
                       (bad.page.get, BadRequest), (bad.count.get, BadRequest),
                       (bad.expand.get, BadRequest)):
        with pytest.raises(code):
            part()


def test_a_create_from_the_edge_carries_its_body_and_expand_and_shares_the_parts_it_leaves_out(
) -> None:
    """A REST client's create: its body and `?expand=` parsed, and the parts a create does not
    take (filter, page, count, media) the same shared defaults for every request, not built
    anew for each one."""
    first = parsed("create", "expand=vendor", {"Content-Type": "application/json"},
                   b'{"title": "a"}')
    second = parsed("create", "", {"Content-Type": "application/json"}, b'{"title": "b"}')
    assert first.body.get() == {"title": "a"} and second.body.get() == {"title": "b"}
    assert first.expand.get() == (("vendor",),) and second.expand.get() == ()
    assert first.filter.get() == EVERYTHING and first.page.get() == Page()
    assert first.count.get() is None and first.media.get() is None
    for part in ("filter", "page", "count", "media"):
        assert getattr(first, part) is getattr(second, part), part
    assert TableRequest("shop", "invoices", "read").filter is first.filter
