"""The merchant console in a real browser (Playwright driving Debian's Chromium), as a merchant uses it.

The console and the facilitator API run as real HTTP servers over one embedded store and the sandbox chain; a
local DNS server answers the domain challenge. Each page is saved as a screenshot in tests/artifacts/console/.
"""

from __future__ import annotations

import threading
from pathlib import Path
from wsgiref.simple_server import make_server

import httpx
import pytest

from interfaces.http.console.app import create_app as create_console
from interfaces.http.facilitator.app import create_app
from interfaces.runtime.workers import catch_up_all
from interfaces.sandbox.localnet import QuietHandler, ThreadingServer
from interfaces.wiring import api_collaborators, console_collaborators
from tests.conftest import make_gateway
from tests.dnsserver import TxtServer
from tests.integration.console_helpers import PASSWORD, add_owner
from tests.services import POLL, chromium

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
EMAIL = "owner@acme.test"


def serve(app) -> tuple[str, object]:
    httpd = make_server("127.0.0.1", 0, app, ThreadingServer, QuietHandler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_port}", httpd


@pytest.fixture
def dns():
    with TxtServer() as server:
        yield server


@pytest.fixture
def site(tmp_path, sandbox, dns):
    gateway = make_gateway(tmp_path, sandbox, dns_nameservers=(dns.nameserver,))
    add_owner(gateway.container, "acme", EMAIL)
    api_url, api = serve(create_app(api_collaborators(gateway.container)))
    console_url, console = serve(create_console(console_collaborators(gateway.container)))
    yield gateway, api_url, console_url
    for server in (api, console):
        server.shutdown()
    gateway.container.close()


@pytest.fixture
def browser():
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def log_in(page, console_url: str) -> None:
    page.goto(console_url + "/")
    assert page.url.endswith("/login")  # not logged in: sent to the login page
    shot(page, "01-login")
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(console_url + "/")
    assert page.get_by_role("heading", name="Overview").is_visible()


