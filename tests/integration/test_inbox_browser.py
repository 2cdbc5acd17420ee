"""The inbox's web page in a real headless Chromium (Debian's, driven by Playwright by its path).

``scripts/setup_browser.sh`` (run by ``make test``) installs Debian's ``chromium``; Playwright
never downloads a browser here. Each test saves screenshots under its tmp dir and checks
them; set ``INTERLOCK_SCREENSHOTS=DIR`` to keep copies (``docs/img/inbox.png`` is one).
"""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import AsyncIterator

import policy_bank
import pytest
from http_helpers import serve
from inbox_apps import RUNS, build_app
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from interlock import Agent, AgentOutput
from interlock.http._inbox import InboxApp
from interlock.inbox._inbox import Inbox
from interlock.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow
WAIT = 20_000  # ms: generous, the machine is shared


def _chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("the browser tests need Debian's chromium: run scripts/setup_browser.sh (make test does)")
    return found


class Site:
    """A served inbox, its agents, and browsers signed in as someone (X-User) of some tenant (X-Tenant)."""

    def __init__(self, store: SQLiteStore, agents: list[Agent], url: str, browser: Browser, shots: pathlib.Path):
        self.store, self.url, self.browser, self.shots = store, url, browser, shots
        self.agents = {a.name: a for a in agents}

    async def start(self, agent: str, text: str, tenant: str | None = None) -> AgentOutput:
        out = await self.agents[agent].run(text, context={"tenant": tenant})
        assert out.finish_reason == "interrupted", out
        return out

    async def page(self, user: str, tenant: str | None = None) -> Page:
        headers = {"x-user": user} | ({"x-tenant": tenant} if tenant else {})
        context: BrowserContext = await self.browser.new_context(
            extra_http_headers=headers, viewport={"width": 1200, "height": 860}
        )
        return await context.new_page()

    async def shot(self, page: Page, name: str) -> pathlib.Path:
        path = self.shots / f"{name}.png"
        await page.screenshot(path=str(path), full_page=True)
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5_000, f"screenshot {name} is empty"
        keep = os.environ.get("INTERLOCK_SCREENSHOTS")
        if keep:
            shutil.copy(path, pathlib.Path(keep) / path.name)
        return path


@pytest.fixture
async def site(tmp_path: pathlib.Path) -> AsyncIterator[Site]:
    chromium = _chromium()
    async with SQLiteStore(tmp_path / "inbox.db") as store:
        app, agents = build_app(store, poll_interval=0.3)
        async with serve(app) as url, async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium)
            try:
                yield Site(store, agents, url, browser, tmp_path)
            finally:
                await browser.close()


async def _pending(store: SQLiteStore, tenant: str | None = None) -> list[str]:
    return [i.snapshot_id for i in await Inbox(store).pending(tenant=tenant)]


async def test_a_paused_turn_appears_in_the_list_without_reload(site: Site) -> None:
    page = await site.page("alice")
    await page.goto(site.url + "/")
    await expect(page.locator(".empty")).to_be_visible()
    await page.evaluate("window.__not_reloaded = true")
    paused = await site.start("bank", "pay bob 25")
    row = page.locator(f"tr[data-snapshot='{paused.snapshot_id}']")
    await expect(row).to_be_visible(timeout=WAIT)
    await expect(row).to_contain_text("transfer#t1")
    await expect(row).to_contain_text("Send 25 EUR to bob?")
    await site.start("ops", "delete /srv/report.csv")
    await site.start("helpdesk", "ask which account should I use")
    await expect(page.locator("tr.item")).to_have_count(3, timeout=WAIT)
    assert await page.evaluate("window.__not_reloaded") is True
    await site.shot(page, "list")


async def test_the_detail_form_shows_typed_fields(site: Site) -> None:
    paused = await site.start("bank", "pay carol 1200")
    page = await site.page("alice")
    await page.goto(f"{site.url}/interrupts/{paused.snapshot_id}")
    await expect(page.locator(".banner.waiting")).to_contain_text("Waiting for an answer")
    await page.click("details[data-decision=edit] summary")
    amount, to = page.locator("input[name='input.amount']"), page.locator("input[name='input.to']")
    assert await amount.get_attribute("type") == "number" and await amount.input_value() == "1200.0"
    assert await to.get_attribute("type") == "text" and await to.input_value() == "carol"
    await expect(page.locator("[data-field='input.amount'] small")).to_contain_text("> 0")
    await page.click("details[data-decision=restart] summary")
    approved = page.locator("input[name='payload.approved']")
    assert await approved.get_attribute("type") == "checkbox"
    await page.click("details[data-decision=respond] summary")
    assert await page.locator("input[name='output.status']").get_attribute("type") == "text"
    await site.shot(page, "detail")


