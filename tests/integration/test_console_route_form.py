"""The console's route form: discovery fields (what `route add --bazaar` takes) that reach the catalog when a client
pays through the proxy (the official x402 SDK client, a real HTTPS backend), refusals beside their field, and the
merchant's wallet as the default pay-to (its last route's, or the wallet `paywarden up` made for the sandbox
merchant); `route add` without `--pay-to` takes the same default."""

from __future__ import annotations

import html
import json
import re

import requests
from solders.keypair import Keypair

from interfaces.cli.main import main
from interfaces.runtime.workers import catch_up_all
from tests.integration.console_helpers import ApiClient, add_owner, console_client
from tests.integration.test_console_pages import log_in, post
from tests.integration.test_proxy import decoded, stack  # noqa: F401 - the proxy stack fixture

FORM = {"method": "GET", "path": "/weather/*", "price": "0.01", "discovery": "1", "discovery_title": "Forecasts",
        "discovery_description": "Tomorrow's weather, by city", "discovery_tags": "weather, Forecast",
        "provider_name": "Acme", "provider_url": "https://acme.example",
        "input_schema": '{"type": "object", "properties": {"city": {"type": "string"}}}'}


def pay_to_shown(page: str) -> str:
    return html.unescape(re.search(r'id="f-pay_to" name="pay_to" type="text" value="([^"]*)"', page).group(1))


def test_a_route_made_in_the_console_with_discovery_fields_is_listed_once_paid(stack):  # noqa: F811
    container = stack.gateway.container
    add_owner(container, "acme", "owner@acme.test")
    container.merchants.set_discovery("acme", True)
    client = console_client(container)
    cookie, csrf = log_in(client, "owner@acme.test")
    page = f"/services/{stack.service_id}"
    assert pay_to_shown(client.simulate_get(page, cookies={"pw_console_session": cookie}).text) == ""  # no wallet yet

    wallet = str(stack.gateway.pay_to.pubkey())
    added = post(client, f"{page}/routes", {**FORM, "csrf_token": csrf, "pay_to": wallet}, cookie)
    assert added.status_code == 303, added.text
    route = next(iter(container.proxies.get_service("acme", stack.service_id).routes.values()))
    assert route.bazaar == {"title": "Forecasts", "description": "Tomorrow's weather, by city",
                            "tags": ["weather", "Forecast"], "provider": {"name": "Acme", "url": "https://acme.example"},
                            "input": {"type": "http", "schema": json.loads(FORM["input_schema"])}}
    # The next route starts with the wallet the merchant uses.
    assert pay_to_shown(client.simulate_get(page, cookies={"pw_console_session": cookie}).text) == wallet

    offered = decoded(requests.get(stack.url("/weather/today"), timeout=30).headers["PAYMENT-REQUIRED"])
    assert offered["extensions"]["bazaar"]["info"]["title"] == "Forecasts"
    assert stack.paying_session().get(stack.url("/weather/today"), timeout=60).status_code == 200
    catch_up_all(container)
    api = ApiClient(client)
    assert api.login("owner@acme.test").status_code == 200
    listings = api.request("GET", "/listings").json["listings"]
    assert len(listings) == 1 and "Forecasts" in json.dumps(listings), listings


def test_a_route_form_the_catalog_would_refuse_is_shown_again_with_the_error_beside_its_field(stack):  # noqa: F811
    container = stack.gateway.container
    add_owner(container, "acme", "owner@acme.test")
    client = console_client(container)
    cookie, csrf = log_in(client, "owner@acme.test")
    wallet = str(Keypair().pubkey())
    for field, value in (("discovery_tags", "a,b;c"), ("provider_url", "ftp://acme.example"),
                         ("input_schema", "{not json"), ("output_schema", "[1, 2]")):
        refused = post(client, f"/services/{stack.service_id}/routes",
                       {**FORM, field: value, "csrf_token": csrf, "pay_to": wallet}, cookie)
        assert refused.status_code == 400 and f'id="e-{field}"' in refused.text, (field, refused.text[-2000:])
        assert 'name="discovery" value="1" checked' in refused.text  # what was typed stays
    assert container.proxies.get_service("acme", stack.service_id).routes == {}


def test_the_sandbox_merchant_starts_with_the_wallet_up_made_and_the_cli_takes_the_default(tmp_path, sandbox,
                                                                                           monkeypatch, capsys):
    from interfaces.adapters.signers import sandbox_keypair
    from interfaces.config import load_config
    from interfaces.container import build

    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL", "PAYWARDEN_MODE",
                 "PAYWARDEN_PROXY_URL", "PAYWARDEN_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    wallet = str(sandbox_keypair(tmp_path / "merchant-wallet.json").pubkey())  # as `up` makes it
    assert main(["merchant", "create", "sandbox"]) == 0
    assert main(["merchant", "create", "acme"]) == 0
    container = build(load_config())
    try:
        container.merchants.preverify_sandbox_domain("sandbox")
        container.merchants.preverify_sandbox_domain("acme")
    finally:
        container.close()
    capsys.readouterr()
    for merchant in ("sandbox", "acme"):
        assert main(["service", "create", "--merchant", merchant, "--name", "Quotes", "--domain", "localhost",
                     "--port", "9999"]) == 0
    capsys.readouterr()
    assert main(["route", "add", "--merchant", "sandbox", "--service", "quotes", "--path", "/q",
                 "--price", "10000"]) == 0
    assert json.loads(capsys.readouterr().out)["payTo"] == wallet
    # Another merchant has no wallet yet: --pay-to is asked for, in words.
    assert main(["route", "add", "--merchant", "acme", "--service", "quotes-2", "--path", "/q", "--price", "1"]) == 2
    assert "--pay-to" in capsys.readouterr().err
    other = str(Keypair().pubkey())
    assert main(["route", "add", "--merchant", "acme", "--service", "quotes-2", "--path", "/q", "--price", "1",
                 "--pay-to", other]) == 0
    capsys.readouterr()
    assert main(["route", "add", "--merchant", "acme", "--service", "quotes-2", "--path", "/r", "--price", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["payTo"] == other  # its last route's wallet

    container = build(load_config())
    try:
        from interfaces.wiring import console_collaborators

        add_owner(container, "sandbox", "owner@sandbox.test")
        client = console_client(container)
        cookie, _ = log_in(client, "owner@sandbox.test")
        service = container.proxies.get_service("sandbox", "quotes")
        container.proxies.remove_route("sandbox", str(service.id), next(iter(service.routes)))
        assert console_collaborators(container).sandbox_wallet == wallet
        page = client.simulate_get(f"/services/{service.id}", cookies={"pw_console_session": cookie}).text
        assert pay_to_shown(page) == wallet
    finally:
        container.close()
