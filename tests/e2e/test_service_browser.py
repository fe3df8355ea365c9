"""A merchant puts a plain backend behind the transparent proxy from the console, in a real browser (Playwright
driving Debian's Chromium); a client pays through the gateway URL with the x402 SDK; the merchant deactivates it.
Screenshots in tests/artifacts/console/."""

from __future__ import annotations

import requests

from interfaces.http.console.app import create_app as create_console
from interfaces.http.proxy.factory import create_app as create_proxy_app
from interfaces.sandbox.demo_backend import demo_backend
from interfaces.wiring import console_collaborators, proxy_collaborators
from tests.conftest import make_gateway
from tests.e2e.test_console_browser import browser, log_in, serve, shot  # noqa: F401 - the browser fixture
from tests.integration.console_helpers import add_owner
from tests.wsgi_thread import WsgiThread

EMAIL = "owner@acme.test"


def test_merchant_puts_a_backend_behind_the_proxy_a_client_pays_and_the_merchant_turns_it_off(
        tmp_path, sandbox, browser):  # noqa: F811
    from x402 import x402ClientSync
    from x402.http.clients import wrapRequestsWithPayment
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    from interfaces.sandbox.localnet import LocalnetThread

    with LocalnetThread(sandbox, slot_ms=None) as localnet, WsgiThread(demo_backend) as backend:
        gateway = make_gateway(tmp_path, sandbox, devnet_rpc_url=localnet.url)
        gateway.container.merchants.preverify_sandbox_domain("acme")  # the sandbox merchant: localhost is its
        add_owner(gateway.container, "acme", EMAIL)  # (and catches the console's read model up)
        console_url, console = serve(create_console(console_collaborators(gateway.container)))
        try:
            with WsgiThread(create_proxy_app(proxy_collaborators(gateway.container))) as proxy:
                page = browser.new_page()
                log_in(page, console_url)
                page.get_by_role("link", name="Services").click()
                page.get_by_label("Name", exact=True).fill("Weather")
                page.get_by_label("Port (sandbox localhost only)").fill(backend.url.rsplit(":", 1)[1])
                page.get_by_label("Domain", exact=True).select_option("localhost")
                page.get_by_role("button", name="Create service").click()
                page.wait_for_url("**/services/*?done=created")
                gateway_url = page.get_by_label("Gateway URL").input_value()
                assert gateway_url.endswith("/weather")  # the slug made from the name
                assert page.get_by_role("button", name="Copy").first.is_visible()  # JavaScript adds it
                shot(page, "10-service-created")
                # The services list shows the whole gateway URL (it was cut off by the table before).
                long = gateway.container.proxies.create_service("acme", "Weather forecasts by city and hour",
                                                                "localhost", port=int(backend.url.rsplit(":", 1)[1]))
                page.set_viewport_size({"width": 1024, "height": 768})  # a laptop's window
                page.get_by_role("navigation", name="Console").get_by_role("link", name="Services").click()
                assert page.get_by_label("Gateway URL of Weather", exact=True).input_value() == gateway_url
                listed = page.get_by_label(f"Gateway URL of {long.name}")
                assert listed.input_value().endswith("/weather-forecasts-by-city-and-hour")
                assert listed.evaluate("e => e.scrollWidth <= e.clientWidth"), "the gateway URL is cut off"
                shot(page, "10-services-list")
                page.get_by_role("link", name="Weather", exact=True).click()

                page.get_by_label("Path", exact=True).fill("/weather")
                page.get_by_label("Price (USDC)").fill("0.01")
                page.get_by_label("Pay to (wallet)").fill(str(gateway.pay_to.pubkey()))
                page.get_by_role("button", name="Add route").click()
                page.wait_for_url("**?done=route-added")
                shot(page, "11-route-added")

                # A client pays through the gateway URL (the proxy listens at its own address in this test)
                paid_url = gateway_url.replace(gateway_url.rsplit("/weather", 1)[0], proxy.url) + "/weather"
                client = x402ClientSync()
                client.register("solana:*", ExactSvmScheme(KeypairSigner(gateway.payer), rpc_url=localnet.url))
                before = sandbox.token_balance(str(gateway.pay_to.pubkey()), gateway.body()["paymentRequirements"][
                    "asset"])
                paid = wrapRequestsWithPayment(requests.Session(), client).get(paid_url, timeout=60)
                assert paid.status_code == 200 and paid.json()["forecast"] == "sunny"
                assert sandbox.token_balance(str(gateway.pay_to.pubkey()),
                                             gateway.body()["paymentRequirements"]["asset"]) == before + 10_000

                # The merchant turns the service off: the gateway answers 503
                page.get_by_role("button", name="Deactivate").click()
                page.wait_for_url("**?done=deactivated")
                shot(page, "12-service-inactive")
                assert requests.get(paid_url, timeout=30).status_code == 503
        finally:
            console.shutdown()
            gateway.container.close()