async def test_approving_finishes_the_turn(site: Site) -> None:
    paused = await site.start("bank", "pay dave 42")
    runs = len(RUNS)
    page = await site.page("alice")
    await page.goto(f"{site.url}/interrupts/{paused.snapshot_id}")
    await page.click("button.approve")
    done = page.locator(".result .banner[data-state=answered]")
    await expect(done).to_contain_text("Approved by alice", timeout=WAIT)
    await expect(done).to_contain_text("The turn finished (stop)")
    latest = await site.store.latest(paused.session_id or "")
    assert latest is not None and latest.parent_id == paused.snapshot_id and latest.finish_reason == "stop"
    assert latest.state is not None and "sent" in latest.state.messages[-1].text
    assert len(RUNS) == runs + 1 and RUNS[-1] == {"to": "dave", "amount": 42.0}
    await expect(page.locator("#state [data-state=answered]")).to_contain_text("Answered by alice", timeout=WAIT)
    await site.shot(page, "approved")


async def test_a_turn_waiting_on_two_calls_is_answered_in_one_form(site: Site) -> None:
    paused = await site.start("bank", "pay kim 15 and lee 16")
    runs = len(RUNS)
    page = await site.page("alice")
    await page.goto(f"{site.url}/interrupts/{paused.snapshot_id}")
    await expect(page.locator("form.answer.all section.interrupt")).to_have_count(2)
    await expect(page.locator("form.answer.all button[type=submit]")).to_have_text("Answer all 2")
    second = page.locator("section.interrupt[data-ref=t2]")
    await second.locator("input[value=respond]").check()
    await second.locator("details[data-decision=respond] summary").click()
    await page.fill("input[name='a2.output.status']", "paid by hand")
    await site.shot(page, "two-calls")
    await page.click("form.answer.all button[type=submit]")
    done = page.locator("#result-all .banner[data-state=answered]")
    await expect(done).to_contain_text("All 2 calls answered by alice", timeout=WAIT)
    latest = await site.store.latest(paused.session_id or "")
    assert latest is not None and latest.parent_id == paused.snapshot_id and latest.finish_reason == "stop"
    assert latest.state is not None and "paid by hand" in latest.state.messages[-1].text
    assert RUNS[runs:] == [{"to": "kim", "amount": 15.0}]  # t1 approved and ran; t2 answered, not run


async def test_a_second_browser_is_told_who_answered_first(site: Site) -> None:
    paused = await site.start("ops", "delete /srv/old.log")
    alice, bob = await site.page("alice"), await site.page("bob")
    for page in (alice, bob):
        await page.goto(f"{site.url}/interrupts/{paused.snapshot_id}")
    await alice.click("button.approve")
    await expect(alice.locator(".result .banner")).to_contain_text("Approved by alice", timeout=WAIT)
    await bob.fill("input[name=reason]", "not now")
    await bob.click("button.reject")
    told = bob.locator(".result .banner")
    await expect(told).to_contain_text("Someone answered first: alice", timeout=WAIT)
    await expect(told).to_contain_text("Nothing was changed")
    await expect(bob.locator("#state")).to_contain_text("Answered by alice", timeout=WAIT)
    [entry] = await Inbox(site.store).audit(paused.session_id or "")
    assert entry.by == "alice" and entry.restart[0].decision == "approve"
    await site.shot(bob, "second-browser")


async def test_an_edited_input_outside_the_schema_shows_the_servers_message(site: Site) -> None:
    paused = await site.start("bank", "pay erin 80")
    runs = len(RUNS)
    page = await site.page("alice")
    await page.goto(f"{site.url}/interrupts/{paused.snapshot_id}")
    await page.click("details[data-decision=edit] summary")
    await page.fill("input[name='input.amount']", "-5")
    await page.click("details[data-decision=edit] button")
    error = page.locator(".result .banner.error")
    await expect(error).to_contain_text("INVALID_ARGUMENT", timeout=WAIT)
    await expect(error).to_contain_text("Input should be greater than 0")
    await expect(error.locator(".problems")).to_contain_text("amount")
    assert await _pending(site.store) == [paused.snapshot_id]
    assert len(RUNS) == runs
    latest = await site.store.latest(paused.session_id or "")
    assert latest is not None and latest.snapshot_id == paused.snapshot_id
    await site.shot(page, "edit-refused")


