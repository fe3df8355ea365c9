"""Keys scoped to a proxy service: created only for one of the merchant's services (console API, pages, CLI),
accepted by the facilitator API only for the terms one of that service's routes charges, refused once the
service is deleted. On the embedded default and on PostgreSQL with Redis, over a real sandbox chain.
"""

from __future__ import annotations

from typing import Any

import pytest
from solders.keypair import Keypair

from domain.merchant import key_hash
from domain.networks import DEVNET, KeyEnv
from interfaces.cli.main import main
from interfaces.config import load_config
from interfaces.container import build
from tests.conftest import USDC, Gateway, payment_key
from tests.integration.console_helpers import ApiClient, add_owner, console_client

PRICE = USDC // 100
STORES = pytest.mark.parametrize("store", ["embedded", "postgres+redis"], indirect=True)
EMBEDDED = pytest.mark.parametrize("store", ["embedded"], indirect=True)


def weather_service(gateway: Gateway, name: str = "Weather", port: int = 8080) -> Any:
    """A sandbox service (`http://localhost:<port>`) charging PRICE for GET /weather/*."""
    proxies = gateway.container.proxies
    gateway.container.merchants.preverify_sandbox_domain("acme")  # acme is the sandbox merchant here
    service = proxies.create_service("acme", name, "localhost", port=port)
    proxies.add_route("acme", str(service.id), method="GET", path="/weather/*", price=PRICE,
                      pay_to=str(gateway.pay_to.pubkey()))
    return service


def scoped_key(gateway: Gateway, service_ref: str) -> dict[str, str]:
    api_key, _ = gateway.container.merchants.create_key("acme", KeyEnv.TEST, service=service_ref)
    return {"Authorization": f"Bearer {api_key}"}


def with_resource(body: dict, url: str, method: str | None = None) -> dict:
    body["paymentPayload"]["resource"] = {"url": url}
    if method is not None:
        body["paymentPayload"]["extensions"] = {"bazaar": {"info": {"input": {"type": "http", "method": method}}}}
    return body


@STORES
def test_a_scoped_key_verifies_and_settles_only_what_its_services_routes_charge(gateway):
    service = weather_service(gateway)
    headers = scoped_key(gateway, service.slug)  # given by slug, recorded by id
    record = gateway.container.accounts.get_key(key_hash(headers["Authorization"].split()[1]))
    assert record.service == str(service.id)

    assert gateway.post("/verify", gateway.body(), headers).json["isValid"] is True
    assert gateway.post("/verify", with_resource(gateway.body(), "http://localhost:8080/weather/today", "GET"),
                        headers).json["isValid"] is True
    other = Keypair()
    gateway.sandbox.mint_usdc(str(other.pubkey()), 0)
    outside = {
        "another amount": gateway.body(amount=2 * PRICE),
        "another payTo": gateway.body(gateway.transaction(pay_to=other.pubkey()), payTo=str(other.pubkey())),
        "an unrouted resource": with_resource(gateway.body(), "http://localhost:8080/admin/users"),
        "another method": with_resource(gateway.body(), "http://localhost:8080/weather/today", "POST"),
    }
    for case, body in outside.items():
        refused = gateway.post("/verify", body, headers)
        assert refused.status_code == 400, case
        assert refused.json["isValid"] is False and refused.json["invalidReason"] == "invalid_payment_requirements"
        assert f"scoped to the service {service.slug}" in refused.json["invalidMessage"], case
    # the merchant's unscoped key may pay those terms: the refusal is the scope's
    assert gateway.post("/verify", outside["another amount"], gateway.headers).json["isValid"] is True

    # A settle outside the scope records nothing and moves nothing.
    before = gateway.sandbox.token_balance(str(gateway.pay_to.pubkey()), DEVNET.usdc_mint)
    body = outside["an unrouted resource"]
    refused = gateway.post("/settle", body, headers)
    assert refused.status_code == 400
    assert refused.json["success"] is False and refused.json["errorReason"] == "invalid_payment_requirements"
    assert gateway.container.payments.get_payment(
        payment_key(gateway.container, headers["Authorization"].split()[1], body)) is None
    settled = gateway.post("/settle", with_resource(gateway.body(), "http://localhost:8080/weather/x"), headers)
    assert settled.status_code == 200 and settled.json["success"] is True
    assert gateway.sandbox.token_balance(str(gateway.pay_to.pubkey()), DEVNET.usdc_mint) == before + PRICE


