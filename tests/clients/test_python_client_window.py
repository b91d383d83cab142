"""The Python client's pure parts, in-process: SSE framing, and the live query's window,
which must either apply an event exactly as a fresh list would show it or ask for a reload."""

from __future__ import annotations

from typing import Any

from authoric_client.kinds import Kinds, kinds_of
from authoric_client.sse import Frame, FrameParser
from authoric_client.window import Order, Window, matches
from hypothesis import given, settings
from hypothesis import strategies as st


def test_frames_split_across_chunks_and_line_endings_parse_whole() -> None:
    parser = FrameParser()
    text = ("event: connected\r\ndata: {\"live\":true}\r\n\r\n: ping\n\n"
            "id: 7\ndata: {\"op\":\ndata: \"insert\"}\n\nid: 8\rdata: x\r\r\n")
    frames = [frame for i in range(len(text)) for frame in parser.feed(text[i])]
    assert frames == [Frame("connected", '{"live":true}', None),
                      Frame("message", '{"op":\n"insert"}', "7"), Frame("message", "x", "8")]


def test_filters_are_decided_here_only_when_the_answer_is_certain() -> None:
    row = {"uid": "1", "status": "open", "seq": 3, "amount": "10.00", "due": None}
    assert matches(row, {"status": "open"}) is True
    assert matches(row, {"status": {"in": ["paid", "void"]}}) is False
    assert matches(row, {"or": [{"seq": {"gt": 5}}, {"due": {"is_null": True}}]}) is True
    assert matches(row, {"not": {"seq": {"lte": 3}}}) is False
    assert matches(row, {"amount": "10.00"}) is True  # the very same string
    assert matches(row, {"amount": "10.0"}) is None  # a decimal spelled otherwise: ask
    assert matches(row, {"status": {"like": "op%"}}) is None
    assert matches(row, {"status": {"gt": "a"}}) is None  # text order is the collation's
    assert matches(row, {"and": [{"status": "paid"}, {"status": {"like": "x"}}]}) is False


KINDS: Kinds = {"uid": "uuid", "status": "text", "seq": "integer", "amount": "numeric",
                "due": "date", "createdAt": "timestamp", "meta": "json"}


def test_with_column_kinds_numbers_dates_and_times_compare_as_values() -> None:
    row = {"uid": "1", "status": "open", "seq": 3, "amount": "9.99", "due": "2026-03-01",
           "createdAt": "2026-01-01T10:00:00+02:00", "meta": {"a": 1}}
    assert matches(row, {"amount": {"lt": "10.5"}}, KINDS) is True  # as text, "9.99" > "10.5"
    assert matches(row, {"amount": "9.990"}, KINDS) is True  # the server's spelling may differ
    assert matches(row, {"amount": {"in": ["1", 9.99]}}, KINDS) is True
    assert matches(row, {"due": {"gte": "2026-02-28", "lt": "2026-03-02"}}, KINDS) is True
    assert matches(row, {"createdAt": {"lt": "2026-01-01T09:00:00Z"}}, KINDS) is True
    assert matches(row, {"seq": {"gt": "2"}}, KINDS) is True
    assert matches({**row, "amount": None}, {"amount": {"gte": "0"}}, KINDS) is False  # NULL
    assert matches({**row, "amount": "[redacted]"}, {"amount": {"gte": "0"}}, KINDS) is None
    assert matches(row, {"status": {"gt": "a"}}, KINDS) is None  # the collation's order
    assert matches(row, {"meta": {"a": 1}}, KINDS) is None
    early = {"uid": "2", "amount": "10.5", "due": "2025-12-31", "status": "b"}
    assert Order("amount", KINDS).before(row, early) is True
    assert Order("-due", KINDS).before(row, early) is True
    assert Order("status", KINDS).before(row, early) is None


def test_kinds_are_read_from_a_row_schema_of_the_openapi_document() -> None:
    doc = {"components": {"schemas": {"invoices": {"properties": {
        "uid": {"type": "string", "format": "uuid"},
        "amount": {"anyOf": [{"type": "string", "format": "decimal"}, {"type": "null"},
                             {"type": "string", "enum": ["[redacted]"]}]},
        "seq": {"anyOf": [{"type": "integer", "format": "int64"}, {"type": "null"}]},
        "due": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        "status": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
        "meta": {"description": "any JSON value"},
        "createdAt": {"type": "string", "format": "date-time"}}}}}}
    assert kinds_of(doc, "invoices") == {"uid": "uuid", "amount": "numeric", "seq": "integer",
                                         "due": "date", "status": "text", "meta": "json",
                                         "createdAt": "timestamp"}
    assert kinds_of(doc, "vendors") == {}


def test_orders_are_known_for_uid_server_times_integers_and_booleans_only() -> None:
    a = {"uid": "01", "seq": None, "createdAt": "2026-01-01T00:00:00Z", "name": "b"}
    b = {"uid": "02", "seq": 1, "createdAt": "2026-01-01T00:00:00.5+00:00", "name": "a"}
    assert Order("seq").before(b, a) is True and Order("-seq").before(b, a) is True  # NULLs last
    assert Order("createdAt").before(a, b) is True and Order("-createdAt").before(a, b) is False
    assert Order(None).before(a, b) is True
    assert Order("name").before(a, b) is None


Row = dict[str, Any]


def _expected(truth: dict[str, Row], descending: bool, limit: int | None) -> list[Row]:
    """What the server lists: status open, by seq (NULLs last), ties by uid."""
    rows = [r for r in truth.values() if r["status"] == "open"]
    rows.sort(key=lambda r: r["uid"], reverse=descending)
    rows.sort(key=lambda r: (r["seq"] is None, 0 if r["seq"] is None else
                             (-r["seq"] if descending else r["seq"])))
    return rows if limit is None else rows[:limit]


OPS = st.lists(st.tuples(st.sampled_from(["upsert", "delete"]), st.integers(0, 9),
                         st.none() | st.integers(0, 4), st.sampled_from(["open", "closed"])),
               max_size=40)


@settings(max_examples=300, deadline=None)
@given(OPS, st.booleans(), st.none() | st.integers(1, 4), st.booleans(), st.booleans())
def test_a_window_always_equals_a_fresh_list_or_asks_for_a_reload(
        ops: list[tuple[str, int, int | None, str]], descending: bool, limit: int | None,
        exact_next: bool, typed: bool) -> None:
    truth: dict[str, Row] = {}
    window = Window({"status": "open"}, "-seq" if descending else "seq", limit,
                    KINDS if typed else None)

    def reload() -> None:
        every = _expected(truth, descending, None)
        shown = every if limit is None else every[:limit]
        # A server may say "no next page" only when none is left, or only on a short page.
        complete = len(every) <= len(shown) if exact_next else limit is None or len(shown) < limit
        window.load(shown, complete)

    reload()
    for op, n, seq, status in ops:
        uid = f"u{n}"
        if op == "upsert":
            truth[uid] = {"uid": uid, "seq": seq, "status": status}
            done = window.upsert(truth[uid])
        else:
            truth.pop(uid, None)
            done = window.remove(uid)
        if not done:
            reload()
        assert window.rows == _expected(truth, descending, limit)