async def test_another_tenants_user_does_not_see_it(site: Site) -> None:
    theirs = await site.start("bank", "pay frank 9", tenant="acme")
    await site.start("bank", "pay gina 3", tenant="globex")
    other = await site.page("mallory", tenant="globex")
    await other.goto(site.url + "/")
    await expect(other.locator("tr.item")).to_have_count(1)
    await other.wait_for_timeout(1_500)  # a few live updates later, still only globex's own
    await expect(other.locator(f"tr[data-snapshot='{theirs.snapshot_id}']")).to_have_count(0)
    assert "frank" not in await other.content()
    response = await other.goto(f"{site.url}/interrupts/{theirs.snapshot_id}")
    assert response is not None and response.status == 404
    await expect(other.locator(".banner.problem")).to_contain_text("no such snapshot")
    assert await other.locator("form.answer").count() == 0
    own = await site.page("ann", tenant="acme")
    await own.goto(site.url + "/")
    await expect(own.locator(f"tr[data-snapshot='{theirs.snapshot_id}']")).to_be_visible()
    await site.shot(other, "other-tenant")


async def test_a_filtered_list_stays_filtered_as_it_updates(site: Site) -> None:
    page = await site.page("alice")
    await page.goto(site.url + "/?agent=ops")
    await expect(page.locator(".empty")).to_be_visible()
    await page.evaluate("window.__not_reloaded = true")
    paid = await site.start("bank", "pay hank 5")
    held = await site.start("ops", "delete /srv/tmp.txt")
    await expect(page.locator(f"tr[data-snapshot='{held.snapshot_id}']")).to_be_visible(timeout=WAIT)
    await expect(page.locator(f"tr[data-snapshot='{paid.snapshot_id}']")).to_have_count(0)
    assert await page.evaluate("window.__not_reloaded") is True
    await page.select_option("select[name=order]", "newest")
    await expect(page).to_have_url(f"{site.url}/?agent=ops&tool=&older_than=&order=newest", timeout=WAIT)
    await expect(page.locator("tr.item")).to_have_count(1)


@pytest.fixture
async def vault(tmp_path: pathlib.Path) -> AsyncIterator[Site]:
    """The policy bank (treasury approves, never the requester, two above 10 000) served with its people."""
    chromium = _chromium()
    async with SQLiteStore(tmp_path / "vault.db") as store:
        agent = policy_bank.bank(store)
        app = InboxApp(Inbox(store, agents=[agent]), context=policy_bank.who, poll_interval=0.3)
        async with serve(app) as url, async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium)
            try:
                yield Site(store, [agent], url, browser, tmp_path)
            finally:
                await browser.close()


async def test_the_page_shows_who_may_answer_the_votes_and_disables_what_the_viewer_may_not_do(vault: Site) -> None:
    policy_bank.RUNS.clear()
    paused = await vault.agents["bank"].run("pay bob 25000", context={"identity": policy_bank.ALICE})
    url = f"{vault.url}/interrupts/{paused.snapshot_id}"
    alice, mallory, bob = await vault.page("alice"), await vault.page("mallory"), await vault.page("bob")
    for page, reason in ((alice, "requester_cannot_approve"), (mallory, "not_permitted")):
        await page.goto(url)
        await expect(page.locator(".policy")).to_contain_text("has_role('treasury')")
        await expect(page.locator(".policy")).to_contain_text("not alice (who asked)")
        for button in ("button.approve", "button.reject"):
            await expect(page.locator(button)).to_be_disabled()
            assert await page.locator(button).get_attribute("title") == reason
    await vault.shot(alice, "policy-requester")
    await mallory.evaluate("document.querySelector('button.approve').disabled = false")  # force it: the server decides
    await mallory.click("button.approve")
    refused = mallory.locator(".result .banner.error")
    await expect(refused).to_have_attribute("data-status", "PERMISSION_DENIED", timeout=WAIT)
    await expect(refused).to_contain_text("not_permitted")
    snap = await vault.store.load(paused.snapshot_id or "")
    assert snap is not None and not (snap.metadata or {}).get("votes") and snap.claimed_by is None

    await bob.goto(url)
    await expect(bob.locator(".policy .quorum")).to_have_text("0 of 2")
    await expect(bob.locator("button.approve")).to_be_enabled()
    await expect(bob.locator("details[data-decision=respond] button")).to_be_disabled()
    await bob.click("button.approve")
    await expect(bob.locator(".result [data-state=voted]")).to_be_visible(timeout=WAIT)
    await bob.reload()
    await expect(bob.locator(".policy .quorum")).to_have_text("1 of 2")
    await expect(bob.locator(".votes li[data-voter=bob]")).to_contain_text("bob voted approve")
    await expect(bob.locator("button.approve")).to_be_disabled()
    assert await bob.locator("button.approve").get_attribute("title") == "already_voted"
    await vault.shot(bob, "policy-voted")
    assert policy_bank.RUNS == []

    carol = await vault.page("carol")
    await carol.goto(url)
    await expect(carol.locator(".votes li")).to_have_count(1)
    await carol.click("button.approve")
    await expect(carol.locator(".result .banner[data-state=answered]")).to_contain_text(
        "The turn finished (stop)", timeout=WAIT
    )
    assert policy_bank.RUNS == [{"to": "bob", "amount": 25000.0}]
