"""`GET /admin/column-types`: the column types and the conversions between them, as the
console reads them instead of keeping copies. Callers: the platform admin, a caller without the
admin token.
"""

from __future__ import annotations

import httpx

from tests.scenario import AppWorld, expect


def test_admin_reads_every_type_a_table_takes_and_each_conversion_the_server_makes(
        world: AppWorld) -> None:
    listed = expect(world.admin.get("/admin/column-types"), 200)
    assert {"text", "integer", "numeric", "json", "reference", "select"} <= set(listed["types"])
    assert set(listed["conversions"]) == set(listed["types"])
    for kind, targets in listed["conversions"].items():
        assert targets[0] == kind and set(targets) <= set(listed["types"])
    # What the list says is what a schema change does: a listed conversion goes through...
    assert "text" in listed["conversions"]["integer"]
    world.table("notes", [{"name": "n", "type": "integer"}, {"name": "doc", "type": "json"}])
    changed = expect(world.admin.patch(f"{world.base}/tables/notes", json={
        "alterColumns": [{"name": "n", "type": "text"}]}), 200)
    assert next(c for c in changed["columns"] if c["name"] == "n")["type"] == "text"
    # ...and one it leaves out is refused, with nothing changed.
    assert listed["conversions"]["json"] == ["json"]
    expect(world.admin.patch(f"{world.base}/tables/notes", json={
        "alterColumns": [{"name": "doc", "type": "text"}]}), 422, "VALIDATION_FAILED")
    kept = expect(world.admin.get(f"{world.base}/tables/notes"), 200)
    assert next(c for c in kept["columns"] if c["name"] == "doc")["type"] == "json"


def test_a_caller_without_the_admin_token_gets_401_for_the_column_types(
        world: AppWorld, http: httpx.Client) -> None:
    expect(http.get("/admin/column-types"), 401, "UNAUTHENTICATED")
