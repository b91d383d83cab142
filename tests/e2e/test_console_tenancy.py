"""An org's people in the browser: the operator invites a clerk from the console, the
invitation's mail lands in the app's mailbox, the clerk opens its link in their own browser,
chooses a password on the server's invite page and joins, and the console lists the new
member with the invitation's role. Then a key is created there (shown once) and revoked, and
the roles page edits a role's grants.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.accounts import mails_to, new_email
from tests.e2e.conftest import confirm, go, new_page
from tests.scenario import AppWorld
from tests.scenario import expect as expect_status


@pytest.fixture
def invitee_page(browser: Browser) -> Iterator[Page]:
    """The invitee's own browser: nothing of the console's session."""
    page = new_page(browser)
    yield page
    page.context.close()


def test_an_invited_clerk_joins_from_the_mail_and_the_console_lists_them(
        console: Page, invitee_page: Page, world: AppWorld) -> None:
    world.table("notes", [{"name": "text", "type": "text"}])
    for name in ("owner", "clerk"):
        expect_status(world.admin.put(f"{world.base}/roles/{name}", json={"permissions": ["notes:*"]}),
                      200)
    org = world.org("Northwind")
    email = new_email()

    go(console, world, "people")
    console.get_by_label("Org to manage").select_option(label="Northwind")
    access = console.get_by_test_id("org-access")
    access.get_by_label("Invite email").fill(email)
    access.get_by_label("Invite as clerk").check()
    access.get_by_role("button", name="Send invitation").click()
    expect(access.get_by_test_id("invitations")).to_contain_text(email)

    [mail] = mails_to(world, email)
    link = next(word for word in mail["text"].split() if "/auth/pages/invite#token=" in word)
    invitee_page.goto(link)
    expect(invitee_page.get_by_role("status")).to_contain_text("Choose a password")
    invitee_page.get_by_label("New password").fill("a long password")
    invitee_page.get_by_role("button", name="Accept").click()
    expect(invitee_page.get_by_role("status")).to_contain_text("You have joined")

    console.reload()
    members = console.get_by_test_id("members")
    expect(members.locator("tr").filter(has_text=email)).to_contain_text("clerk")
    expect(members.locator("tr").filter(has_text=email)).to_contain_text("Northwind")
    pair = expect_status(world.admin.client.post(f"/{world.name}/auth/token", json={
        "email": email, "password": "a long password", "org": org}), 200)
    assert pair["access_token"]

    # A key: shown once, with a copy button, then revoked.
    console.get_by_label("Org to manage").select_option(label="Northwind")
    access.get_by_label("Key name").fill("nightly")
    access.get_by_label("Key holds clerk").check()
    access.get_by_role("button", name="Create key").click()
    shown = access.get_by_test_id("new-key")
    expect(shown).to_contain_text("ak_")
    expect(shown.get_by_role("button", name="Copy")).to_be_visible()
    key = shown.locator("code").inner_text()
    notes = f"/{world.name}/autocrud/notes"
    assert world.admin.client.get(notes, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    access.get_by_test_id("keys").get_by_role("button", name="Revoke").click()
    confirm(console, "Revoke")
    expect(access.get_by_test_id("keys")).to_contain_text("No keys.")
    assert world.admin.client.get(notes, headers={"Authorization": f"Bearer {key}"}).status_code == 401

    # The roles page edits what a role may hand out.
    go(console, world, "roles/owner")
    console.get_by_label("Grants clerk").check()
    console.get_by_role("button", name="Save role").click()
    confirm(console, "Save role", "May hand out: clerk")
    expect(console.get_by_text('Role "owner" saved')).to_be_visible()
    role = expect_status(world.admin.get(f"{world.base}/roles/owner"), 200)
    assert role["grants"] == ["clerk"]