@STORES
def test_supported_answers_only_the_scoped_services_kinds(gateway):
    weather = weather_service(gateway)
    empty = gateway.container.proxies.create_service("acme", "Empty", "localhost", port=8081)
    weather_key, empty_key = scoped_key(gateway, str(weather.id)), scoped_key(gateway, str(empty.id))

    def networks(headers: dict[str, str], **params: str) -> list[str]:
        answer = gateway.client.simulate_get("/supported", params=params, headers=headers)
        assert answer.status_code == 200, answer.json
        return [k["network"] for k in answer.json["kinds"]]

    assert networks(gateway.headers) == [DEVNET.caip2]
    assert networks(weather_key) == [DEVNET.caip2]
    assert networks(empty_key) == []  # its service has no route yet: nothing to pay for
    assert networks(weather_key, service=weather.slug, path="/weather/today") == [DEVNET.caip2]
    # a scoped key asks about its own service only
    refused = gateway.client.simulate_get("/supported", params={"service": weather.slug}, headers=empty_key)
    assert refused.status_code == 400 and refused.json["error"] == "unknown_service"
    assert f"scoped to {empty.slug}" in refused.json["message"]


@STORES
def test_a_key_whose_service_is_deleted_is_refused(gateway):
    service = weather_service(gateway)
    headers = scoped_key(gateway, str(service.id))
    assert gateway.post("/verify", gateway.body(), headers).status_code == 200

    proxies = gateway.container.proxies
    for route in list(proxies.get_service("acme", str(service.id)).routes):
        proxies.remove_route("acme", str(service.id), route)
    proxies.delete_service("acme", str(service.id))

    for answer in (gateway.post("/verify", gateway.body(), headers), gateway.post("/settle", gateway.body(), headers),
                   gateway.client.simulate_get("/supported", headers=headers)):
        assert answer.status_code == 401
        assert answer.json["error"] == "service_deleted"
        assert "create a new key" in answer.json["message"]
    assert gateway.post("/verify", gateway.body(), gateway.headers).status_code == 200  # unscoped keys unaffected


@EMBEDDED
def test_a_key_can_only_be_scoped_to_one_of_the_merchants_own_services(gateway):
    container = gateway.container
    add_owner(container, "acme", "owner@acme.test")
    add_owner(container, "beta", "owner@beta.test")
    container.merchants.preverify_sandbox_domain("beta")
    theirs = container.proxies.create_service("beta", "Theirs", "localhost", port=8090)
    ours = weather_service(gateway)
    acme = ApiClient(console_client(container))
    assert acme.login("owner@acme.test").status_code == 200

    for ref in ("forecast", str(theirs.id), theirs.slug, "00000000-0000-0000-0000-000000000000"):
        refused = acme.request("POST", "/keys", json={"env": "test", "service": ref})
        assert refused.status_code == 400, ref
        assert refused.json["error"] == "invalid_request" and refused.json["field"] == "service"
        assert "is not one of your proxy services" in refused.json["message"]
    created = acme.request("POST", "/keys", json={"env": "test", "label": "shop", "service": ours.slug})
    assert created.status_code == 201 and created.json["service"] == str(ours.id)

    # the page offers the merchant's own services only, and refuses another id beside the field
    page = acme.client.simulate_get("/keys", cookies={"pw_console_session": acme.session})
    assert f'value="{ours.id}"' in page.text and str(theirs.id) not in page.text
    assert f"Weather ({ours.slug})" in page.text
    form = acme.client.simulate_post(
        "/keys", body=f"csrf_token={acme.csrf}&env=test&service={theirs.id}",
        headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://falconframework.org"},
        cookies={"pw_console_session": acme.session})
    assert form.status_code == 400
    assert 'id="e-service"' in form.text and "is not one of your proxy services" in form.text


def test_the_cli_scopes_a_key_by_id_or_slug_and_refuses_an_unknown_service(tmp_path, monkeypatch, capsys):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    assert main(["merchant", "create", "acme"]) == 0
    container = build(load_config())
    container.merchants.preverify_sandbox_domain("acme")
    service = container.proxies.create_service("acme", "Weather", "localhost", port=8080)
    container.close()
    capsys.readouterr()

    assert main(["key", "create", "--merchant", "acme", "--env", "test", "--service", "nowhere"]) == 2
    assert "'nowhere' is not one of your proxy services" in capsys.readouterr().err
    assert main(["key", "create", "--merchant", "acme", "--env", "test", "--service", service.slug]) == 0
    api_key = capsys.readouterr().out.strip().splitlines()[-1]
    container = build(load_config())
    try:
        assert container.accounts.get_key(key_hash(api_key)).service == str(service.id)
    finally:
        container.close()
    assert main(["key", "list", "--merchant", "acme"]) == 0
    assert str(service.id) in capsys.readouterr().out
