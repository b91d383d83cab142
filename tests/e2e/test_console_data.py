"""The operator's data grid in the browser: keyboard editing, live events reaching a member's
stream, "view as" a member, the dry run of a role, CSV import errors, the stale-row warning and
the total of the rows a filter matches.

The shop (tests/console_world.py): invoices in two orgs, clerks, and a `viewer` role that hides
drafts and redacts `amount`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.console_world import Shop, build_shop
from tests.e2e.conftest import confirm, go, new_page, screenshot, sign_in
from tests.scenario import AppWorld
from tests.scenario import expect as expect_status
from tests.sse import db_fetch


@pytest.fixture
def shop(world: AppWorld) -> Shop:
    return build_shop(world)


@pytest.fixture
def member_page(browser: Browser) -> Iterator[Page]:
    """A second browser context: a page that is not the console's operator session."""
    page = new_page(browser)
    yield page
    page.context.close()


def rows(page: Page) -> Locator:
    return page.get_by_test_id("grid").locator(".tabulator-row")


def cell(page: Page, number: str, field: str) -> Locator:
    return rows(page).filter(has_text=number).locator(f'.tabulator-cell[tabulator-field="{field}"]')


def open_grid(page: Page, shop: Shop, count: int) -> None:
    go(page, shop.world, "data/invoices")
    expect(page.get_by_test_id("feed-state")).to_have_text("live: live")
    expect(rows(page)).to_have_count(count)


def word(text: str) -> re.Pattern[str]:
    """Matches `text` as a whole word (a class name among others, a value inside JSON)."""
    return re.compile(rf"\b{re.escape(text)}\b")


def active_field(page: Page) -> str | None:
    active = page.locator(".tabulator-cell.tabulator-range-only-cell-selected")
    return active.get_attribute("tabulator-field") if active.count() else None


def move_to(page: Page, field: str) -> None:
    """Arrow left or right until the active cell is in `field` (bounded key presses)."""
    order = page.get_by_test_id("grid").locator(".tabulator-col[tabulator-field]").evaluate_all(
        "cols => cols.map(c => c.getAttribute('tabulator-field'))")
    for _ in range(len(order)):
        current = active_field(page)
        if current == field:
            return
        left = current is not None and order.index(current) > order.index(field)
        page.keyboard.press("ArrowLeft" if left else "ArrowRight")
        expect(page.locator(".tabulator-range-only-cell-selected")).not_to_have_attribute(
            "tabulator-field", current or "")
    raise AssertionError(f"never reached {field}, at {active_field(page)}")


def test_operator_edits_a_cell_and_a_member_in_another_browser_hears_it_on_their_stream(
        console: Page, member_page: Page, shop: Shop) -> None:
    invoice = shop.invoice(status="received")
    clerk = shop.world.user()
    shop.world.member(shop.north, clerk["uid"], ["clerk"])

    # The member signs in with a plain REST token in their own browser and subscribes.
    member_page.goto(f"{shop.world.server.url}/console/")
    status = member_page.evaluate("""async ([app, email, password]) => {
        const login = await fetch(`/${app}/auth/token`, {method: 'POST',
          headers: {'Content-Type': 'application/json'}, body: JSON.stringify({email, password})});
        const {access_token} = await login.json();
        window.frames_seen = '';
        const stream = await fetch(`/${app}/autocrud/invoices/subscribe`,
          {headers: {Authorization: `Bearer ${access_token}`, Accept: 'text/event-stream'}});
        const reader = stream.body.getReader();
        const text = new TextDecoder();
        (async () => { for (;;) { const {value, done} = await reader.read(); if (done) break;
                                   window.frames_seen += text.decode(value); } })();
        return stream.status;
    }""", [shop.world.name, clerk["email"], clerk["password"]])
    assert status == 200
    member_page.wait_for_function("() => window.frames_seen.includes('event: connected')")

    open_grid(console, shop, 1)
    cell(console, invoice["number"], "status").click()
    console.keyboard.press("Enter")
    editor = console.get_by_label("Edit status")
    expect(editor).to_be_focused()
    editor.fill("paid")
    console.keyboard.press("Enter")
    expect(console.get_by_role("status")).to_contain_text("Saved status")
    expect(cell(console, invoice["number"], "status")).to_have_text("paid")

    member_page.wait_for_function("""uid => window.frames_seen.split('\\n\\n')
        .some(f => f.includes(uid) && f.includes('"status":"paid"'))""", arg=invoice["uid"])
    assert expect_status(shop.admin.get(f"{shop.admin_rows()}/{invoice['uid']}"), 200)["status"] == "paid"


