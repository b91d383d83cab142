"""No 5xx from any byte sequence (issue 19, finding 2): every path that takes text refuses
what PostgreSQL cannot store (NUL above all) with the contract's 4xx, and a refused request
leaves the table as it was.

Callers: a clerk sending arbitrary Unicode and bytes (hypothesis) as CSV cells and headers,
JSON values and keys, filters, identifiers, query strings and headers, and a stranger sending
them to the login route; plus the exact cases the attacker found (a NUL in a json cell, as a
value or a key, through the member's import and the operator's).
"""

from __future__ import annotations

import json
import socket
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scenario import AppWorld, Caller, expect
from tests.servers import ServerProcess

EXAMPLES = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
# Any Unicode string (surrogates cannot travel as UTF-8: the bytes strategy covers broken
# encodings), with NUL and other troublemakers made likely.
TEXT = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["\x00", "a\x00b", "\u0000\u0000", "\ufeff", "\\u0000", "\r\n", '"', "'", "%00", "[", "{"])
BYTES = st.binary(max_size=24) | st.sampled_from([b"\x00", b"\xff\xfe", b"a\x00", b"\xc3"])


@dataclass
class Target:
    world: AppWorld
    clerk: Caller
    server: ServerProcess

    def rows(self) -> frozenset[tuple[str, str]]:
        """Every row of the table, every org, as (uid, updatedAt): the operator's view."""
        items = expect(self.world.admin.get(f"{self.world.base}/tables/things/rows",
                                            params={"limit": 1000}), 200)["items"]
        return frozenset((r["uid"], r["updatedAt"]) for r in items)

    def send(self, method: str, path: str, **kw: object) -> httpx.Response:
        """One request; no 5xx, and a refused one leaves the table as it was."""
        before = self.rows()
        response = self.clerk.request(method, path, **kw)  # type: ignore[arg-type]
        assert response.status_code < 500, (method, path, kw, response.status_code, response.text)
        if response.status_code >= 400:
            assert self.rows() == before, (method, path, kw, response.text)
        return response

    def raw(self, request: bytes) -> int:
        """The status line's code for bytes sent as they are (no client checks them)."""
        host, port = self.server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(request)
            head = b""
            while b"\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
        return int(head.split(b" ", 2)[1])


@pytest.fixture
def target(world: AppWorld, server: ServerProcess) -> Iterator[Target]:
    world.table("things", [{"name": "title", "type": "text", "unique": True},
                           {"name": "meta", "type": "json"}, {"name": "n", "type": "integer"}])
    world.role("clerk", ["things:*"])
    clerk = world.caller(world.org("A"), ["clerk"])
    expect(clerk.post(world.rows("things"), json={"title": "seed", "meta": {"k": 1}, "n": 1}), 201)
    before = len(server.log())
    yield Target(world, clerk, server)
    assert "Traceback" not in server.log()[before:], server.log()[before:]