def test_merchant_logs_in_creates_a_key_uses_it_sees_last_used_and_revokes_it(site, browser):
    gateway, api_url, console_url = site
    page = browser.new_page()
    log_in(page, console_url)
    assert page.get_by_text("verifies today").is_visible()
    shot(page, "02-overview")

    # A wrong password first: the same words as an unknown email
    other = browser.new_page()
    other.goto(console_url + "/login")
    other.get_by_label("Email").fill(EMAIL)
    other.get_by_label("Password").fill("not my password")
    other.get_by_role("button", name="Log in").click()
    assert other.get_by_role("alert").inner_text() == "Wrong email or password."
    other.close()

    # Create a key: it is shown once, with a copy button
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Label (optional)").fill("weather shop")
    page.get_by_role("button", name="Create key").click()
    key = page.get_by_label("The new API key").input_value()
    assert key.startswith("pw_test_") and len(key) == 48
    assert page.get_by_role("button", name="Copy").is_visible()  # JavaScript adds it
    shot(page, "03-key-created")
    page.goto(console_url + "/keys")  # the key is never shown again
    assert key not in page.content()
    row = page.locator(f'tr[data-prefix="{key[:16]}"]')
    assert row.locator(".last-used").inner_text() == "never"

    # Use it on /verify: last used changes
    answer = httpx.post(api_url + "/verify", json=gateway.body(), headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200 and answer.json()["isValid"], answer.text
    page.reload()
    assert row.locator(".last-used").inner_text().startswith("20")
    shot(page, "04-key-used")

    # ... and settle with it: the overview counts today's verifications and settlements and the volume
    answer = httpx.post(api_url + "/settle", json=gateway.body(amount=250_000),
                        headers={"Authorization": f"Bearer {key}"}, timeout=60)
    assert answer.status_code == 200 and answer.json()["success"], answer.text
    catch_up_all(gateway.container, ["payment_list", "payment_volume"])  # what the projection worker does
    page.get_by_role("link", name="Overview").click()
    tiles = page.locator(".tile").all_inner_texts()
    assert "2\nverifies today" in tiles and "1\nsettle today" in tiles and "0.25\nUSDC settled today" in tiles
    states = page.locator("td .state").all_inner_texts()
    assert states[:2] == ["CONFIRMED", "APPROVED"]
    shot(page, "04b-overview-after-payments")
    page.get_by_role("link", name="API keys").click()

    # Revoke it, confirming; the API answers 401
    row.get_by_text("Revoke…").click()
    row.get_by_role("button", name=f"Yes, revoke {key[:16]}…").click()
    page.wait_for_url("**/keys?done=revoked")
    assert "revoked" in page.locator(f'tr[data-prefix="{key[:16]}"]').inner_text()
    shot(page, "05-key-revoked")
    answer = httpx.post(api_url + "/verify", json=gateway.body(), headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 401 and answer.json()["error"] == "revoked_api_key"


def test_merchant_enables_a_capability_verifies_a_domain_and_turns_discovery_off(site, browser, dns):
    gateway, api_url, console_url = site
    page = browser.new_page()
    log_in(page, console_url)

    # A bad mint is refused beside its field; a good one is enabled
    page.get_by_role("link", name="Capabilities").click()
    page.get_by_label("Asset (token mint)").fill("not-a-mint")
    page.get_by_role("button", name="Enable").click()
    assert "not a base58 mint address" in page.locator("#e-asset").inner_text()
    shot(page, "06-capability-refused")
    page.get_by_label("Asset (token mint)").fill("So11111111111111111111111111111111111111112")
    page.get_by_role("button", name="Enable").click()
    assert page.get_by_role("status").inner_text() == "Capability enabled."
    assert page.get_by_role("cell", name="So11111111111111111111111111111111111111112").is_visible()
    shot(page, "07-capabilities")

    # Add a domain, publish its TXT record, verify it
    page.get_by_role("link", name="Domains").click()
    page.get_by_label("Domain").fill("api.acme-weather.test")
    page.get_by_role("button", name="Add domain").click()
    card = page.locator('section[data-domain="api.acme-weather.test"]')
    assert "pending" in card.inner_text()
    page.get_by_role("button", name="Verify").click()
    assert "not verified yet" in page.get_by_role("alert").inner_text()
    shot(page, "08-domain-pending")
    text = card.inner_text()
    name = "_paywarden-challenge.api.acme-weather.test"
    value = next(w for w in text.split() if w.startswith("paywarden-verification="))
    assert name in text
    dns.publish(name, value)
    page.get_by_role("button", name="Verify").click()
    assert page.get_by_role("status").inner_text() == "api.acme-weather.test is verified."
    assert "verified" in card.locator(".state").inner_text()
    shot(page, "09-domain-verified")
    merchant_id = str(gateway.container.merchants.get_merchant("acme").id)
    assert gateway.container.accounts.list_verified_domains(merchant_id) == ["api.acme-weather.test"]

    # Turn discovery off
    page.get_by_role("link", name="Discovery").click()
    assert page.locator("#discovery-state").inner_text() == "on"
    page.get_by_role("button", name="Turn discovery off").click()
    assert page.locator("#discovery-state").inner_text() == "off"
    shot(page, "10-discovery-off")
    assert gateway.container.accounts.get_discovery_enabled(merchant_id) is False

    # Log out: the old cookie no longer opens a page
    cookies = page.context.cookies()
    page.get_by_role("button", name="Log out", exact=True).click()
    page.wait_for_url("**/login")
    again = browser.new_context()
    again.add_cookies(cookies)
    replay = again.new_page()
    replay.goto(console_url + "/keys")
    assert replay.url.endswith("/login")


def test_the_console_works_without_javascript(site, browser):
    _, _, console_url = site
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    log_in(page, console_url)
    page.goto(console_url + "/keys")
    page.get_by_role("button", name="Create key").click()
    assert page.get_by_label("The new API key").input_value().startswith("pw_test_")
    assert not page.get_by_role("button", name="Copy").is_visible()  # the enhancement is absent, the key is not
    shot(page, "11-no-javascript")


def test_log_out_everywhere_ends_the_other_browsers_session(site, browser):
    """Issue 27: a login open in two browsers; "Log out everywhere" in one sends the other to the login page."""
    _, _, console_url = site
    here, there = browser.new_context().new_page(), browser.new_context().new_page()
    log_in(here, console_url)
    log_in(there, console_url)
    here.get_by_role("button", name="Log out everywhere").click()
    here.wait_for_url("**/login")
    shot(here, "12-logged-out-everywhere")
    there.goto(console_url + "/keys")
    assert there.url.endswith("/login")


def test_merchant_searches_the_catalog_from_the_discovery_page_and_pages_the_results(site, browser, monkeypatch):
    from projections.catalog import CatalogProjection
    from projections.runner import catch_up
    from tests.discovery_listings import LISTINGS, SEARCHES, seed

    gateway, _, console_url = site
    seed(gateway.container.listings)
    catch_up(gateway.container.listings, CatalogProjection(gateway.container.catalog))
    monkeypatch.setattr("interfaces.http.console.pages.SEARCH_PAGE", 3)
    names = {resource: name for name, (resource, *_) in LISTINGS.items()}
    page = browser.new_page()
    log_in(page, console_url)
    page.get_by_role("link", name="Discovery").click()

    def shown() -> list[str]:
        return [names[text.split(" ", 1)[1]] for text in page.locator("#search-results td.mono").all_inner_texts()
                if text.startswith("GET ")]

    # Nothing typed: refused beside the field; then a word: the best matches first, three a page
    page.get_by_label("Words to find").fill("-- !!")
    page.get_by_role("button", name="Search").click()
    assert "give at least one word" in page.locator("#query-error").inner_text()
    page.get_by_label("Words to find").fill("weather")
    page.get_by_role("button", name="Search").click()
    first = shown()
    shot(page, "11-discovery-search")
    page.get_by_role("link", name="Next results").click()
    assert first + shown() == SEARCHES["weather"] and page.get_by_label("Words to find").input_value() == "weather"
    assert page.get_by_role("link", name="Next results").count() == 0
    page.get_by_label("Words to find").fill("xyzzy nonsense")
    page.get_by_role("button", name="Search").click()
    assert "Nothing in the catalog matches" in page.locator("#search-summary").inner_text()