def test_keyboard_alone_moves_edits_cancels_and_saves_without_bare_letter_shortcuts(
        console: Page, shop: Shop) -> None:
    first = shop.invoice(status="received", note="first")
    second = shop.invoice(status="received", note="second")
    open_grid(console, shop, 2)

    # Focus arrives by keyboard (Tab order), then only keys are used.
    console.get_by_test_id("grid").locator(".tabulator-tableholder").focus()
    expect(console.locator(".tabulator-range-only-cell-selected")).to_have_count(1)
    move_to(console, "note")

    # Bare letters with a cell selected neither edit nor trigger anything.
    console.keyboard.type("dx")
    expect(console.get_by_label("Edit note")).to_have_count(0)
    expect(rows(console)).to_have_count(2)

    # Enter edits; Escape cancels: nothing is written (the first row keeps its note, below).
    console.keyboard.press("Enter")
    expect(console.get_by_label("Edit note")).to_be_focused()
    console.keyboard.type("discarded")
    console.keyboard.press("Escape")

    # Straight away (no key is lost just after an edit ends), arrow down to the second row,
    # Enter, type, Enter: saved. Had Escape not closed the editor, the arrow could not move.
    console.keyboard.press("ArrowDown")
    console.keyboard.press("Enter")
    expect(console.get_by_label("Edit note")).to_be_focused()
    console.keyboard.type("typed by keyboard")
    console.keyboard.press("Enter")
    expect(console.get_by_role("status")).to_contain_text("Saved note")
    assert expect_status(shop.admin.get(f"{shop.admin_rows()}/{second['uid']}"), 200)["note"] == \
        "typed by keyboard"
    assert expect_status(shop.admin.get(f"{shop.admin_rows()}/{first['uid']}"), 200)["note"] == "first"

    # A value the column cannot take shows the API's error on that cell; nothing is saved.
    console.keyboard.press("ArrowUp")
    move_to(console, "amount")
    console.keyboard.press("Enter")
    console.keyboard.type("a lot")
    console.keyboard.press("Enter")
    problems = console.locator(".cell-errors")
    expect(problems).to_contain_text("amount")
    # Said where the operator is looking: a notice, and the list in view at 1280 by 800.
    expect(console.get_by_role("status")).to_contain_text("Not saved: amount")
    expect(problems).to_be_in_viewport()
    expect(console.get_by_test_id("pager")).to_have_text("page 1 · 2 rows shown")
    expect(cell(console, first["number"], "amount")).to_have_class(word("cell-error"))
    screenshot(console, "data-grid")
    assert expect_status(shop.admin.get(f"{shop.admin_rows()}/{first['uid']}"), 200)["amount"] is None


def test_view_as_a_member_shows_exactly_what_rest_returns_to_that_member(
        console: Page, shop: Shop) -> None:
    visible = shop.invoice(status="received", amount="10.00")
    shop.invoice(status="draft", amount="20.00")
    shop.invoice(shop.south_clerk, status="received", amount="30.00")
    viewer = shop.member(shop.north, ["viewer"])
    as_rest = shop.member_list(shop.world.login(viewer, shop.north))
    assert [r["uid"] for r in as_rest] == [visible["uid"]]
    assert as_rest[0]["amount"] == "[redacted]"

    open_grid(console, shop, 3)
    console.get_by_text("View as a member").click()
    console.get_by_label("View as user").select_option(label=viewer["email"])
    console.get_by_label("View as org").select_option(label="North")
    console.get_by_role("button", name="View as", exact=True).click()
    expect(console.get_by_test_id("viewing-as")).to_contain_text(viewer["email"])
    expect(rows(console)).to_have_count(len(as_rest))
    expect(console.get_by_test_id("feed-state")).to_have_text("live: live")
    for row in as_rest:
        for field, value in row.items():
            expect(cell(console, row["number"], field)).to_have_text("" if value is None else str(value))
    expect(cell(console, visible["number"], "amount")).to_have_class(word("cell-redacted"))
    expect(console.get_by_role("button", name="+ Row")).to_be_disabled()
    expect(console.get_by_role("button", name="Delete selected rows")).to_be_disabled()
    expect(console.get_by_test_id("pager")).to_have_text("page 1 · 1 row shown")
    # amount is redacted for the viewer: not offered as an order (the server would refuse it).
    order = console.get_by_label("Order")
    expect(order.locator("option[value=amount]")).to_have_count(0)
    expect(order.locator("option[value=number]")).to_have_count(1)

    # The member's live feed: a new visible invoice arrives, a new draft does not.
    shop.invoice(status="draft", number="HIDDEN-1")
    shop.invoice(status="received", number="SHOWN-1")
    expect(rows(console).filter(has_text="SHOWN-1")).to_have_count(1)
    expect(cell(console, "SHOWN-1", "amount")).to_have_text("[redacted]")
    expect(rows(console).filter(has_text="HIDDEN-1")).to_have_count(0)
    screenshot(console, "view-as")

    audit = shop.audit()
    assert any("imperson" in entry["action"] for entry in audit)
    console.get_by_role("button", name="Stop viewing as").click()
    expect(rows(console)).to_have_count(5)
    expect(console.get_by_label("Order").locator("option[value=amount]")).to_have_count(1)


