"""A 422 lists at most 100 problems (issue 19): a body of thousands of unknown keys gets a
short answer, as a CSV import lists at most 100 lines.

Callers: a clerk posting a row with 5,000 unknown columns, and the operator posting an org
with 500 keys the route does not take.
"""

from __future__ import annotations

from tests.scenario import AppWorld, expect


def test_clerk_posting_5000_unknown_columns_is_told_about_100(world: AppWorld) -> None:
    world.table("notes", [{"name": "text", "type": "text"}])
    world.role("clerk", ["notes:*"])
    clerk = world.caller(world.org("A"), ["clerk"])
    body = {f"k{i}": i for i in range(5000)}
    response = clerk.post(world.rows("notes"), json=body)
    errors = expect(response, 422, "VALIDATION_FAILED")["error"]["details"]["errors"]
    assert len(errors) == 100
    assert errors[0] == {"column": "k0", "message": "unknown column"}
    assert len(response.content) < 20_000


def test_operator_posting_500_unknown_keys_is_told_about_100(world: AppWorld) -> None:
    body = {"name": "North", **{f"k{i}": i for i in range(500)}}
    errors = expect(world.admin.post(f"{world.base}/orgs", json=body), 422,
                    "VALIDATION_FAILED")["error"]["details"]["errors"]
    assert len(errors) == 100
