"""One stream for several tables, `GET /{app}/subscribe?tables=a,b` (contract section 5b), and
the live-feed limits of every stream (issue 10: the per-user stream cap, replay counted per org).

Callers: a clerk of Northwind who may read `invoices`, `vendors` and `notes`; a member whose
role lacks one of the tables; a member of Southwind writing at the same time; an anonymous
caller; a user opening more streams than the cap allows.

To show that something was *not* sent, a test writes a later "fence" row the subscriber may
see and waits for it: the feed delivers in position order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.scenario import AppWorld, Caller, expect, token_exp
from tests.servers import ServerProcess, TestClock, start_server
from tests.sse import SSEClient, log_head, strictly_increasing

TABLES = ("invoices", "vendors", "notes")
COLUMNS: list[dict[str, Any]] = [{"name": "title", "type": "text", "required": True},
                                 {"name": "status", "type": "text", "default": "open"}]


@dataclass
class Tables:
    """An app with three tables, two orgs, and a clerk of each org who may do anything."""

    world: AppWorld
    org: str
    other_org: str
    clerk: Caller
    other_clerk: Caller
    streams: list[SSEClient] = field(default_factory=list)
    counter: int = 0

    @property
    def path(self) -> str:
        return f"/{self.world.name}/subscribe"

    def open(self, caller: Caller, tables: str = ",".join(TABLES), *,
             server: ServerProcess | None = None, **kw: Any) -> SSEClient:
        stream = SSEClient((server or self.world.server).url, self.path, caller.token,
                           params={"tables": tables}, **kw)
        self.streams.append(stream)
        return stream

    def subscribe(self, caller: Caller, tables: str = ",".join(TABLES), **kw: Any) -> SSEClient:
        stream = self.open(caller, tables, **kw)
        assert stream.status_code == 200, (stream.status_code, stream.body)
        stream.wait_connected()
        return stream

    def insert(self, table: str, caller: Caller | None = None, **values: Any) -> dict[str, Any]:
        self.counter += 1
        body = {"title": f"{table}-{self.counter}", **values}
        return dict(expect((caller or self.clerk).post(self.world.rows(table), json=body), 201))


@pytest.fixture
def tables(world: AppWorld) -> Iterator[Tables]:
    for name in TABLES:
        world.table(name, COLUMNS)
    org, other = world.org("Northwind"), world.org("Southwind")
    world.role("clerk", [f"{name}:*" for name in TABLES])
    world.role("no_vendor_read", ["invoices:*", "notes:*", "vendors:read_list"])
    setup = Tables(world, org, other, world.caller(org, ["clerk"]), world.caller(other, ["clerk"]))
    yield setup
    for stream in setup.streams:
        stream.close()


def error_code(stream: SSEClient) -> str:
    return str(json.loads(stream.body)["error"]["code"])


def changes(stream: SSEClient) -> list[tuple[str, str, str | None]]:
    return [(f.data["table"], str(f.op), f.row_uid) for f in stream.changes()]


# -- the gate ---------------------------------------------------------------------------------

def test_clerk_following_three_tables_gets_connected_listing_them(tables: Tables) -> None:
    stream = tables.subscribe(tables.clerk)
    assert stream.events()[0].event == "connected"
    assert stream.events()[0].data == {"tables": list(TABLES), "live": True}


def test_member_whose_role_cannot_read_one_table_gets_403_and_no_stream(tables: Tables) -> None:
    member = tables.world.caller(tables.org, ["no_vendor_read"])
    stream = tables.open(member)
    assert (stream.status_code, error_code(stream)) == (403, "FORBIDDEN")
    assert json.loads(stream.body)["error"]["details"]["permission"] == "vendors:read"
    # The tables it may read are fine on their own.
    assert tables.open(member, "invoices,notes").status_code == 200


def test_clerk_naming_an_unknown_table_gets_404_and_the_first_failure_answers(
        tables: Tables) -> None:
    stream = tables.open(tables.clerk, "invoices,ghosts,vendors")
    assert (stream.status_code, error_code(stream)) == (404, "NOT_FOUND")
    member = tables.world.caller(tables.org, ["no_vendor_read"])
    first_forbidden = tables.open(member, "vendors,ghosts")
    assert (first_forbidden.status_code, error_code(first_forbidden)) == (403, "FORBIDDEN")


def test_clerk_gets_table_locked_when_one_tables_list_is_switched_off(tables: Tables) -> None:
    expect(tables.world.admin.patch(f"{tables.world.base}/tables/notes",
                                    json={"operations": {"list": False}}), 200)
    stream = tables.open(tables.clerk)
    assert (stream.status_code, error_code(stream)) == (403, "TABLE_LOCKED")


@pytest.mark.parametrize("param", ["", ",", ",".join(f"t{i}" for i in range(17))])
def test_clerk_naming_no_table_or_more_than_sixteen_gets_400(tables: Tables, param: str) -> None:
    stream = tables.open(tables.clerk, param)
    assert (stream.status_code, error_code(stream)) == (400, "BAD_REQUEST")


def test_anonymous_caller_gets_401_and_clerk_without_accept_gets_406(tables: Tables) -> None:
    anonymous = tables.open(Caller(tables.clerk.client))
    assert (anonymous.status_code, error_code(anonymous)) == (401, "UNAUTHENTICATED")
    expect(tables.clerk.get(tables.path, params={"tables": "invoices"}), 406, "NOT_ACCEPTABLE")


# -- frames ---------------------------------------------------------------------------------

def test_clerk_receives_every_tables_changes_in_commit_order_and_nothing_of_other_orgs(
        tables: Tables) -> None:
    stream = tables.subscribe(tables.clerk)
    other = tables.subscribe(tables.other_clerk, "vendors")
    written = []
    for table in ("notes", "invoices", "vendors", "invoices", "notes"):
        written.append((table, "insert", tables.insert(table)["uid"]))
        tables.insert(table, tables.other_clerk)
    # The feed re-reads an insert's row at delivery, and skips it once the row is gone: the
    # inserts are delivered before the delete below, or a slow fan-out would rightly skip
    # notes-1's insert.
    stream.wait_until(lambda fs: len([f for f in fs if f.is_change]) >= len(written))
    invoice = written[1][2]
    expect(tables.clerk.patch(f"{tables.world.rows('invoices')}/{invoice}",
                              json={"status": "paid"}), 200)
    expect(tables.clerk.delete(f"{tables.world.rows('notes')}/{written[0][2]}"), 204)
    written += [("invoices", "update", invoice), ("notes", "delete", written[0][2])]
    stream.wait_until(lambda fs: len([f for f in fs if f.is_change]) >= len(written))
    fence = tables.insert("notes")
    stream.wait_for_change(fence["uid"])
    assert changes(stream)[:-1] == written
    assert strictly_increasing(stream.ids())
    other.wait_until(lambda fs: len([f for f in fs if f.is_change]) == 1)
    assert all(f.data["table"] == "vendors" for f in other.changes())


def test_subscriber_of_one_table_hears_nothing_of_the_others(tables: Tables) -> None:
    stream = tables.subscribe(tables.clerk, "notes")
    assert stream.events()[0].data == {"tables": ["notes"], "live": True}
    tables.insert("invoices")
    fence = tables.insert("notes")
    stream.wait_for_change(fence["uid"])
    assert changes(stream) == [("notes", "insert", fence["uid"])]


def test_bulk_change_resync_names_its_table(tables: Tables) -> None:
    stream = tables.subscribe(tables.clerk)
    tables.insert("notes", status="old")
    expect(tables.clerk.patch(tables.world.rows("notes"), params={"status": "old"},
                              json={"set": {"status": "archived"}}), 200)
    resync = stream.wait_for(lambda f: f.event == "resync")
    assert resync.data == {"reason": "bulk_change", "table": "notes"} and resync.id is not None


def test_clerk_resuming_from_one_id_gets_every_tables_missed_changes_once_in_order(
        tables: Tables) -> None:
    first = tables.subscribe(tables.clerk)
    kept = tables.insert("invoices")
    first.wait_for_change(kept["uid"])
    resume_from = first.changes()[-1].pos
    first.close()
    missed = [tables.insert(t)["uid"] for t in ("vendors", "notes", "invoices", "vendors")]
    tables.insert("notes", tables.other_clerk)
    resumed = tables.subscribe(tables.clerk, last_event_id=resume_from)
    resumed.wait_until(lambda fs: len([f for f in fs if f.is_change]) >= len(missed))
    fence = tables.insert("invoices")
    resumed.wait_for_change(fence["uid"])
    assert [uid for _, _, uid in changes(resumed)] == [*missed, fence["uid"]]
    assert strictly_increasing(resumed.ids())
    assert all(f.pos > resume_from for f in resumed.changes())


@pytest.mark.parametrize("raw", ["garbage", "999999999999"])
def test_invalid_position_resync_concerns_the_stream_and_names_no_table(
        tables: Tables, raw: str) -> None:
    stream = tables.subscribe(tables.clerk, last_event_id=raw)
    resync = stream.wait_for(lambda f: f.event == "resync")
    assert resync.data == {"reason": "invalid_position"}
    assert 0 < resync.pos <= log_head(_database(tables))  # the head when it was sent
    fence = tables.insert("vendors")
    stream.wait_for_change(fence["uid"])


def _database(tables: Tables) -> str:
    return tables.world.server.env["DATABASE_URL"]


def test_a_member_whose_token_expires_gets_reauth_on_the_multi_table_stream(
        tables: Tables, tuned: ServerProcess, tuned_clock: TestClock) -> None:
    # The tuned server's clock is moved past the token's expiry rather than waited out.
    user = tables.world.user()
    tables.world.member(tables.org, user["uid"], ["clerk"])
    member = tables.world.login(user, tables.org)
    assert member.token is not None
    stream = tables.subscribe(member, server=tuned)
    try:
        tuned_clock.set(token_exp(member.token) - time.time() + 1)
        stream.wait_for(lambda f: f.event == "reauth", timeout=60)
        assert stream.events()[-1].data == {"reason": "token_expired"}
        stream.wait_ended(timeout=30)
    finally:
        tuned_clock.set(0)


# -- replicas, replay limits, the per-user cap ------------------------------------------------

@pytest.fixture(scope="module")
def tuned_clock(tmp_path_factory: pytest.TempPathFactory) -> TestClock:
    return TestClock.at_zero(tmp_path_factory.mktemp("tuned-clock"))


@pytest.fixture(scope="module")
def tuned(database_url: str, data_dir: Path, tuned_clock: TestClock) -> Iterator[ServerProcess]:
    """A second server process on the same database: replay limit 3, at most 2 streams a user,
    and a test clock."""
    proc = start_server(database_url, data_dir, AUTHORIC_SSE_REPLAY_LIMIT="3",
                        AUTHORIC_SSE_MAX_STREAMS_PER_USER="2", **tuned_clock.env())
    yield proc
    proc.stop()


def test_replica_serves_the_stream_while_another_process_takes_the_writes(
        tables: Tables, tuned: ServerProcess) -> None:
    stream = tables.subscribe(tables.clerk, server=tuned)
    uids = [tables.insert(t)["uid"] for t in TABLES]  # written through the other process
    stream.wait_until(lambda fs: len([f for f in fs if f.is_change]) == 3)
    assert [uid for _, _, uid in changes(stream)] == uids


def _position_now(tables: Tables, server: ServerProcess) -> int:
    """The id a client last received, once a new row reached it (then it goes away)."""
    stream = tables.subscribe(tables.clerk, "notes", server=server)
    position = stream.wait_for_change(tables.insert("notes")["uid"]).pos
    stream.close()
    return position


def test_another_orgs_writes_never_truncate_a_replay_nor_show_in_it(
        tables: Tables, tuned: ServerProcess) -> None:
    position = _position_now(tables, tuned)
    for _ in range(8):  # far more than the replay limit, all in the other org
        tables.insert("invoices", tables.other_clerk)
    own = [tables.insert("vendors")["uid"], tables.insert("notes")["uid"]]
    resumed = tables.subscribe(tables.clerk, server=tuned, last_event_id=position)
    resumed.wait_until(lambda fs: len([f for f in fs if f.is_change]) >= 2)
    fence = tables.insert("invoices")
    resumed.wait_for_change(fence["uid"])
    assert [f.event for f in resumed.events()].count("resync") == 0
    assert [uid for _, _, uid in changes(resumed)] == [*own, fence["uid"]]


def test_own_orgs_backlog_over_the_limit_is_truncated_after_its_third_entry(
        tables: Tables, tuned: ServerProcess) -> None:
    position = _position_now(tables, tuned)
    own = [tables.insert(t)["uid"] for t in ("invoices", "vendors", "notes", "invoices")]
    tables.insert("notes", tables.other_clerk)
    resumed = tables.subscribe(tables.clerk, server=tuned, last_event_id=position)
    resync = resumed.wait_for(lambda f: f.event == "resync")
    replayed = resumed.changes()
    assert [f.row_uid for f in replayed] == own[:3]
    assert resync.data == {"reason": "backfill_truncated", "lastId": replayed[-1].pos}
    assert "table" not in resync.data


def test_user_over_the_stream_cap_gets_429_with_retry_after_until_one_closes(
        tables: Tables, tuned: ServerProcess) -> None:
    first = tables.subscribe(tables.clerk, server=tuned)
    tables.subscribe(tables.clerk, "notes", server=tuned)
    refused = tables.open(tables.clerk, server=tuned)
    assert (refused.status_code, error_code(refused)) == (429, "TOO_MANY_REQUESTS")
    assert int(refused.headers["retry-after"]) > 0
    per_table = SSEClient(tuned.url, f"{tables.world.rows('invoices')}/subscribe",
                          tables.clerk.token)
    tables.streams.append(per_table)
    assert per_table.status_code == 429  # the cap counts every kind of stream
    # Another user is not affected.
    tables.subscribe(tables.world.caller(tables.org, ["clerk"]), server=tuned)
    first.close()
    opened = _open_when_allowed(tables, tuned)
    assert opened.status_code == 200


def _open_when_allowed(tables: Tables, server: ServerProcess, timeout: float = 30) -> SSEClient:
    """The server sees a closed stream when its next write fails or the client's FIN arrives:
    wait for that by retrying (with a fence write to provoke it), never by sleeping a guess."""
    deadline = time.monotonic() + timeout
    while True:
        stream = tables.open(tables.clerk, server=server)
        if stream.status_code == 200 or time.monotonic() > deadline:
            return stream
        stream.close()
        tables.insert("notes")
        time.sleep(0.2)


# -- the app's OpenAPI document ----------------------------------------------------------------

def test_app_document_describes_the_multi_table_stream_and_its_frames_validate(
        tables: Tables) -> None:
    import jsonschema_rs

    doc = expect(tables.clerk.get(f"/{tables.world.name}/openapi.json"), 200)
    route = doc["paths"][f"/{tables.world.name}/subscribe"]["get"]
    param = next(p for p in route["parameters"] if p["name"] == "tables")
    assert set(param["schema"]["items"]["enum"]) == set(TABLES)
    assert {"200", "400", "401", "403", "404", "406", "429"} <= set(route["responses"])
    stream = tables.subscribe(tables.clerk)
    row = tables.insert("vendors")
    stream.wait_for_change(row["uid"])
    expect(tables.clerk.delete(f"{tables.world.rows('vendors')}/{row['uid']}"), 204)
    stream.wait_for_change(row["uid"], "delete")

    def valid(kind: str, data: Any) -> bool:
        root = {"$ref": f"#/components/schemas/subscribe.event.{kind}",
                "components": doc["components"]}
        return bool(jsonschema_rs.Draft202012Validator(root).is_valid(data))

    connected, insert, delete = stream.events()[:3]
    assert valid("connected", connected.data) and valid("insert", insert.data)
    assert valid("delete", delete.data) and not valid("insert", delete.data)
    assert valid("resync", {"reason": "bulk_change", "table": "notes"})
    assert not valid("resync", {"reason": "bulk_change", "table": "ghosts"})