def test_an_app_without_tables_shows_no_table_picker_and_no_feed(
        console: Page, world: AppWorld) -> None:
    go(console, world, "data")
    expect(console.get_by_text("This app has no tables yet.")).to_be_visible()
    expect(console.get_by_label("Table", exact=True)).to_have_count(0)
    expect(console.get_by_test_id("feed-state")).to_have_count(0)


def test_dry_run_names_rows_gained_and_lost_lists_at_most_the_limit_and_nothing_changes_until_save(
        console: Page, shop: Shop) -> None:
    drafts = [shop.invoice(status="draft") for _ in range(3)]
    paid = shop.invoice(status="paid")
    received = shop.invoice(status="received")
    viewer = shop.member(shop.north, ["viewer"])
    member = shop.world.login(viewer, shop.north)
    before = {r["uid"] for r in shop.member_list(member)}
    assert before == {paid["uid"], received["uid"]}

    go(console, shop.world, "roles/viewer")
    expect(console.get_by_role("heading", name='Role "viewer"')).to_be_visible()
    console.get_by_label("Policy table").select_option("invoices")
    value = console.get_by_label("Filter value")
    expect(value).to_have_value("draft")
    value.fill("paid")
    value.press("Tab")
    expect(console.get_by_label("Policy JSON")).to_have_value(word("paid"))

    console.get_by_label("Dry run user").select_option(label=viewer["email"])
    console.get_by_label("Dry run org").select_option(label="North")
    console.get_by_label("Dry run table").select_option("invoices")
    console.get_by_label("Rows listed").fill("2")
    console.get_by_role("button", name="Run dry run").click()
    # Rows are named by the table's display column (the invoice number), two listed, one counted.
    gained = console.get_by_test_id("gained").locator("li")
    expect(gained.filter(has_text=re.compile(r"^INV-\d+$"))).to_have_count(2)
    assert set(gained.all_inner_texts()) < {d["number"] for d in drafts}
    expect(console.get_by_test_id("gained-more")).to_have_text("and 1 more")
    expect(console.get_by_text("Rows gained (3)")).to_be_visible()
    expect(console.get_by_test_id("lost").locator("li")).to_have_text([paid["number"]])
    expect(console.get_by_test_id("lost-more")).to_have_count(0)
    expect(console.get_by_test_id("preview")).not_to_contain_text(received["number"])
    console.get_by_test_id("preview").scroll_into_view_if_needed()
    screenshot(console, "dry-run")

    # Nothing changed: the saved role and the member's rows are as before.
    role = expect_status(shop.admin.get(f"{shop.base}/roles/viewer"), 200)
    assert role["rowPolicies"] == {"invoices": {"status": {"ne": "draft"}}}
    assert {r["uid"] for r in shop.member_list(member)} == before

    console.get_by_role("button", name="Save role").click()
    confirm(console, "Save role", "Row policy on invoices")
    expect(console.get_by_role("status")).to_contain_text('Role "viewer" saved')
    assert {r["uid"] for r in shop.member_list(member)} == {*(d["uid"] for d in drafts), received["uid"]}


