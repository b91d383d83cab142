"""An operator builds an app, its tables and a role from nothing, in the browser only."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.console_world import build_shop
from tests.e2e.conftest import confirm, go, screenshot
from tests.scenario import AppWorld, Caller, unique
from tests.scenario import expect as expect_status
from tests.servers import ServerProcess


def add_column(page: Page, index: int, name: str, type_: str, references: str | None = None,
               required: bool = False) -> None:
    row = page.locator(".coldef").nth(index)
    row.get_by_label("Column name").fill(name)
    row.get_by_label("Column type").select_option(type_)
    if references:
        row.get_by_label("References table").select_option(references)
    if required:
        row.get_by_label("required").check()


def test_operator_builds_an_app_two_tables_and_a_role_from_nothing(
        console: Page, server: ServerProcess, http: httpx.Client) -> None:
    admin = Caller(http, server.admin_token)
    app = unique("shop")
    page = console

    page.get_by_label("New app name").fill(app)
    page.get_by_role("button", name="Create app").click()
    expect(page.get_by_role("heading", name=f"Tables of {app}")).to_be_visible()

    page.get_by_label("Table name").fill("vendors")
    add_column(page, 0, "name", "text", required=True)
    page.get_by_role("button", name="Create table").click()
    confirm(page, "Create table", 'Create table "vendors"', "Add column name (text), required.")
    expect(page.get_by_role("heading", name="vendors", exact=True)).to_be_visible()

    page.get_by_role("link", name="+ New table").click()
    page.get_by_label("Table name").fill("invoices")
    add_column(page, 0, "number", "text", required=True)
    page.get_by_role("button", name="+ Column").click()
    add_column(page, 1, "vendor", "reference", references="vendors")
    page.get_by_role("button", name="+ Column").click()
    add_column(page, 2, "amount", "numeric")
    page.get_by_role("button", name="Create table").click()
    confirm(page, "Create table", "Add column vendor (reference → vendors).",
            "Add column amount (numeric).")
    expect(page.get_by_role("heading", name="invoices", exact=True)).to_be_visible()

    # Nothing changed yet: said beside the button, and no dialog opens.
    page.get_by_role("button", name="Review and apply changes").click()
    expect(page.get_by_test_id("apply-note")).to_contain_text("Nothing to change yet")
    expect(page.get_by_role("dialog")).to_have_count(0)

    # A column added and an operation switched off, after a confirmation saying exactly that.
    page.get_by_role("button", name="+ Column").click()
    add_column(page, 0, "status", "text")
    page.locator("input[name=op-delete]").uncheck()
    page.get_by_role("button", name="Review and apply changes").click()
    screenshot(page, "schema-change-confirmation")
    confirm(page, "Apply changes", 'Add column status (text) to "invoices".',
            'Switch delete off for "invoices".')
    expect(page.get_by_text("Table \"invoices\" changed")).to_be_visible()

    table = expect_status(admin.get(f"/admin/apps/{app}/tables/invoices"), 200)
    assert [c["name"] for c in table["columns"]] == ["number", "vendor", "amount", "status"]
    assert table["columns"][1]["references"] == "vendors"
    assert table["operations"]["delete"] is False

    # A role, from the permissions matrix.
    page.get_by_role("link", name="Roles").click()
    page.get_by_label("New role name").fill("clerk")
    page.get_by_role("button", name="New role").click()
    expect(page.get_by_role("heading", name='Role "clerk"')).to_be_visible()
    for permission in ["invoices:read_list", "invoices:read", "vendors:read_list"]:
        page.get_by_label(permission, exact=True).check()
    page.get_by_role("button", name="Save role").click()
    confirm(page, "Save role", "Grant invoices:read_list, invoices:read, vendors:read_list.")
    expect(page.get_by_role("status")).to_contain_text('Role "clerk" saved')
    role = expect_status(admin.get(f"/admin/apps/{app}/roles/clerk"), 200)
    assert sorted(role["permissions"]) == ["invoices:read", "invoices:read_list", "vendors:read_list"]
    expect(page.get_by_test_id("overview-matrix")).to_contain_text("clerk")
    screenshot(page, "roles")


def test_operator_creates_an_org_and_a_user_assigns_a_role_and_removes_the_membership(
        console: Page, world: AppWorld) -> None:
    world.role("clerk", ["*:*"])
    page = console
    go(page, world, "people")
    page.get_by_label("New org name").fill("Northwind")
    page.get_by_role("button", name="Create org").click()
    expect(page.get_by_role("status")).to_contain_text('Org "Northwind" created')
    page.get_by_label("New user email").fill("ada@northwind.test")
    page.get_by_label("New user password").fill("correct horse")
    page.get_by_role("button", name="Create user").click()
    expect(page.get_by_role("status")).to_contain_text("User ada@northwind.test created")

    page.get_by_label("Member user").select_option(label="ada@northwind.test")
    page.get_by_label("Member org").select_option(label="Northwind")
    page.get_by_label("clerk").check()
    page.get_by_role("button", name="Save membership").click()
    confirm(page, "Save membership", "ada@northwind.test in Northwind holds: clerk.")
    members = page.get_by_test_id("members")
    expect(members).to_contain_text("ada@northwind.test")
    expect(members).to_contain_text("clerk")
    # The chosen user's memberships, from GET .../users/{user}/memberships.
    expect(page.get_by_test_id("user-memberships")).to_contain_text("Northwind (clerk)")
    screenshot(page, "people")
    login = world.admin.client.post(f"/{world.name}/auth/token",
                                    json={"email": "ada@northwind.test", "password": "correct horse"})
    assert login.status_code == 200

    members.get_by_role("button", name="Remove").click()
    confirm(page, "Remove", "ada@northwind.test leaves Northwind")
    expect(members).to_contain_text("No memberships yet.")
    # Ada is in no org any more: signing in gives her an account token in no org (contract
    # section 3), with no membership left.
    login = world.admin.client.post(f"/{world.name}/auth/token",
                                    json={"email": "ada@northwind.test", "password": "correct horse"})
    assert login.status_code == 200, login.text
    me = world.admin.client.get(f"/{world.name}/auth/me", headers={
        "authorization": f"Bearer {login.json()['access_token']}"})
    assert me.status_code == 200, me.text
    assert me.json()["org"] is None and me.json()["memberships"] == []


def test_the_settings_labels_each_fit_on_one_line(console: Page, world: AppWorld) -> None:
    go(console, world, "settings")
    labels = console.locator("form.settings .label-text")
    # The token lifetimes and origins, then the accounts settings (contract section 3).
    expect(labels.filter(has_text="Allowed browser origins")).to_have_count(1)
    texts = labels.all_inner_texts()
    assert len(texts) > 3, texts
    lines = labels.evaluate_all("spans => spans.map(s => s.getClientRects().length)")
    assert lines == [1] * len(texts), list(zip(texts, lines, strict=True))
    expect(console.get_by_text("One origin per line")).to_be_visible()


def test_operator_adds_an_index_watches_it_build_sees_a_unique_one_fail_on_duplicates_and_drops_it(
        console: Page, world: AppWorld) -> None:
    shop = build_shop(world)
    first = shop.invoice(status="received")
    second = shop.invoice(status="received")
    shop.invoice(shop.south_clerk, status="received")
    indexes = f"{shop.base}/tables/invoices/indexes"
    page = console
    go(page, world, "tables/invoices")
    # The unique column's own index is listed, though the indexes route does not hold it.
    expect(page.get_by_test_id("column-unique-number")).to_contain_text("unique on number")

    page.get_by_label("Index name").fill("by_amount")
    page.get_by_label("Index columns").fill("vendor, -amount")
    page.get_by_role("button", name="Add index").click()
    confirm(page, "Add index", 'Add index "by_amount" to "invoices": on vendor ↑, amount ↓.')
    expect(page.get_by_test_id("index-state-by_amount")).to_have_text("ready")
    index = expect_status(shop.admin.get(f"{indexes}/by_amount"), 200)
    assert (index["columns"], index["unique"], index["state"]) == (["vendor", "-amount"], False, "ready")

    # A column the table lacks is refused before anything is sent.
    page.get_by_label("Index name").fill("nope")
    page.get_by_label("Index columns").fill("amount, colour")
    page.get_by_role("button", name="Add index").click()
    expect(page.get_by_role("alert")).to_contain_text('"colour" is not a column of this table.')
    assert expect_status(shop.admin.get(indexes), 200)["items"] == [index]

    # Unique within an org: two North invoices share a status, so the build fails and names them.
    page.get_by_label("Index name").fill("one_status")
    page.get_by_label("Index columns").fill("status")
    page.get_by_label("unique within an org").check()
    page.get_by_role("button", name="Add index").click()
    confirm(page, "Add index", "Unique among the rows of each org")
    expect(page.get_by_test_id("index-state-one_status")).to_have_text("failed")
    duplicates = page.get_by_test_id("index-duplicates-one_status").locator("li")
    expect(duplicates).to_have_text([first["number"], second["number"]], use_inner_text=True)
    screenshot(page, "indexes")

    page.get_by_role("button", name="Drop index one_status").click()
    confirm(page, "Drop index", 'Drop the index "one_status"')
    expect(page.get_by_test_id("index-state-one_status")).to_have_count(0)
    assert [i["name"] for i in expect_status(shop.admin.get(indexes), 200)["items"]] == ["by_amount"]


def test_operator_previews_a_retype_that_would_fail_then_retypes_renames_and_picks_the_display_column(
        console: Page, world: AppWorld) -> None:
    shop = build_shop(world)
    good = shop.invoice(status="paid")
    odd = shop.invoice(status="on hold")
    table = f"{shop.base}/tables/invoices"
    page = console
    go(page, world, "tables/invoices")

    # status becomes a select of two options: the preview names the invoice whose value is neither.
    page.get_by_role("button", name="Change column status").click()
    change = page.get_by_test_id("change-status")
    change.get_by_label("New column type").select_option("select")
    change.get_by_label("Column options").fill("received, paid")
    change.get_by_label("Column options").press("Tab")
    change.get_by_role("button", name="Preview rows that would fail").click()
    failing = change.get_by_test_id("failing-rows").locator("tbody tr")
    expect(failing).to_have_count(1)
    expect(failing.first).to_contain_text(odd["number"])
    expect(failing.first).to_contain_text('"on hold" is not one of the options')
    expect(change.get_by_test_id("preview-summary")).to_contain_text("Checked all 2 rows")
    screenshot(page, "column-change-preview")

    # Applied anyway, the server refuses it whole and lists the same row with its value, and
    # says once that nothing was changed.
    change.get_by_role("button", name="Review and apply").click()
    confirm(page, "Apply changes", 'Change "status" from text to select', "All or nothing")
    expect(failing).to_have_count(1)
    expect(failing.first).to_contain_text('"on hold"')
    summary = change.get_by_test_id("preview-summary")
    expect(summary).to_contain_text("nothing was changed")
    assert summary.inner_text().lower().count("nothing") == 1, summary.inner_text()
    status = next(c for c in expect_status(shop.admin.get(table), 200)["columns"] if c["name"] == "status")
    assert status["type"] == "text"

    # With the odd value fixed, the same change goes through, renamed on the way.
    expect_status(shop.admin.patch(f"{shop.admin_rows()}/{odd['uid']}", json={"status": "received"}), 200)
    change.get_by_label("New column name").fill("state")
    change.get_by_role("button", name="Preview rows that would fail").click()
    expect(change.get_by_test_id("preview-summary")).to_contain_text("No row would fail")
    change.get_by_role("button", name="Review and apply").click()
    confirm(page, "Apply changes", 'Rename column "status" of "invoices" to "state"',
            'Options of "state": received, paid')
    expect(page.get_by_role("status")).to_contain_text('Column "state" changed')
    columns = {c["name"]: c for c in expect_status(shop.admin.get(table), 200)["columns"]}
    assert "status" not in columns
    assert (columns["state"]["type"], columns["state"]["options"]) == ("select", ["received", "paid"])
    # The viewer's row policy named status; it follows the rename.
    viewer = expect_status(shop.admin.get(f"{shop.base}/roles/viewer"), 200)
    assert viewer["rowPolicies"] == {"invoices": {"state": {"ne": "draft"}}}
    assert {r["uid"]: r["state"] for r in shop.admin_list()} == {good["uid"]: "paid", odd["uid"]: "received"}

    # The display column: invoices named by their note instead of their number.
    page.get_by_label("Display column").select_option("note")
    page.get_by_role("button", name="Save display column").click()
    confirm(page, "Apply changes", 'Name the rows of "invoices" by "note"')
    expect(page.get_by_role("row").filter(has_text="note (text)")).to_contain_text("names rows")
    assert expect_status(shop.admin.get(table), 200)["displayColumn"] == "note"
