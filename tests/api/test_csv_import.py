"""CSV import (contract sections 4 and 5): `POST /{app}/autocrud/{table}/import` with `text/csv`.

Callers: a clerk of one org importing files good and bad, a clerk of another org, members
without the permission or confined by a row policy, and subscribers watching the table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess, start_server
from tests.sse import SSEClient, db_value, strictly_increasing


@pytest.fixture(autouse=True)
def no_stack_traces(server: ServerProcess) -> Iterator[None]:
    before = len(server.log())
    yield
    assert "Traceback" not in server.log()[before:], server.log()[before:]


@pytest.fixture
def ledger(world: AppWorld) -> AppWorld:
    """Vendors and `things` (a column of every type) in orgs A and B; `clerk` may do all."""
    world.table("vendors", [{"name": "name", "type": "text", "required": True, "unique": True}])
    world.table("things", [
        {"name": "title", "type": "text", "required": True},
        {"name": "qty", "type": "integer"},
        {"name": "amount", "type": "numeric"},
        {"name": "paid", "type": "boolean"},
        {"name": "due_at", "type": "timestamp"},
        {"name": "due_on", "type": "date"},
        {"name": "external_id", "type": "uuid"},
        {"name": "meta", "type": "json"},
        {"name": "vendor", "type": "reference", "references": "vendors"},
        {"name": "code", "type": "text", "unique": True},
    ])
    world.role("clerk", ["vendors:*", "things:*"])
    world.org("A")
    world.org("B")
    return world


def _clerk(world: AppWorld, org: str = "A") -> Caller:
    return world.caller(world.orgs[org], ["clerk"])


def _import(caller: Caller, world: AppWorld, table: str, body: bytes | str,
            content_type: str = "text/csv") -> httpx.Response:
    data = body.encode() if isinstance(body, str) else body
    return caller.post(f"{world.rows(table)}/import", content=data,
                       headers={"Content-Type": content_type})


def _things(world: AppWorld, caller: Caller) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = expect(caller.get(world.rows("things"), params={
        "limit": 1000, "order": "createdAt"}), 200)["items"]
    return items


def _app_uid(world: AppWorld) -> uuid.UUID:
    return uuid.UUID(expect(world.admin.get(f"/admin/apps/{world.name}"), 200)["uid"])


def _log_count(database_url: str, world: AppWorld) -> int:
    return int(db_value(database_url, "SELECT count(*) FROM authoric.changes WHERE app_uid = $1",
                        _app_uid(world)))


def _errors(response: httpx.Response) -> list[dict[str, Any]]:
    body = expect(response, 422, "VALIDATION_FAILED")
    rows: list[dict[str, Any]] = body["error"]["details"]["rows"]
    for row in rows:
        assert set(row) == {"line", "column", "message"}, row
        assert isinstance(row["line"], int) and row["message"], row
    return rows


# Values ------------------------------------------------------------------------------------

def test_clerk_imports_a_value_of_every_column_type_and_reads_the_same_rows_back(
        ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    vendor = expect(clerk.post(ledger.rows("vendors"), json={"name": "Paper Co"}), 201)
    ext = str(uuid.uuid4())
    csv = (
        "title,qty,amount,paid,due_at,due_on,external_id,meta,vendor_uid\n"
        f'plain,1,8760.00,true,2026-03-01T10:00:00Z,2026-03-31,{ext},"{{""a"": [1, 2]}}",{vendor["uid"]}\n'
        'second,-42,0.5,false,2026-03-01T10:00:00+02:00,2024-02-29,,"""text""",\n'
        "third,9223372036854775807,-12.345,1,2026-03-01T10:00:00.123456-05:30,,,[],\n"
        "fourth,0,1e3,0,2026-12-31T23:59:59+00:00,,,null,\n"
        "fifth,,,yes,,,,,\n"
        "sixth,,,NO,,,,42,\n"
        '"Ünïcode, ✓ and ""quotes""",,,,,,,"{""nested"": {""k"": true}}",\n'
    )
    assert expect(_import(clerk, ledger, "things", csv), 201) == {"inserted": 7}
    rows = {r["title"]: r for r in _things(ledger, clerk)}
    assert len(rows) == 7
    plain = rows["plain"]
    assert (plain["qty"], plain["amount"], plain["paid"], plain["due_at"], plain["due_on"],
            plain["external_id"], plain["meta"], plain["vendor_uid"]) == (
        1, "8760.00", True, "2026-03-01T10:00:00Z", "2026-03-31", ext, {"a": [1, 2]},
        vendor["uid"])
    second = rows["second"]
    assert (second["qty"], second["amount"], second["paid"], second["due_at"], second["due_on"],
            second["meta"], second["external_id"], second["vendor_uid"]) == (
        -42, "0.5", False, "2026-03-01T08:00:00Z", "2024-02-29", "text", None, None)
    third = rows["third"]
    assert (third["qty"], third["amount"], third["paid"], third["due_at"], third["meta"]) == (
        2**63 - 1, "-12.345", True, "2026-03-01T15:30:00.123456Z", [])
    assert rows["fourth"]["paid"] is False and rows["fourth"]["meta"] is None
    assert rows["fourth"]["due_at"] == "2026-12-31T23:59:59Z"
    assert rows["fourth"]["amount"] in ("1E+3", "1000")
    assert rows["fifth"]["paid"] is True and rows["fifth"]["qty"] is None
    assert rows["fifth"]["amount"] is None and rows["fifth"]["meta"] is None
    assert rows["sixth"]["paid"] is False and rows["sixth"]["meta"] == 42
    assert rows['Ünïcode, ✓ and "quotes"']["meta"] == {"nested": {"k": True}}
    for row in rows.values():
        assert set(row) >= {"uid", "createdAt", "updatedAt"}
        assert uuid.UUID(row["uid"]).version == 7