def test_a_csv_with_a_bad_line_shows_that_line_and_column_and_writes_nothing(
        console: Page, shop: Shop) -> None:
    shop.invoice(status="received")
    open_grid(console, shop, 1)
    csv = "number,status,amount\nCSV-1,received,12.50\nCSV-2,received,not money\nCSV-3,paid,1\n"
    console.get_by_label("Import into org").select_option(label="South")
    console.get_by_label("CSV file").set_input_files(
        files=[{"name": "invoices.csv", "mimeType": "text/csv", "buffer": csv.encode()}])
    console.get_by_role("button", name="Import").click()
    errors = console.locator(".import-errors")
    expect(errors.locator("tbody tr")).to_have_count(1)
    expect(errors.locator("tbody tr").first).to_contain_text("3")
    expect(errors.locator("tbody tr").first).to_contain_text("amount")
    expect(console.get_by_text("Nothing was imported")).to_be_visible()
    # The sentence is said once, not once by the server's message and again by the console.
    assert console.locator("body").inner_text().lower().count("nothing was imported") == 1
    screenshot(console, "import-errors")
    assert len(shop.admin_list()) == 1

    good = "number,status,amount\nCSV-1,received,12.50\nCSV-2,paid,3\n"
    console.get_by_label("CSV file").set_input_files(
        files=[{"name": "invoices.csv", "mimeType": "text/csv", "buffer": good.encode()}])
    console.get_by_role("button", name="Import").click()
    expect(console.get_by_text("2 rows imported.")).to_be_visible()
    expect(console.get_by_label("Upload progress")).to_have_attribute("value", "1")
    expect(rows(console)).to_have_count(3)
    imported = [r for r in shop.admin_list() if r["number"].startswith("CSV-")]
    assert {r["org"] for r in imported} == {shop.south}


def test_an_edit_of_a_row_changed_underneath_asks_before_overwriting(
        console: Page, shop: Shop) -> None:
    invoice = shop.invoice(status="received")
    path = f"{shop.world.rows('invoices')}/{invoice['uid']}"
    open_grid(console, shop, 1)

    cell(console, invoice["number"], "status").click()
    console.keyboard.press("Enter")
    expect(console.get_by_label("Edit status")).to_be_focused()
    expect_status(shop.north_clerk.patch(path, json={"status": "paid"}), 200)
    # The operator's feed has heard the change (the inspector shows the frame) before saving.
    expect(console.get_by_test_id("inspector")).to_contain_text('"status":"paid"')
    console.keyboard.type("queried")
    console.keyboard.press("Enter")

    dialog = console.get_by_role("dialog")
    expect(dialog).to_contain_text("This row changed while you were editing")
    expect(dialog).to_contain_text('status is now "paid"')
    screenshot(console, "stale-row")
    dialog.get_by_role("button", name="Cancel").click()
    expect(cell(console, invoice["number"], "status")).to_have_text("paid")
    assert expect_status(shop.admin.get(f"{shop.admin_rows()}/{invoice['uid']}"), 200)["status"] == "paid"

    expect_status(shop.north_clerk.patch(path, json={"status": "approved"}), 200)
    expect(cell(console, invoice["number"], "status")).to_have_text("approved")
    cell(console, invoice["number"], "status").click()
    console.keyboard.press("Enter")
    expect_status(shop.north_clerk.patch(path, json={"status": "rejected"}), 200)
    console.get_by_label("Edit status").fill("queried")
    console.keyboard.press("Enter")
    confirm(console, "Overwrite", 'status is now "rejected"')
    expect(console.get_by_role("status")).to_contain_text("Saved status")
    assert expect_status(shop.admin.get(f"{shop.admin_rows()}/{invoice['uid']}"), 200)["status"] == \
        "queried"