def _cell(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


# The attacker's cases, exactly ------------------------------------------------------------

@pytest.mark.parametrize("cell", ['{"k": "\\u0000"}', '{"\\u0000": 1}', '["\\u0000"]', '"\\u0000"'])
def test_clerk_importing_a_nul_in_a_json_cell_gets_422_naming_the_cell(
        target: Target, cell: str) -> None:
    body = f"title,meta\nfine,1\nbad,{_cell(cell)}\n"
    response = target.send("POST", f"{target.world.rows('things')}/import", content=body.encode(),
                           headers={"Content-Type": "text/csv"})
    rows = expect(response, 422, "VALIDATION_FAILED")["error"]["details"]["rows"]
    assert [(r["line"], r["column"]) for r in rows] == [(3, "meta")]
    # The connection that served it serves the next request.
    expect(target.clerk.get(target.world.rows("things")), 200)


def test_operator_importing_a_nul_in_a_json_cell_gets_422(target: Target) -> None:
    world = target.world
    org = world.orgs["A"]
    before = target.rows()
    response = world.admin.post(f"{world.base}/tables/things/rows/import?org={org}",
                                content=b'title,meta\nx,"{""\\u0000"": 1}"\n',
                                headers={"Content-Type": "text/csv"})
    expect(response, 422, "VALIDATION_FAILED")
    assert target.rows() == before


@pytest.mark.parametrize("body", [{"title": "a\x00"}, {"meta": {"k": "\x00"}}, {"meta": {"\x00": 1}},
                                  {"meta": ["\x00"]}, {"\x00": 1}])
def test_clerk_posting_a_nul_anywhere_in_a_json_body_gets_422(
        target: Target, body: dict[str, object]) -> None:
    expect(target.send("POST", target.world.rows("things"), json=body), 422, "VALIDATION_FAILED")


def test_a_body_nested_5000_deep_answers_422_like_one_nested_40_deep(target: Target) -> None:
    for depth in (40, 5000):
        raw = '{"meta": ' + "[" * depth + "]" * depth + "}"
        response = target.send("POST", target.world.rows("things"), content=raw.encode(),
                               headers={"Content-Type": "application/json"})
        assert expect(response, 422, "VALIDATION_FAILED")["error"]["details"]["reason"] == "too_deep"
    raw = '{"name": "deep", "settings": ' + "[" * 5000 + "]" * 5000 + "}"
    expect(target.world.admin.post("/admin/apps", content=raw.encode(),
                                   headers={"Content-Type": "application/json"}), 422)


# Anything, anywhere ----------------------------------------------------------------------------

@settings(EXAMPLES, max_examples=15)
@given(header=TEXT, cell=TEXT, raw=BYTES)
def test_clerk_importing_any_csv_gets_no_5xx(target: Target, header: str, cell: str,
                                             raw: bytes) -> None:
    path = f"{target.world.rows('things')}/import"
    for body in (f"title,{_cell(header)}\nx,1\n".encode(),
                 f"title,meta\n{_cell(cell)},{_cell(cell)}\n".encode(),
                 b"title,meta\n" + raw + b"\n", raw):
        target.send("POST", path, content=body, headers={"Content-Type": "text/csv"})


@EXAMPLES
@given(key=TEXT, value=TEXT, raw=BYTES)
def test_clerk_writing_any_json_gets_no_5xx(target: Target, key: str, value: str,
                                            raw: bytes) -> None:
    rows = target.world.rows("things")
    target.send("POST", rows, json={key: value})
    target.send("POST", rows, json={"title": value, "meta": {key: [value]}})
    target.send("POST", rows, content=raw, headers={"Content-Type": "application/json"})
    target.send("PATCH", f"{rows}?title=seed", json={"set": {"meta": {key: value}}})
    target.send("PATCH", f"{rows}?title={urllib.parse.quote(value)}", json={"set": {key: value}})


@EXAMPLES
@given(key=TEXT, value=TEXT, op=TEXT)
def test_clerk_listing_with_any_query_string_gets_no_5xx(target: Target, key: str, value: str,
                                                         op: str) -> None:
    rows, q = target.world.rows("things"), urllib.parse.quote
    target.send("GET", f"{rows}?{q(key)}={q(value)}")
    target.send("GET", f"{rows}?title[{q(op)}]={q(value)}&meta[{q(op)}]={q(value)}")
    target.send("GET", f"{rows}?filter={q(json.dumps({key: {op: value}}))}")
    target.send("GET", f"{rows}?filter={q(json.dumps({'title': {'in': [value]}}))}")
    target.send("GET", f"{rows}?order={q(value)}&limit={q(op)}&after={q(key)}&expand={q(value)}")
    target.send("DELETE", f"{rows}?title={q(value)}&n[{q(op)}]=1")


@EXAMPLES
@given(name=TEXT, header=BYTES)
def test_clerk_naming_any_table_row_or_header_gets_no_5xx(target: Target, name: str,
                                                          header: bytes) -> None:
    q = urllib.parse.quote
    app = target.world.name
    target.send("GET", f"/{app}/autocrud/{q(name, safe='')}")
    target.send("GET", f"{target.world.rows('things')}/{q(name, safe='')}")
    target.send("PATCH", f"{target.world.rows('things')}/{q(name, safe='')}", json={"n": 2})
    target.send("GET", f"/{q(name, safe='')}/autocrud/things")
    # Header bytes as they come (only line breaks taken out, which would end the header).
    value = header.replace(b"\r", b"").replace(b"\n", b"")
    path = target.world.rows("things").encode()
    token = (target.clerk.token or "").encode()
    before = target.rows()
    for head in (b"Authorization: Bearer " + value, b"Authorization: Bearer " + token +
                 b"\r\nX-Anything: " + value + b"\r\nAccept: " + value):
        status = target.raw(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + head +
                            b"\r\nConnection: close\r\n\r\n")
        assert status < 500, (head, status)
    assert target.rows() == before


@settings(EXAMPLES, max_examples=8)  # each attempt verifies a password hash: slow on purpose
@given(email=TEXT, password=TEXT)
def test_stranger_logging_in_with_any_text_gets_no_5xx(target: Target, email: str,
                                                       password: str) -> None:
    client = target.clerk.client
    for body in ({"email": email, "password": password}, {"email": "a@x.io", "password": password,
                                                          "org": email}):
        response = client.post(f"/{target.world.name}/auth/token", json=body)
        assert response.status_code in (400, 401, 404, 422, 429), response.text
