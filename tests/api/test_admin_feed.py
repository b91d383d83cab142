"""The operator's live feed of a table across orgs,
`GET /admin/apps/{app}/tables/{table}/rows/subscribe` (contract section 2a).

Callers: the operator (admin token), a member of an org (refused), anonymous (refused).
Writers: clerks of two orgs. A viewer's role redacts `amount` and hides drafts; the operator
never sees a redaction and sees every draft.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.scenario import AppWorld, Caller, expect
from tests.sse import SSEClient, strictly_increasing

COLUMNS: list[dict[str, Any]] = [{"name": "number", "type": "text", "required": True},
                                 {"name": "status", "type": "text", "default": "received"},
                                 {"name": "amount", "type": "numeric"}]


@dataclass
class Ops:
    world: AppWorld
    north: str
    south: str
    north_clerk: Caller
    south_clerk: Caller
    streams: list[SSEClient] = field(default_factory=list)

    @property
    def path(self) -> str:
        return f"{self.world.base}/tables/invoices/rows/subscribe"

    def open(self, token: str | None, **kw: Any) -> SSEClient:
        stream = SSEClient(self.world.server.url, self.path, token, **kw)
        self.streams.append(stream)
        return stream

    def operator(self, **kw: Any) -> SSEClient:
        stream = self.open(self.world.server.admin_token, **kw)
        assert stream.status_code == 200, (stream.status_code, stream.body)
        stream.wait_connected()
        return stream

    def insert(self, clerk: Caller, number: str, **values: Any) -> dict[str, Any]:
        return dict(expect(clerk.post(self.world.rows("invoices"),
                                      json={"number": number, "amount": "10.00", **values}), 201))


@pytest.fixture
def ops(world: AppWorld) -> Iterator[Ops]:
    world.table("invoices", COLUMNS)
    north, south = world.org("North"), world.org("South")
    world.role("clerk", ["invoices:*"])
    world.role("viewer", ["invoices:read_list", "invoices:read"],
               row_policies={"invoices": {"status": {"ne": "draft"}}},
               redact={"invoices": ["amount"]})
    setup = Ops(world, north, south, world.caller(north, ["clerk"]), world.caller(south, ["clerk"]))
    yield setup
    for stream in setup.streams:
        stream.close()


def test_operator_sees_every_orgs_changes_unredacted_each_row_with_its_org(ops: Ops) -> None:
    stream = ops.operator()
    assert stream.events()[0].data == {"table": "invoices", "live": True}
    # Each event is re-read when delivered: wait for each before changing the row again.
    a = ops.insert(ops.north_clerk, "N-1")
    b = ops.insert(ops.south_clerk, "S-1", status="draft")
    stream.wait_for_change(b["uid"], "insert")
    expect(ops.north_clerk.patch(f"{ops.world.rows('invoices')}/{a['uid']}",
                                 json={"status": "paid"}), 200)
    stream.wait_for_change(a["uid"], "update")
    expect(ops.north_clerk.delete(f"{ops.world.rows('invoices')}/{a['uid']}"), 204)
    stream.wait_for_change(a["uid"], "delete")
    frames = stream.changes()
    assert [(f.op, f.row_uid) for f in frames] == [
        ("insert", a["uid"]), ("insert", b["uid"]), ("update", a["uid"]), ("delete", a["uid"])]
    assert strictly_increasing(f.pos for f in frames)
    inserted = frames[1].data["row"]
    assert inserted["org"] == ops.south and inserted["amount"] == "10.00"
    assert inserted["status"] == "draft"
    assert frames[0].data["row"]["org"] == ops.north
    assert frames[2].data["row"]["status"] == "paid"
    assert frames[3].data == {"op": "delete", "table": "invoices", "rowUid": a["uid"],
                              "org": ops.north}


def test_operator_hears_each_orgs_bulk_change_with_table_and_org(ops: Ops) -> None:
    stream = ops.operator()
    ops.insert(ops.south_clerk, "S-1")
    expect(ops.south_clerk.patch(ops.world.rows("invoices"), params={"number": "S-1"},
                                 json={"set": {"status": "approved"}}), 200)
    resync = stream.wait_for(lambda f: f.event == "resync")
    assert resync.data == {"reason": "bulk_change", "table": "invoices", "org": ops.south}


def test_operator_resuming_with_last_event_id_gets_every_orgs_missed_changes(ops: Ops) -> None:
    first = ops.operator()
    kept = ops.insert(ops.north_clerk, "N-0")
    position = first.wait_for_change(kept["uid"]).pos
    first.close()
    missed = [ops.insert(ops.south_clerk, "S-1")["uid"], ops.insert(ops.north_clerk, "N-1")["uid"]]
    resumed = ops.operator(last_event_id=position)
    resumed.wait_until(lambda fs: len([f for f in fs if f.is_change]) == 2)
    assert [f.row_uid for f in resumed.changes()] == missed
    assert {f.data["row"]["org"] for f in resumed.changes()} == {ops.north, ops.south}


def test_operator_feed_ignores_the_tables_operation_switches(ops: Ops) -> None:
    expect(ops.world.admin.patch(f"{ops.world.base}/tables/invoices",
                                 json={"operations": {"list": False, "read": False}}), 200)
    stream = ops.operator()
    row = ops.insert(ops.north_clerk, "N-1")
    stream.wait_for_change(row["uid"], "insert")


def test_member_token_and_no_token_get_401_on_the_operator_feed(ops: Ops) -> None:
    for token in (ops.north_clerk.token, None):
        stream = ops.open(token)
        assert stream.status_code == 401
        assert json.loads(stream.body)["error"]["code"] == "UNAUTHENTICATED"


def test_operator_gets_404_for_an_unknown_table_or_app_and_406_without_accept(ops: Ops) -> None:
    admin = ops.world.server.admin_token
    ghost = SSEClient(ops.world.server.url, f"{ops.world.base}/tables/ghosts/rows/subscribe", admin)
    ops.streams.append(ghost)
    assert ghost.status_code == 404
    nowhere = SSEClient(ops.world.server.url, "/admin/apps/no_such_app/tables/x/rows/subscribe",
                        admin)
    ops.streams.append(nowhere)
    assert nowhere.status_code == 404
    expect(ops.world.admin.get(ops.path), 406, "NOT_ACCEPTABLE")


def test_operator_feed_does_not_count_against_members_and_members_feeds_are_unchanged(
        ops: Ops) -> None:
    operator = ops.operator()
    viewer = ops.world.caller(ops.north, ["viewer"])
    member = SSEClient(ops.world.server.url, f"{ops.world.rows('invoices')}/subscribe",
                       viewer.token)
    ops.streams.append(member)
    member.wait_connected()
    draft = ops.insert(ops.north_clerk, "N-d", status="draft")
    fence = ops.insert(ops.north_clerk, "N-f")
    member.wait_for_change(fence["uid"])
    operator.wait_for_change(fence["uid"])
    assert [f.row_uid for f in member.changes()] == [fence["uid"]]  # the draft stays hidden
    assert member.changes()[0].data["row"]["amount"] == "[redacted]"
    assert "org" not in member.changes()[0].data["row"]
    assert [f.row_uid for f in operator.changes()] == [draft["uid"], fence["uid"]]