def test_operator_narrows_the_grid_by_org_and_filter_and_pages_with_the_cursor(
        console: Page, shop: Shop) -> None:
    for amount in ["5.00", "50.00", "500.00"]:
        shop.invoice(status="received", amount=amount)
    shop.invoice(shop.south_clerk, status="received", amount="70.00")
    open_grid(console, shop, 4)

    console.get_by_label("Org filter").select_option(label="North")
    expect(rows(console)).to_have_count(3)

    console.get_by_text("Filter", exact=True).click()
    console.get_by_role("button", name="+ Condition").click()
    console.get_by_label("Filter column").select_option("amount")
    console.get_by_label("Filter operator").select_option("gte")
    console.get_by_label("Filter value").fill("50")
    console.get_by_role("button", name="Apply filter").click()
    expect(rows(console)).to_have_count(2)
    expect(console.get_by_label("Filter JSON")).to_have_value(word("gte"))
    screenshot(console, "filter-builder")

    console.get_by_label("Page size").select_option("25")
    expect(console.get_by_test_id("grid")).to_have_attribute("aria-busy", "false")
    expect(rows(console)).to_have_count(2)
    console.get_by_label("Filter JSON").fill('{"amount": {"lt": "600"}}')
    console.get_by_role("button", name="Apply JSON").click()
    expect(console.get_by_test_id("grid")).to_have_attribute("aria-busy", "false")
    expect(rows(console)).to_have_count(3)
    expect(console.get_by_label("Filter value")).to_have_value("600")


def test_operator_reads_the_audit_log_by_actor_and_names_filters_it_and_the_console_follows_a_dark_system(
        browser: Browser, shop: Shop) -> None:
    # A long origin without spaces: its line must wrap inside the panel, not push it wider.
    origin = "https://" + ".".join(["abcdefghij" * 5] * 3) + ".test"
    expect_status(shop.admin.patch(shop.base, json={"settings": {"allowedOrigins": [origin]}}), 200)
    clerk = shop.member(shop.north, ["clerk"])
    page = new_page(browser)
    page.emulate_media(color_scheme="dark")
    try:
        sign_in(page, shop.world.server)
        go(page, shop.world, "audit")
        audit = page.get_by_test_id("audit")
        expect(audit.locator("thead")).to_contain_text("Actor")
        membership = audit.locator("tbody tr").filter(has_text=f"member {clerk['email']} in North")
        expect(membership).to_have_count(1)
        expect(membership).to_contain_text("admin token")
        expect(membership).to_contain_text("roles: clerk")
        expect(audit.locator("tbody tr").filter(has_text="app.update")).to_contain_text(origin)
        overflow = page.evaluate("""() => {
            const panel = document.querySelector('.panel.audit');
            const right = panel.getBoundingClientRect().right;
            const cells = [...panel.querySelectorAll('td')];
            return {wider: panel.scrollWidth > panel.clientWidth,
                    outside: cells.filter(c => c.getBoundingClientRect().right > right + 0.5).length};
        }""")
        assert overflow == {"wider": False, "outside": 0}

        # Filters: by kind of action, then by words anywhere in the entry.
        page.get_by_label("Action kind").select_option("member")
        rows_shown = audit.locator("tbody tr")
        expect(rows_shown.filter(has_text="member.put")).to_have_count(rows_shown.count())
        expect(rows_shown.filter(has_text="table.create")).to_have_count(0)
        page.get_by_label("Search the audit log").fill(clerk["email"])
        expect(rows_shown).to_have_count(1)
        expect(page.get_by_test_id("audit-count")).to_contain_text("1 of")
        page.get_by_label("Action kind").select_option("")
        page.get_by_label("Search the audit log").fill("")
        expect(audit).to_contain_text("org North")
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(21, 23, 28)"
        screenshot(page, "audit-dark")
        page.get_by_label("Theme").select_option("light")
        expect(page.locator("html")).to_have_attribute("data-theme", "light")
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(247, 247, 248)"
    finally:
        page.context.close()


def test_a_live_insert_lands_where_the_grid_order_puts_it(console: Page, shop: Shop) -> None:
    low = shop.invoice(status="received", amount="10.00")
    high = shop.invoice(status="received", amount="30.00")
    open_grid(console, shop, 2)
    console.get_by_label("Order").select_option("-amount")
    expect(rows(console).first).to_contain_text(high["number"])

    middle = shop.invoice(status="received", amount="20.00")
    top = shop.invoice(status="received", amount="99.00")
    expect(rows(console)).to_have_count(4)
    numbers = [top["number"], high["number"], middle["number"], low["number"]]
    for index, number in enumerate(numbers):
        expect(rows(console).nth(index)).to_contain_text(number)