def test_clerk_imports_a_file_whose_header_names_references_either_way(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    vendor = expect(clerk.post(ledger.rows("vendors"), json={"name": "Paper Co"}), 201)
    expect(_import(clerk, ledger, "things", f"title,vendor\nx,{vendor['uid']}\n"), 201)
    assert _things(ledger, clerk)[0]["vendor_uid"] == vendor["uid"]


def test_columns_left_out_of_the_file_take_their_defaults_of_every_type(world: AppWorld) -> None:
    world.table("tickets", [
        {"name": "title", "type": "text", "required": True},
        {"name": "status", "type": "text", "default": "open"},
        {"name": "priority", "type": "integer", "default": 3},
        {"name": "weight", "type": "numeric", "default": "1.50"},
        {"name": "urgent", "type": "boolean", "default": False},
        {"name": "due_on", "type": "date", "default": "2027-01-31"},
        {"name": "due_at", "type": "timestamp", "default": "2027-01-31T12:00:00Z"},
        {"name": "meta", "type": "json", "default": {"source": "import"}},
    ])
    world.role("clerk", ["tickets:*"])
    clerk = world.caller(world.org("A"), ["clerk"])
    expect(clerk.post(f"{world.rows('tickets')}/import", content=b"title\nfirst\nsecond\n",
                      headers={"Content-Type": "text/csv"}), 201)
    rows = expect(clerk.get(world.rows("tickets")), 200)["items"]
    via_json = expect(clerk.post(world.rows("tickets"), json={"title": "third"}), 201)
    expected = {k: via_json[k] for k in ("status", "priority", "weight", "urgent", "due_on",
                                         "due_at", "meta")}
    assert expected == {"status": "open", "priority": 3, "weight": "1.50", "urgent": False,
                        "due_on": "2027-01-31", "due_at": "2027-01-31T12:00:00Z",
                        "meta": {"source": "import"}}
    assert [{k: r[k] for k in expected} for r in rows] == [expected, expected]


def test_clerk_importing_values_that_do_not_fit_their_columns_gets_each_one_listed(
        ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    csv = ("title,qty,amount,paid,due_at,due_on,external_id,meta\n"
           "ok,1,1.0,true,2026-01-01T00:00:00Z,2026-01-01,,{}\n"
           "a,one,,,,,,\n"
           "b,,1.2.3,,,,,\n"
           "c,,,maybe,,,,\n"
           "d,,,,2026-01-01T00:00:00,,,\n"
           "e,,,,,2026-13-01,,\n"
           "f,,,,,,not-a-uuid,\n"
           "g,,,,,,,{bad\n"
           "h,99999999999999999999,NaN,,,,,\n"
           ",1,,,,,,\n")
    rows = _errors(_import(clerk, ledger, "things", csv))
    assert [(r["line"], r["column"]) for r in rows] == [
        (3, "qty"), (4, "amount"), (5, "paid"), (6, "due_at"), (7, "due_on"),
        (8, "external_id"), (9, "meta"), (10, "qty"), (10, "amount"), (11, "title")]
    assert _things(ledger, clerk) == []


def test_clerk_importing_an_instant_past_the_year_9999_in_utc_gets_it_refused_and_lists_work(
        ledger: AppWorld) -> None:
    """PostgreSQL would store 9999-12-31T23:59:59-12:00 (the year 10000 in UTC), and then no
    list of the table could be answered: the cell is refused like any that does not fit."""
    clerk = _clerk(ledger)
    csv = ("title,due_at\n"
           "last,9999-12-31T00:00:00Z\n"
           "past,9999-12-31T23:59:59-12:00\n"
           "before,0001-01-01T00:00:00+01:00\n")
    rows = _errors(_import(clerk, ledger, "things", csv))
    assert [(r["line"], r["column"]) for r in rows] == [(3, "due_at"), (4, "due_at")]
    assert _things(ledger, clerk) == []
    expect(_import(clerk, ledger, "things", "title,due_at\nlast,9999-12-31T00:00:00Z\n"), 201)
    assert [r["due_at"] for r in _things(ledger, clerk)] == ["9999-12-31T00:00:00Z"]


# Header ------------------------------------------------------------------------------------

def test_clerk_importing_a_file_with_an_unknown_column_gets_422_naming_it_before_any_row(
        ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    rows = _errors(_import(clerk, ledger, "things", "title,colour\nx,red\ny,blue,extra\n"))
    assert rows == [{"line": 1, "column": "colour", "message": rows[0]["message"]}]
    assert _things(ledger, clerk) == []


def test_clerk_importing_a_file_without_a_required_column_gets_422_naming_it(
        ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    rows = _errors(_import(clerk, ledger, "things", "qty,amount\n1,2\n"))
    assert [(r["line"], r["column"]) for r in rows] == [(1, "title")]
    assert _things(ledger, clerk) == []


@pytest.mark.parametrize("header", ["uid", "createdAt", "updatedAt", "org_uid", "deletedAt"])
def test_clerk_importing_a_file_that_sets_server_fields_gets_422(
        ledger: AppWorld, header: str) -> None:
    clerk = _clerk(ledger)
    value = str(uuid.uuid4()) if "uid" in header else "2026-01-01T00:00:00Z"
    rows = _errors(_import(clerk, ledger, "things", f"title,{header}\nx,{value}\n"))
    assert [(r["line"], r["column"]) for r in rows] == [(1, header)]
    assert _things(ledger, clerk) == []


def test_clerk_importing_a_file_naming_a_column_twice_gets_422(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    rows = _errors(_import(clerk, ledger, "things", "title,qty,qty\nx,1,2\n"))
    assert [(r["line"], r["column"]) for r in rows] == [(1, "qty")]
    assert _things(ledger, clerk) == []


def test_clerk_importing_an_empty_file_gets_422_and_a_header_alone_inserts_nothing(
        ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    _errors(_import(clerk, ledger, "things", b""))
    assert expect(_import(clerk, ledger, "things", "title,qty\n"), 201) == {"inserted": 0}
    assert expect(_import(clerk, ledger, "things", "title,qty"), 201) == {"inserted": 0}
    assert _things(ledger, clerk) == []


# Malformed CSV -----------------------------------------------------------------------------

def test_clerk_importing_a_file_that_is_not_utf8_gets_422_with_the_line(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    body = "title\nfine\ncaf\xe9\n".encode("latin-1")
    rows = _errors(_import(clerk, ledger, "things", body))
    assert len(rows) == 1 and "UTF-8" in rows[0]["message"]
    assert _things(ledger, clerk) == []


def test_clerk_importing_ragged_rows_gets_each_short_or_long_line_listed(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    rows = _errors(_import(clerk, ledger, "things", "title,qty\na,1\nb\nc,3,extra\nd,4\n"))
    assert [(r["line"], r["column"]) for r in rows] == [(3, None), (4, None)]
    assert _things(ledger, clerk) == []


def test_clerk_importing_a_file_with_an_unterminated_quote_gets_422(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    rows = _errors(_import(clerk, ledger, "things", 'title,qty\na,1\n"never closed,2\nc,3\n'))
    assert [r["line"] for r in rows] == [3]
    assert "quote" in rows[0]["message"]
    assert _things(ledger, clerk) == []


def test_a_stray_quote_near_the_top_of_a_big_file_is_refused_early_with_its_line(
        ledger: AppWorld) -> None:
    """The server does not hold the rest of the file in memory waiting for the quote to close."""
    clerk = _clerk(ledger)
    body = ('title,qty\na,1\nTV 55" screen,2\n' + "".join(
        f"row number {i:09d} of a long file,{i}\n" for i in range(500_000))).encode()
    assert len(body) > 20_000_000
    pid = ledger.server.process.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := current RSS
    before = _vm(pid, "VmHWM")
    rows = _errors(_import(clerk, ledger, "things", body))
    assert [r["line"] for r in rows] == [3] and "never closed" in rows[0]["message"]
    assert _vm(pid, "VmHWM") - before < 12 * 2**20
    assert _things(ledger, clerk) == []


def _vm(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(key)


def test_a_record_longer_than_a_mebibyte_is_refused(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    body = "title,qty\nok,1\n" + "x" * (1 << 20) + ",2\nlast,3\n"
    rows = _errors(_import(clerk, ledger, "things", body))
    assert [r["line"] for r in rows] == [3]
    assert _things(ledger, clerk) == []
    # Large values are fine (a single field may hold up to 128 KiB).
    body = "title,code\n" + "y" * 100_000 + "," + "z" * 100_000 + "\n"
    assert expect(_import(clerk, ledger, "things", body), 201) == {"inserted": 1}
    assert len(_things(ledger, clerk)[0]["code"]) == 100_000


def test_clerk_importing_a_file_with_text_after_a_closing_quote_gets_422(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    rows = _errors(_import(clerk, ledger, "things", 'title,qty\na,1\n"b"x,2\n'))
    assert [r["line"] for r in rows] == [3]
    assert _things(ledger, clerk) == []


def test_clerk_imports_a_file_with_a_byte_order_mark_and_crlf_line_ends(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    body = "\ufefftitle,qty\r\nfirst,1\r\nsecond,2\r\n".encode()
    assert expect(_import(clerk, ledger, "things", body), 201) == {"inserted": 2}
    assert [(r["title"], r["qty"]) for r in _things(ledger, clerk)] == [("first", 1), ("second", 2)]


def test_quoted_newlines_stay_in_the_value_and_later_errors_name_the_physical_line(
        ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    good = 'title,qty\r\n"two\r\nlines",1\r\n"three\nlines\nhere",2\r\nlast,3\r\n'
    assert expect(_import(clerk, ledger, "things", good), 201) == {"inserted": 3}
    titles = [r["title"] for r in _things(ledger, clerk)]
    assert titles == ["two\r\nlines", "three\nlines\nhere", "last"]
    bad = 'title,qty\n"a\nb\nc",1\nd,oops\n'
    assert [(r["line"], r["column"]) for r in _errors(_import(clerk, ledger, "things", bad))] == [
        (5, "qty")]


def test_blank_lines_are_skipped_and_a_missing_final_newline_is_fine(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    assert expect(_import(clerk, ledger, "things", "title,qty\na,1\n\nb,2"), 201) == {
        "inserted": 2}
    assert [(r["title"], r["qty"]) for r in _things(ledger, clerk)] == [("a", 1), ("b", 2)]


def test_clerk_importing_a_file_streamed_in_tiny_chunks_gets_the_same_result(
        ledger: AppWorld) -> None:
    """Record boundaries, quotes and multi-byte characters split across network chunks."""
    clerk = _clerk(ledger)
    body = ('\ufefftitle,meta\r\n"Zoë\r\n✓",{"a":1}\r\n' + "".join(
        f'"r{i} ""é""","[{i}]"\r\n' for i in range(50))).encode()
    body = body.replace(b'{"a":1}', b'"{""a"":1}"')

    def tiny() -> Iterator[bytes]:
        for i in range(0, len(body), 3):
            yield body[i:i + 3]

    response = clerk.post(f"{ledger.rows('things')}/import", content=tiny(),
                          headers={"Content-Type": "text/csv"})
    assert expect(response, 201) == {"inserted": 51}
    rows = _things(ledger, clerk)
    assert rows[0]["title"] == "Zoë\r\n✓" and rows[0]["meta"] == {"a": 1}
    assert [r["title"] for r in rows[1:]] == [f'r{i} "é"' for i in range(50)]
    assert [r["meta"] for r in rows[1:]] == [[i] for i in range(50)]


# All or nothing ----------------------------------------------------------------------------

def test_a_failed_import_writes_no_row_no_log_entry_and_no_event(
        ledger: AppWorld, database_url: str) -> None:
    clerk = _clerk(ledger)
    expect(clerk.post(ledger.rows("things"), json={"title": "before"}), 201)
    log_before = _log_count(database_url, ledger)
    path = f"{ledger.rows('things')}/subscribe"
    with SSEClient(ledger.server.url, path, clerk.token) as feed:
        feed.wait_connected()
        csv = "title,qty\n" + "".join(f"t{i},{i}\n" for i in range(500)) + "bad,x\n"
        rows = _errors(_import(clerk, ledger, "things", csv))
        assert [(r["line"], r["column"]) for r in rows] == [(502, "qty")]
        assert _log_count(database_url, ledger) == log_before
        marker = expect(clerk.post(ledger.rows("things"), json={"title": "marker"}), 201)
        feed.wait_for_change(marker["uid"], "insert")
        assert [f.row_uid for f in feed.events() if f.event != "connected"] == [marker["uid"]]
    assert [r["title"] for r in _things(ledger, clerk)] == ["before", "marker"]


def test_at_most_100_errors_are_listed_each_with_line_column_and_message(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    csv = "title,qty\n" + "".join(f"t{i},x{i}\n" for i in range(250))
    rows = _errors(_import(clerk, ledger, "things", csv))
    assert len(rows) == 100
    assert [r["line"] for r in rows] == list(range(2, 102))
    assert {r["column"] for r in rows} == {"qty"}
    assert _things(ledger, clerk) == []


# Content type and size ---------------------------------------------------------------------

@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "multipart/form-data",
                                          "text/csvx", ""])
def test_clerk_importing_with_another_content_type_gets_415(
        ledger: AppWorld, content_type: str) -> None:
    clerk = _clerk(ledger)
    headers = {"Content-Type": content_type} if content_type else {}
    response = clerk.post(f"{ledger.rows('things')}/import", content=b"title\nx\n", headers=headers)
    expect(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert _things(ledger, clerk) == []


def test_content_type_parameters_and_case_are_accepted(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    assert expect(_import(clerk, ledger, "things", "title\nx\n", "Text/CSV; charset=utf-8"),
                  201) == {"inserted": 1}
    assert [r["title"] for r in _things(ledger, clerk)] == ["x"]


def test_member_without_create_permission_gets_403_and_a_locked_table_table_locked(
        ledger: AppWorld) -> None:
    ledger.role("reader", ["things:read_list", "things:read"])
    reader = ledger.caller(ledger.orgs["A"], ["reader"])
    expect(_import(reader, ledger, "things", "title\nx\n"), 403, "FORBIDDEN")
    # The permission is checked before the request's shape.
    expect(_import(reader, ledger, "things", "x", "application/json"), 403, "FORBIDDEN")
    clerk = _clerk(ledger)
    expect(ledger.admin.patch(f"{ledger.base}/tables/things", json={"operations": {"create": False}}),
           200)
    expect(_import(clerk, ledger, "things", "title\nx\n"), 403, "TABLE_LOCKED")
    expect(Caller(clerk.client).post(f"{ledger.rows('things')}/import", content=b"title\nx\n",
                                     headers={"Content-Type": "text/csv"}), 401, "UNAUTHENTICATED")
    assert _things(ledger, clerk) == []


@pytest.fixture(scope="module")
def small_limits(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose import limit is 4 kB and whose JSON body limit is 1.5 kB."""
    proc = start_server(database_url, tmp_path_factory.mktemp("small-limits"),
                        AUTHORIC_MAX_IMPORT_BYTES="4000", AUTHORIC_MAX_BODY_BYTES="1500")
    yield proc
    proc.stop()


def test_import_over_the_import_limit_gets_413_while_the_json_limit_stays_separate(
        small_limits: ServerProcess) -> None:
    with httpx.Client(base_url=small_limits.url, timeout=30) as client:
        world = AppWorld.create(small_limits, client)
        world.table("notes", [{"name": "body", "type": "text"}])
        world.role("clerk", ["notes:*"])
        clerk = world.caller(world.org("A"), ["clerk"])
        path = f"{world.rows('notes')}/import"
        csv_headers = {"Content-Type": "text/csv"}
        under = ("body\n" + "".join(f"{'x' * 90}{i:05d}\n" for i in range(30))).encode()
        assert 1500 < len(under) < 4000
        assert expect(clerk.post(path, content=under, headers=csv_headers), 201) == {"inserted": 30}
        over = ("body\n" + "".join(f"{'y' * 90}{i:05d}\n" for i in range(60))).encode()
        assert len(over) > 4000
        expect(clerk.post(path, content=over, headers=csv_headers), 413, "PAYLOAD_TOO_LARGE")

        def chunked() -> Iterator[bytes]:  # no Content-Length: the limit counts what streams in
            for i in range(0, len(over), 500):
                yield over[i:i + 500]

        expect(clerk.post(path, content=chunked(), headers=csv_headers), 413, "PAYLOAD_TOO_LARGE")
        # The JSON limit is its own: a 2 kB row body is refused, a small one accepted.
        expect(clerk.post(world.rows("notes"), json={"body": "z" * 2000}), 413, "PAYLOAD_TOO_LARGE")
        expect(clerk.post(world.rows("notes"), json={"body": "small"}), 201)
        items = expect(clerk.get(world.rows("notes"), params={"limit": 1000}), 200)["items"]
        assert len(items) == 31
        assert "Traceback" not in small_limits.log()


# Events ------------------------------------------------------------------------------------

def test_an_import_of_1000_rows_sends_one_insert_per_row_to_a_subscriber(
        ledger: AppWorld, database_url: str) -> None:
    clerk = _clerk(ledger)
    other = _clerk(ledger, "B")
    path = f"{ledger.rows('things')}/subscribe"
    url = ledger.server.url
    with SSEClient(url, path, clerk.token) as feed, SSEClient(url, path, other.token) as feed_b:
        feed.wait_connected()
        feed_b.wait_connected()
        csv = "title,qty\n" + "".join(f"t{i},{i}\n" for i in range(1000))
        assert expect(_import(clerk, ledger, "things", csv), 201) == {"inserted": 1000}
        feed.wait_until(lambda frames: sum(1 for f in frames if f.is_change) >= 1000, timeout=60)
        marker = expect(other.post(ledger.rows("things"), json={"title": "b-marker"}), 201)
        feed_b.wait_for_change(marker["uid"], "insert")
        changes = feed.changes()
        assert not [f for f in feed.events() if f.event == "resync"]
        assert [f.row_uid for f in feed_b.changes()] == [marker["uid"]]
    assert len(changes) == 1000 and {f.op for f in changes} == {"insert"}
    assert strictly_increasing(f.pos for f in changes)
    # Positions are strictly increasing; the order among one transaction's entries is the
    # sequencer's (not necessarily file order), so titles are compared as a set.
    assert sorted(f.data["row"]["title"] for f in changes) == sorted(f"t{i}" for i in range(1000))
    listed = {r["uid"] for r in _things(ledger, clerk)}
    assert {f.row_uid for f in changes} == listed
    assert db_value(database_url, "SELECT count(*) FROM authoric.changes WHERE app_uid = $1 "
                    "AND op = 'insert' AND org_uid = $2", _app_uid(ledger),
                    uuid.UUID(ledger.orgs["A"])) == 1000


def test_an_import_of_more_than_1000_rows_sends_one_resync_to_the_org_only(
        ledger: AppWorld, database_url: str) -> None:
    clerk = _clerk(ledger)
    other = _clerk(ledger, "B")
    path = f"{ledger.rows('things')}/subscribe"
    url = ledger.server.url
    with SSEClient(url, path, clerk.token) as feed, SSEClient(url, path, other.token) as feed_b:
        feed.wait_connected()
        feed_b.wait_connected()
        csv = "title,qty\n" + "".join(f"t{i},{i}\n" for i in range(1001))
        assert expect(_import(clerk, ledger, "things", csv), 201) == {"inserted": 1001}
        marker = expect(clerk.post(ledger.rows("things"), json={"title": "a-marker"}), 201)
        marker_b = expect(other.post(ledger.rows("things"), json={"title": "b-marker"}), 201)
        feed.wait_for_change(marker["uid"], "insert")
        feed_b.wait_for_change(marker_b["uid"], "insert")
        events = [f for f in feed.events() if f.event != "connected"]
        events_b = [f for f in feed_b.events() if f.event != "connected"]
    assert [(f.event, f.data) for f in events[:1]] == [
        ("resync", {"reason": "bulk_change", "table": "things"})]
    assert [f.row_uid for f in events[1:]] == [marker["uid"]]
    assert [f.row_uid for f in events_b] == [marker_b["uid"]]
    app = _app_uid(ledger)
    assert db_value(database_url, "SELECT count(*) FROM authoric.changes WHERE app_uid = $1 "
                    "AND op = 'bulk'", app) == 1
    assert db_value(database_url, "SELECT count(*) FROM authoric.changes WHERE app_uid = $1 "
                    "AND op = 'insert'", app) == 2  # the markers


# Tenancy, references, uniqueness -------------------------------------------------------------

def test_imported_rows_go_to_the_importers_org_only(ledger: AppWorld, database_url: str) -> None:
    clerk_a, clerk_b = _clerk(ledger), _clerk(ledger, "B")
    expect(_import(clerk_a, ledger, "things", "title\na1\na2\n"), 201)
    assert [r["title"] for r in _things(ledger, clerk_a)] == ["a1", "a2"]
    assert _things(ledger, clerk_b) == []
    schema = f"app_{_app_uid(ledger).hex}"
    orgs = db_value(database_url, f'SELECT array_agg(DISTINCT org_uid) FROM "{schema}"."things"')
    assert [str(o) for o in orgs] == [ledger.orgs["A"]]


def test_clerk_importing_references_to_another_orgs_rows_is_refused(ledger: AppWorld) -> None:
    clerk_a, clerk_b = _clerk(ledger), _clerk(ledger, "B")
    mine = expect(clerk_a.post(ledger.rows("vendors"), json={"name": "Mine"}), 201)
    theirs = expect(clerk_b.post(ledger.rows("vendors"), json={"name": "Theirs"}), 201)
    csv = (f"title,vendor_uid\nok,{mine['uid']}\nforeign,{theirs['uid']}\n"
           f"ghost,{uuid.uuid4()}\n")
    rows = _errors(_import(clerk_a, ledger, "things", csv))
    assert [(r["line"], r["column"]) for r in rows] == [(3, "vendor"), (4, "vendor")]
    assert _things(ledger, clerk_a) == [] and _things(ledger, clerk_b) == []


def test_clerk_importing_references_to_soft_deleted_rows_is_refused(world: AppWorld) -> None:
    world.table("vendors", [{"name": "name", "type": "text"}], softDelete=True)
    world.table("things", [{"name": "title", "type": "text"},
                           {"name": "vendor", "type": "reference", "references": "vendors"}])
    world.role("clerk", ["*:*"])
    clerk = world.caller(world.org("A"), ["clerk"])
    gone = expect(clerk.post(world.rows("vendors"), json={"name": "Gone"}), 201)
    expect(clerk.delete(f"{world.rows('vendors')}/{gone['uid']}"), 204)
    response = clerk.post(f"{world.rows('things')}/import", content=f"title,vendor_uid\nx,{gone['uid']}\n",
                          headers={"Content-Type": "text/csv"})
    assert [(r["line"], r["column"]) for r in _errors(response)] == [(2, "vendor")]
    assert expect(clerk.get(world.rows("things")), 200)["items"] == []


def test_clerk_importing_unique_duplicates_within_the_file_or_against_rows_is_refused(
        ledger: AppWorld) -> None:
    clerk_a, clerk_b = _clerk(ledger), _clerk(ledger, "B")
    expect(clerk_a.post(ledger.rows("things"), json={"title": "existing", "code": "C-1"}), 201)
    csv = "title,code\nx,C-1\ny,C-2\nz,C-2\nw,\nv,\nu,C-3\n"
    rows = _errors(_import(clerk_a, ledger, "things", csv))
    assert [(r["line"], r["column"]) for r in rows] == [(2, "code"), (4, "code")]
    assert [r["title"] for r in _things(ledger, clerk_a)] == ["existing"]
    # Uniqueness is per org: another org may import the same codes.
    assert expect(_import(clerk_b, ledger, "things", "title,code\nx,C-1\ny,C-2\n"), 201) == {
        "inserted": 2}
    assert [(r["title"], r["code"]) for r in _things(ledger, clerk_b)] == [("x", "C-1"),
                                                                         ("y", "C-2")]


def test_member_whose_row_policy_the_imported_rows_would_not_match_gets_403_and_nothing(
        ledger: AppWorld, database_url: str) -> None:
    ledger.role("small", ["things:*"], row_policies={"things": {"qty": {"lt": 10}}})
    small = ledger.caller(ledger.orgs["A"], ["small"])
    before = _log_count(database_url, ledger)
    expect(_import(small, ledger, "things", "title,qty\na,1\nb,50\n"), 403, "FORBIDDEN")
    expect(_import(small, ledger, "things", "title,qty\na,1\nb,\n"), 403, "FORBIDDEN")
    assert _log_count(database_url, ledger) == before
    assert expect(_import(small, ledger, "things", "title,qty\na,1\nb,9\n"), 201) == {
        "inserted": 2}
    assert [r["title"] for r in _things(ledger, _clerk(ledger))] == ["a", "b"]


def test_clerk_importing_into_an_unknown_table_or_app_gets_404(ledger: AppWorld) -> None:
    clerk = _clerk(ledger)
    expect(_import(clerk, ledger, "nope", "title\nx\n"), 404, "NOT_FOUND")


def test_an_import_can_run_twice_on_one_connection(ledger: AppWorld, tmp_path: Path) -> None:
    """The staging table is per transaction: back-to-back imports do not see each other's."""
    clerk = _clerk(ledger)
    for i in range(3):
        assert expect(_import(clerk, ledger, "things", f"title,code\nx{i},K{i}\n"), 201) == {
            "inserted": 1}
    assert [r["code"] for r in _things(ledger, clerk)] == ["K0", "K1", "K2"]
