"""No bulk oracle (issue 19, finding 5): a unique value held by a row the writer may not read
is reported as one summary error naming no line, column or value, and such refusals count
against a per-member limit (429 with Retry-After past it).

Callers: a member whose row policy hides the admin's rows and whose role redacts `ssn`,
importing files of guesses; the same member conflicting with a row it may read.
"""

from __future__ import annotations

import httpx

from tests.scenario import AppWorld, Caller, expect

HIDDEN_SUMMARY = {"line": None, "column": None,
                  "message": "a unique value is already taken by a row you may not read"}


def _people(world: AppWorld) -> tuple[Caller, str]:
    world.table("people", [{"name": "ssn", "type": "text", "unique": True},
                           {"name": "status", "type": "text"}])
    world.role("member", ["people:*"], {"people": {"status": {"eq": "public"}}},
               {"people": ["ssn"]})
    org = world.org("A")
    expect(world.admin.post(f"{world.base}/tables/people/rows",
                            json={"org": org, "ssn": "123-45-6789", "status": "secret"}), 201)
    return world.caller(org, ["member"]), org


def _import(caller: Caller, world: AppWorld, body: str) -> httpx.Response:
    return caller.post(f"{world.rows('people')}/import", content=body.encode(),
                       headers={"Content-Type": "text/csv"})


def test_member_importing_ten_guesses_learns_no_line_and_no_value(world: AppWorld) -> None:
    member, _ = _people(world)
    guesses = [f"123-45-67{n:02d}" for n in range(80, 90)]
    body = "ssn,status\n" + "".join(f"{g},public\n" for g in guesses)
    rows = expect(_import(member, world, body), 422, "VALIDATION_FAILED")["error"]["details"]["rows"]
    assert rows == [HIDDEN_SUMMARY]
    assert "123-45-6789" not in _import(member, world, body).text
    assert expect(member.get(world.rows("people")), 200)["items"] == []


def test_member_conflicting_with_a_row_it_may_read_is_told_the_line(world: AppWorld) -> None:
    member, _ = _people(world)
    expect(member.post(world.rows("people"), json={"ssn": "111", "status": "public"}), 201)
    rows = expect(_import(member, world, "ssn,status\nnew,public\n111,public\n"),
                  422)["error"]["details"]["rows"]
    # ssn is redacted for this member: the visible row's value is hidden too.
    assert rows == [HIDDEN_SUMMARY]
    world.role("member", ["people:*"], {"people": {"status": {"eq": "public"}}})
    rows = expect(_import(member, world, "ssn,status\nnew,public\n111,public\n"),
                  422)["error"]["details"]["rows"]
    assert rows == [{"line": 3, "column": "ssn", "message": "duplicate value for a unique column"}]


def test_member_guessing_past_the_limit_gets_429_with_retry_after(world: AppWorld) -> None:
    member, _ = _people(world)
    body = "ssn,status\n123-45-6789,public\n"
    for _ in range(10):  # AUTHORIC_HIDDEN_CONFLICT_LIMIT's default
        expect(_import(member, world, body), 422, "VALIDATION_FAILED")
    over = _import(member, world, body)
    expect(over, 429, "TOO_MANY_REQUESTS")
    assert int(over.headers["Retry-After"]) >= 1
    # A file with nothing hidden in it is not refused by the limit.
    expect(_import(member, world, "ssn,status\nmine,public\n"), 201)


def test_member_guessing_over_rest_gets_409s_then_429_and_rows_it_may_read_never_count(
        world: AppWorld) -> None:
    member, _ = _people(world)
    world.role("member", ["people:*"], {"people": {"status": {"eq": "public"}}})  # ssn shown
    rows = world.rows("people")
    expect(member.post(rows, json={"ssn": "mine", "status": "public"}), 201)
    for _ in range(15):  # a conflict with a row the member may read is just a conflict
        expect(member.post(rows, json={"ssn": "mine", "status": "public"}), 409, "CONFLICT")
    guess = {"ssn": "123-45-6789", "status": "public"}
    answers = [member.post(rows, json=guess) for _ in range(11)]
    assert [a.status_code for a in answers] == [409] * 10 + [429]
    assert answers[0].json()["error"]["message"] == expect(
        member.post(rows, json={"ssn": "mine", "status": "public"}), 409)["error"]["message"]
    assert int(answers[-1].headers["Retry-After"]) >= 1
    # The import counts against the same limit.
    expect(_import(member, world, "ssn,status\n123-45-6789,public\n"), 429, "TOO_MANY_REQUESTS")


def _people_with_a_team(world: AppWorld) -> tuple[Caller, str]:
    """People referencing a soft-delete table: their writes run in a transaction (the
    reference is checked live first), the path where a conflict aborts the statement."""
    world.table("teams", [{"name": "name", "type": "text"}], softDelete=True)
    world.table("people", [{"name": "ssn", "type": "text", "unique": True},
                           {"name": "status", "type": "text"},
                           {"name": "team", "type": "reference", "references": "teams"}])
    world.role("member", ["people:*", "teams:*"], {"people": {"status": {"eq": "public"}}},
               {"people": ["ssn"]})
    org = world.org("A")
    team = expect(world.admin.post(f"{world.base}/tables/teams/rows",
                                   json={"org": org, "name": "blue"}), 201)["uid"]
    expect(world.admin.post(f"{world.base}/tables/people/rows",
                            json={"org": org, "ssn": "123-45-6789", "status": "secret"}), 201)
    return world.caller(org, ["member"]), team


def test_member_guessing_in_writes_that_need_a_transaction_gets_409s_then_429(
        world: AppWorld) -> None:
    member, team = _people_with_a_team(world)
    rows = world.rows("people")
    mine = expect(member.post(rows, json={"ssn": "mine", "status": "public", "team": team}),
                  201)["uid"]
    guess = {"ssn": "123-45-6789", "status": "public", "team": team}
    creates = [member.post(rows, json=guess) for _ in range(5)]
    updates = [member.patch(f"{rows}/{mine}", json=guess) for _ in range(5)]
    assert [a.status_code for a in creates + updates] == [409] * 10
    # The eleventh guess, a create, an update or a bulk update alike, is refused by the limit.
    expect(member.post(rows, json=guess), 429, "TOO_MANY_REQUESTS")
    expect(member.patch(f"{rows}/{mine}", json=guess), 429, "TOO_MANY_REQUESTS")
    bulk = member.patch(rows, params={"status": "public"}, json={"set": {"ssn": "123-45-6789"}})
    expect(bulk, 429, "TOO_MANY_REQUESTS")
    # Nothing was written by any of them.
    assert [r["uid"] for r in expect(member.get(rows), 200)["items"]] == [mine]


def test_member_bulk_updating_onto_a_hidden_value_counts_against_the_limit(
        world: AppWorld) -> None:
    member, _ = _people(world)
    rows = world.rows("people")
    expect(member.post(rows, json={"ssn": "mine", "status": "public"}), 201)
    guess = {"set": {"ssn": "123-45-6789"}}
    answers = [member.patch(rows, params={"status": "public"}, json=guess) for _ in range(11)]
    assert [a.status_code for a in answers] == [409] * 10 + [429]
