"""Webhooks in the console, in a real browser (Playwright driving Debian's Chromium): a merchant adds an endpoint,
copies its secret, sends a test event that a real HTTPS receiver verifies, reads the attempt, resends it, and
sees a 410 disable the endpoint. Screenshots in tests/artifacts/console/."""

from __future__ import annotations

import threading

import pytest

from interfaces.http.console.app import create_app as create_console
from interfaces.runtime.webhook_worker import DeliverySettings, DeliveryWorker
from interfaces.wiring import console_collaborators
from tests.conftest import make_gateway
from tests.e2e.test_console_browser import browser, log_in, serve, shot  # noqa: F401 - the browser fixture
from tests.faults import wait_until
from tests.integration.console_helpers import add_owner
from tests.webhook_receiver import start_receiver

EMAIL = "owner@acme.test"


@pytest.fixture
def site(tmp_path, sandbox):
    gateway = make_gateway(tmp_path, sandbox)
    add_owner(gateway.container, "acme", EMAIL)
    receiver, hooks = start_receiver(tmp_path)
    console_url, console = serve(create_console(console_collaborators(gateway.container)))
    stop = threading.Event()
    worker = DeliveryWorker(gateway.container, DeliverySettings(schedule=(0, 0.2), timeout_seconds=2,
                                                                lease_seconds=5, poll_seconds=0.05,
                                                                ca_file=receiver.ca_file))
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    yield gateway, receiver, console_url
    stop.set()
    thread.join(10)
    for server in (console, hooks):
        server.shutdown()
    gateway.container.close()


def test_merchant_adds_a_webhook_tests_it_resends_it_and_a_410_disables_it(site, browser):  # noqa: F811
    gateway, receiver, console_url = site
    page = browser.new_page()
    log_in(page, console_url)
    page.get_by_role("link", name="Webhooks").click()
    url_field = page.get_by_label("URL (https://, or http://localhost in the sandbox)")
    url_field.fill("http://hooks.acme.com/paywarden")  # plain http: refused
    page.get_by_role("button", name="Add endpoint").click()
    assert "https" in page.locator("#e-url").inner_text()
    url_field.fill(receiver.url)
    page.get_by_label("payment.approved").check()
    page.get_by_role("button", name="Add endpoint").click()
    secret = page.get_by_label("The signing secret").input_value()
    assert secret.startswith("whsec_")
    receiver.secrets.append(secret)
    shot(page, "10-webhook-added")
    page.get_by_role("link", name="Open the endpoint").click()
    assert secret not in page.content()  # shown once

    page.get_by_role("button", name="Send a test event").click()
    wait_until(lambda: len(receiver.deliveries) == 1, timeout=20, what="the test event delivered")
    [delivery] = receiver.deliveries
    assert delivery.payload["type"] == "webhook.test" and delivery.verified_with == [secret]
    msg_id = delivery.headers["webhook-id"]
    endpoint_id = page.url.rsplit("/", 1)[1].split("?")[0]
    view = gateway.container.webhooks_view
    wait_until(lambda: view.list_deliveries(endpoint_id)[0]["status"] == "delivered", timeout=10,
               what="the attempt recorded")
    page.reload()
    row = page.locator(f'tr[data-message="{msg_id}"]')
    assert row.locator(".delivery-status").inner_text() == "delivered" and "HTTP 200" in row.inner_text()
    shot(page, "11-webhook-delivered")

    row.get_by_role("button", name=f"Resend {msg_id}").click()
    wait_until(lambda: len(receiver.deliveries) == 2, timeout=20, what="the resend delivered")
    assert receiver.deliveries[1].headers["webhook-id"] == msg_id

    # A payment the merchant subscribed to, answered 410 Gone: the endpoint is disabled.
    receiver.answer(410)
    key = gateway.headers
    assert gateway.client.simulate_post("/verify", json=gateway.body(), headers=key).json["isValid"] is True
    wait_until(lambda: len(receiver.deliveries) == 3, timeout=20, what="the payment event delivered")
    assert receiver.deliveries[2].payload["type"] == "payment.approved"
    wait_until(lambda: not view.get_endpoint(endpoint_id).enabled, timeout=10, what="the endpoint disabled")
    page.reload()
    assert page.locator(".status").inner_text() == "disabled" and "410" in page.content()
    shot(page, "12-webhook-disabled-by-410")