def test_reference_cells_name_and_link_the_referenced_row_and_a_member_sees_only_what_they_may_read(
        console: Page, shop: Shop) -> None:
    vendor = expect_status(shop.north_clerk.post(shop.world.rows("vendors"),
                                                 json={"name": "Acme Supplies"}), 201)
    invoice = shop.invoice(status="received", vendor_uid=vendor["uid"])
    viewer = shop.member(shop.north, ["viewer"])
    open_grid(console, shop, 1)
    link = cell(console, invoice["number"], "vendor_uid").get_by_role("link", name="Acme Supplies")
    expect(link).to_have_attribute("title", vendor["uid"])

    # A new invoice arriving live is named too.
    shop.invoice(status="received", number="LIVE-1", vendor_uid=vendor["uid"])
    expect(cell(console, "LIVE-1", "vendor_uid")).to_have_text("Acme Supplies")

    link.click()
    expect(console.get_by_test_id("linked-row")).to_contain_text(vendor["uid"])
    expect(rows(console)).to_have_count(1)
    expect(cell(console, "Acme Supplies", "name")).to_have_text("Acme Supplies")
    console.get_by_role("link", name="Show all rows").click()
    expect(console.get_by_test_id("linked-row")).to_have_count(0)

    # Viewing as a member who may not read vendors: the cell keeps the bare uid.
    go(console, shop.world, "data/invoices")
    console.get_by_text("View as a member").click()
    console.get_by_label("View as user").select_option(label=viewer["email"])
    console.get_by_label("View as org").select_option(label="North")
    console.get_by_role("button", name="View as", exact=True).click()
    expect(console.get_by_test_id("viewing-as")).to_contain_text(viewer["email"])
    expect(cell(console, invoice["number"], "vendor_uid")).to_have_text(vendor["uid"])
    expect(cell(console, invoice["number"], "vendor_uid").get_by_role("link")).to_have_count(0)


def test_operator_sees_an_estimated_total_and_counts_the_rows_of_a_filter_exactly(
        console: Page, shop: Shop, database_url: str) -> None:
    for org, count, status in [(shop.north, 40, "paid"), (shop.north, 30, "received"),
                               (shop.south, 5, "paid")]:
        csv = "number,status\n" + "".join(f"{org[:8]}-{status}-{i},{status}\n" for i in range(count))
        expect_status(shop.admin.post(f"{shop.admin_rows()}/import", params={"org": org},
                                      content=csv, headers={"Content-Type": "text/csv"}), 201)
    # What autovacuum would do in time: the estimate is as good as the table's statistics.
    db_fetch(database_url, f'ANALYZE "app_{shop.app_uid().hex}".invoices')
    # Marked as an estimate, with the time it was read.
    estimate = re.compile(r"^≈ [\d,]+ rows? · estimate at \S+")
    total = console.get_by_test_id("row-total")
    count_rows = console.get_by_role("button", name="Count rows")

    go(console, shop.world, "data/invoices")
    console.get_by_label("Page size").select_option("25")  # all drawn (the grid draws what fits)
    expect(rows(console)).to_have_count(25)
    expect(total).to_have_text(estimate)
    expect(total).to_have_attribute("title", re.compile("estimate"))
    count_rows.click()
    expect(total).to_have_text("75 rows")
    expect(count_rows).to_have_count(0)

    # Another filter: its estimate replaces the count of the last one, and is counted anew.
    console.get_by_label("Org filter").select_option(label="North")
    expect(total).to_have_text(estimate)
    console.get_by_text("Filter", exact=True).click()
    console.get_by_label("Filter JSON").fill('{"status": "paid"}')
    console.get_by_role("button", name="Apply JSON").click()
    expect(rows(console)).to_have_count(25)
    expect(total).to_have_text(estimate)
    screenshot(console, "row-total")
    count_rows.click()
    expect(total).to_have_text("40 rows")

    # The count holds across pages of the same filter; a live change says it may have moved.
    console.get_by_role("button", name="Next →").click()
    expect(rows(console)).to_have_count(15)
    expect(total).to_have_text("40 rows")
    expect(console.get_by_test_id("feed-state")).to_have_text("live: live")
    shop.invoice(status="paid", number="LIVE-1")
    expect(total).to_have_text(re.compile(r"^40 rows at "))
    count_rows.click()
    expect(total).to_have_text("41 rows")
