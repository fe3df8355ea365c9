"""An auditor's story in a real browser (Playwright driving Debian's Chromium): clients pay a merchant through the
facilitator API, the projection worker fills the payments read model, and the merchant opens the payments list,
filters it, opens a payment and reads its event timeline. Screenshots in tests/artifacts/console/."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from interfaces.http.console.app import create_app as create_console
from interfaces.http.facilitator.app import create_app
from interfaces.runtime.workers import run
from interfaces.wiring import api_collaborators, console_collaborators
from tests.conftest import USDC, make_gateway
from tests.e2e.test_console_browser import EMAIL, browser, log_in, serve, shot  # noqa: F401 - the browser fixture
from tests.integration.console_helpers import add_owner


@pytest.fixture
def site(tmp_path, sandbox):
    gateway = make_gateway(tmp_path, sandbox)
    add_owner(gateway.container, "acme", EMAIL)
    api_url, api = serve(create_app(api_collaborators(gateway.container)))
    console_url, console = serve(create_console(console_collaborators(gateway.container)))
    stop = threading.Event()  # the projection worker, as `paywarden project payment_list` runs it
    worker = threading.Thread(target=run, args=(gateway.container, ["payment_list"], stop), daemon=True)
    worker.start()
    yield gateway, api_url, console_url
    stop.set()
    worker.join(10)
    for server in (api, console):
        server.shutdown()
    gateway.container.close()


def test_auditor_opens_the_payments_filters_them_and_reads_a_payments_timeline(site, browser):  # noqa: F811
    gateway, api_url, console_url = site
    key = {"Authorization": f"Bearer {gateway.api_key}"}

    # Clients pay: one settlement, one verification, one refused for the wrong recipient
    settled = httpx.post(api_url + "/settle", json=gateway.body(amount=USDC // 4), headers=key, timeout=60).json()
    assert settled["success"], settled
    assert httpx.post(api_url + "/verify", json=gateway.body(amount=USDC // 2), headers=key).json()["isValid"]
    refused = httpx.post(api_url + "/verify", json=gateway.body(payTo=str(gateway.payer.pubkey())), headers=key)
    assert refused.status_code == 400
    payments = gateway.container.payments
    gateway.container.payment_list.wait(payments.name, payments.recorder.max_notification_id(), timeout=30)

    # The merchant opens the payments list: newest first
    page = browser.new_page()
    log_in(page, console_url)
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Payments").click()
    page.wait_for_url(console_url + "/payments")
    assert page.get_by_role("heading", name="Payments").is_visible()
    assert page.get_by_role("status").inner_text() == "3 payments, newest first."
    assert page.locator("tbody .state").all_inner_texts() == ["REJECTED", "APPROVED", "CONFIRMED"]
    shot(page, "20-payments")

    # ... filters it: the settled ones of today
    today = datetime.now(UTC).date()
    page.get_by_label("State").select_option("CONFIRMED")
    page.get_by_label("From (UTC day)").fill(today.isoformat())
    page.get_by_label("To (UTC day, included)").fill(today.isoformat())
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/payments?state=CONFIRMED*")
    assert page.get_by_role("status").inner_text() == "1 payment, newest first."
    row = page.locator("tbody tr")
    assert row.locator(".state").inner_text() == "CONFIRMED" and "0.25 USDC" in row.inner_text()
    assert page.get_by_label("State").input_value() == "CONFIRMED"  # the form keeps the filter
    shot(page, "21-payments-filtered")

    # ... opens the payment and reads its timeline, every event with its time and recorded fields
    row.get_by_role("link").click()
    page.wait_for_url("**/payments/*-*")
    assert page.locator("#payment-state").inner_text() == "CONFIRMED"
    assert page.get_by_text(settled["transaction"], exact=True).first.is_visible()
    assert page.get_by_role("heading", name="Event timeline").is_visible()
    events = page.locator("ol.timeline > li")
    assert events.locator(".event-type").all_inner_texts() == [
        "Payment.Received", "Payment.Approved", "Payment.SettlementSubmitted", "Payment.Confirmed"]
    assert all(t.startswith(today.isoformat()) for t in events.locator("time").all_inner_texts())
    received = events.nth(0).inner_text()
    assert "amount" in received and str(USDC // 4) in received and str(gateway.pay_to.pubkey()) in received
    assert settled["transaction"] in events.nth(3).inner_text()
    shot(page, "22-payment-timeline")

    # Back to the list; a day with no payments says so
    page.get_by_role("link", name="All payments").click()
    page.get_by_label("From (UTC day)").fill((today + timedelta(days=1)).isoformat())
    page.get_by_role("button", name="Filter").click()
    assert page.get_by_role("status").inner_text() == "No payments match the filter."
