"""The proxy obeys the payment rules (issue 26): a response is delivered only with the payment's single success
answer, whichever door the payment came through first; the price follows the path the upstream receives; an
unsettled payment reaches the upstream a bounded number of times; nothing a client says becomes public or
privileged; the sandbox's localhost rule and the proxy's metrics are the operator's.

Each finding is tested on the embedded default and on PostgreSQL + Redis where the store takes part in it; the
HTTPS backend, the chain (LiteSVM behind the JSON-RPC localnet) and the x402 SDK client are real.
"""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
import requests
from solders.keypair import Keypair

from application.outcomes import FORWARD_LIMIT, FORWARDS_SPENT
from tests.integration import test_proxy
from tests.integration.test_proxy import PRICE, Stack, decoded, proxy_of
from tests.wsgi_thread import WsgiThread

# test_proxy's fixtures, the same stacks: `stack` (embedded) and `stack_on` (embedded, PostgreSQL + Redis)
stack, stack_on = test_proxy.stack, test_proxy.stack_on


def sign(stack: Stack, path: str, payer: Keypair, method: str = "GET") -> str:
    """A PAYMENT-SIGNATURE for `path` by `payer`, made by the official SDK client from the proxy's 402."""
    from x402 import x402ClientSync
    from x402.http import decode_payment_required_header, encode_payment_signature_header
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    unpaid = requests.request(method, stack.url(path), timeout=30)
    assert unpaid.status_code == 402
    client = x402ClientSync()
    client.register("solana:*", ExactSvmScheme(KeypairSigner(payer), rpc_url=stack.rpc_url))
    payload = client.create_payment_payload(decode_payment_required_header(unpaid.headers["PAYMENT-REQUIRED"]))
    return encode_payment_signature_header(payload)


def facilitator_body(signature: str) -> dict[str, Any]:
    """The body a merchant's own server sends `/verify` or `/settle` for the payment in a PAYMENT-SIGNATURE."""
    payload = json.loads(base64.b64decode(signature))
    return {"x402Version": 2, "paymentPayload": payload, "paymentRequirements": payload["accepted"]}


def get(stack: Stack, path: str, signature: str, **headers: str) -> requests.Response:
    return requests.get(stack.url(path), headers={"PAYMENT-SIGNATURE": signature, **headers}, timeout=60)


def paths_seen(stack: Stack) -> list[str]:
    return [r.path for r in stack.backend.received]


# -- 1 and 2: one success answer, one delivery, whichever door ---------------------------------------------------


def test_a_payment_whose_settle_failed_is_never_served_on_a_retry(stack_on):
    stack = stack_on
    stack.route("/weather/*")
    poor = Keypair()
    stack.gateway.sandbox.mint_usdc(str(poor.pubkey()), PRICE)  # funded for exactly one price
    first, second = sign(stack, "/weather/a", poor), sign(stack, "/weather/b", poor)
    verified = stack.gateway.post("/verify", facilitator_body(second), stack.gateway.headers)
    assert verified.json["isValid"] is True  # fundable on its own, while the funds are there

    assert get(stack, "/weather/a", first).status_code == 200  # the funds leave with the first payment
    failed = stack.gateway.post("/settle", facilitator_body(second), stack.gateway.headers)
    assert failed.json["success"] is False  # the second's settle fails: it is FAILED

    for _ in range(2):
        retry = get(stack, "/weather/b", second)
        assert retry.status_code == 402
        assert "PAYMENT-RESPONSE" not in retry.headers or decoded(retry.headers["PAYMENT-RESPONSE"])["success"] is False
    assert paths_seen(stack) == ["/weather/a"]
    assert stack.balance(poor.pubkey()) == 0


def test_a_payment_settled_through_the_merchants_own_settle_is_not_served_again_by_the_proxy(stack_on):
    stack = stack_on
    stack.route("/weather/*")
    signature = stack.signature("/weather/x")
    settled = stack.gateway.post("/settle", facilitator_body(signature), stack.gateway.headers)
    assert settled.json["success"] is True  # the merchant's own API took this payment and served it

    replay = get(stack, "/weather/x", signature)
    assert replay.status_code == 402
    assert json.loads(base64.b64decode(replay.headers["PAYMENT-REQUIRED"]))["error"] == "duplicate_settlement"
    assert paths_seen(stack) == []


def test_a_payment_served_by_the_proxy_is_a_duplicate_at_the_merchants_settle_and_on_another_route(stack_on):
    stack = stack_on
    stack.route("/weather/*")
    stack.route("/forecast/*")
    signature = stack.signature("/weather/x")
    assert get(stack, "/weather/x", signature).status_code == 200
    again = stack.gateway.post("/settle", facilitator_body(signature), stack.gateway.headers)
    assert again.json["success"] is False and again.json["errorReason"] == "duplicate_settlement"
    elsewhere = get(stack, "/forecast/x", signature)  # same price and payTo, another door
    assert elsewhere.status_code == 402
    assert paths_seen(stack) == ["/weather/x"]


@pytest.mark.parametrize("settle", ["before", "after"])
def test_the_same_signature_sent_at_once_is_delivered_once(stack_on, settle):
    stack = stack_on
    stack.route("/weather/*", settle=settle)
    before = stack.balance(stack.gateway.pay_to.pubkey())
    signature = stack.signature("/weather/x")
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: get(stack, "/weather/x", signature), range(6)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses.count(200) == 1, statuses
    assert set(statuses) == {200, 409}, statuses  # a duplicate in flight is 409, never a 402 inviting a payment
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before + PRICE
    if settle == "before":
        assert paths_seen(stack) == ["/weather/x"]  # charged first: the upstream runs once


# -- 3: the price follows the path the upstream receives -----------------------------------------------------------


def test_path_parameters_cannot_buy_an_expensive_path_at_a_cheap_routes_price(stack_on):
    stack = stack_on
    stack.proxies.add_route("acme", stack.service_id, method="GET", path="/cheap/*", price=1000,
                            pay_to=str(stack.gateway.pay_to.pubkey()))
    stack.proxies.add_route("acme", stack.service_id, method="GET", path="/premium", price=900_000,
                            pay_to=str(stack.gateway.pay_to.pubkey()))
    stack.route("/*")  # a catch-all at the cheap price
    for path in ("/cheap/..;/premium", "/premium;x=1", "/cheap/a;b/premium", "/premium%3Bx=1",
                 "/cheap/%2e%2e;/premium", "/cheap/..%3B/premium"):
        refused = requests.get(stack.url(path), timeout=30)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_path", path
        assert "PAYMENT-REQUIRED" not in refused.headers
    premium = requests.get(stack.url("/premium"), timeout=30)
    assert json.loads(base64.b64decode(premium.headers["PAYMENT-REQUIRED"]))["accepts"][0]["amount"] == "900000"
    assert paths_seen(stack) == []


# -- 4: an unsettled payment reaches the upstream a bounded number of times ---------------------------------------


def test_an_upstream_4xx_replay_reaches_the_upstream_at_most_the_forward_limit(stack_on):
    stack = stack_on
    stack.route("/status/*")
    before = stack.balance(stack.gateway.pay_to.pubkey())
    signature = stack.signature("/status/404")
    answers = [get(stack, "/status/404", signature) for _ in range(FORWARD_LIMIT + 2)]
    assert [a.status_code for a in answers] == [404] * FORWARD_LIMIT + [402, 402]
    assert json.loads(base64.b64decode(answers[-1].headers["PAYMENT-REQUIRED"]))["error"] == FORWARDS_SPENT
    assert len(stack.backend.received) == FORWARD_LIMIT
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before  # never charged


# -- 5: nothing the client says becomes public or privileged --------------------------------------------------------


def test_the_resource_url_comes_from_configuration_never_from_the_clients_host(stack_on):
    stack = stack_on
    stack.route("/weather/*", description="Weather", mime_type="application/json")
    forged = {"Host": "attacker-shop.com", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "attacker-shop.com"}
    unpaid = requests.get(stack.url("/weather/x"), headers=forged, timeout=30)
    url = json.loads(base64.b64decode(unpaid.headers["PAYMENT-REQUIRED"]))["resource"]["url"]
    assert url == stack.url("/weather/x")  # the listener's own address in a sandbox without PAYWARDEN_PROXY_URL

    container, app = proxy_of(stack, proxy_url="https://gateway.paywarden.test")
    try:
        with WsgiThread(app) as server:
            configured = requests.get(f"{server.url}/{stack.slug}/weather/x", headers=forged, timeout=30)
        url = json.loads(base64.b64decode(configured.headers["PAYMENT-REQUIRED"]))["resource"]["url"]
        assert url == f"https://gateway.paywarden.test/{stack.slug}/weather/x"
    finally:
        container.close()


def test_method_overrides_forwarding_headers_and_cookies_are_the_proxys_to_set(stack):
    stack.route("/cookie")
    forged = {"X-HTTP-Method-Override": "DELETE", "X-Method-Override": "DELETE", "X-Forwarded-For": "6.6.6.6",
              "Forwarded": "for=6.6.6.6", "X-Real-IP": "6.6.6.6", "Cookie": "console_session=stolen"}
    answer = get(stack, "/cookie", stack.signature("/cookie"), **forged)
    assert answer.status_code == 200
    seen = {k.lower(): v for k, v in stack.backend.received[-1].headers.items()}
    assert not {"x-http-method-override", "x-method-override", "x-real-ip", "cookie"} & seen.keys()
    assert seen["x-forwarded-for"] == "127.0.0.1"  # the proxy's peer, not what the client wrote
    assert seen["forwarded"].startswith("for=127.0.0.1;proto=http")
    assert "set-cookie" not in {k.lower() for k in answer.headers}
    assert [k for k in answer.raw.headers if k.lower() == "payment-response"] == ["PAYMENT-RESPONSE"]
    assert decoded(answer.headers["PAYMENT-RESPONSE"])["success"] is True  # ours, not the upstream's

    stack.proxies.set_pass_cookies("acme", stack.service_id, True)  # the merchant opts in
    opted = get(stack, "/cookie", stack.signature("/cookie"), Cookie="cart=1")
    assert stack.backend.received[-1].headers.get("Cookie") == "cart=1"
    assert opted.headers["Set-Cookie"].startswith("upstream_session=abc")


def test_a_trusted_proxys_forwarded_for_chain_is_kept_and_the_peer_appended(stack):
    stack.route("/echo")
    container, app = proxy_of(stack, trusted_proxies=("127.0.0.0/8",))
    try:
        with WsgiThread(app) as server:
            signature = stack.signature("/echo")
            answer = requests.get(f"{server.url}/{stack.slug}/echo", timeout=60,
                                  headers={"PAYMENT-SIGNATURE": signature, "X-Forwarded-For": "203.0.113.7"})
        assert answer.status_code == 200
        assert stack.backend.received[-1].headers["X-Forwarded-For"] == "203.0.113.7, 127.0.0.1"
    finally:
        container.close()


# -- 6: the sandbox's localhost and the proxy's metrics ------------------------------------------------------------


def test_a_localhost_service_on_paywardens_own_port_is_refused_at_request_time(stack_on):
    stack = stack_on
    stack.gateway.container.merchants.preverify_sandbox_domain("acme")  # the sandbox merchant: localhost is its
    service = stack.proxies.create_service("acme", "Local", "localhost", port=9177)
    stack.proxies.add_route("acme", str(service.id), method="GET", path="/*", price=PRICE,
                            pay_to=str(stack.gateway.pay_to.pubkey()))
    # Later the operator runs Paywarden's own API on that port: the service is no longer proxied.
    container, app = proxy_of(stack, own_ports=frozenset({9177}))
    try:
        with WsgiThread(app) as server:
            refused = requests.get(f"{server.url}/{service.slug}/metrics", timeout=30)
        assert refused.status_code == 503 and refused.json()["error"] == "domain_blocked"
        assert "own listeners" in refused.json()["message"]
    finally:
        container.close()


def test_the_proxys_metrics_are_for_the_operator_only(stack):
    metrics = f"{stack.proxy_url}/.well-known/paywarden/metrics"
    assert requests.get(metrics, timeout=30).status_code == 200  # a loopback peer, no proxy in front
    assert requests.get(metrics, headers={"X-Forwarded-For": "203.0.113.7"}, timeout=30).status_code == 404
    container, app = proxy_of(stack, proxy_metrics_token="s3cret-metrics-token-0123")
    try:
        with WsgiThread(app) as server:
            url = f"{server.url}/.well-known/paywarden/metrics"
            assert requests.get(url, timeout=30).status_code == 404
            assert requests.get(url, headers={"Authorization": "Bearer wrong"}, timeout=30).status_code == 404
            allowed = requests.get(url, headers={"Authorization": "Bearer s3cret-metrics-token-0123"}, timeout=30)
            assert allowed.status_code == 200 and "paywarden_proxy" in allowed.text
    finally:
        container.close()


def test_a_config_with_own_ports_lists_the_defaults_and_every_configured_listener():
    from interfaces.config import load_config

    config = load_config({"PAYWARDEN_BIND": "127.0.0.1:18402", "PAYWARDEN_PROXY_URL": "http://127.0.0.1:18405",
                          "PAYWARDEN_OWN_PORTS": "18404,18899"})
    assert {8402, 8404, 8405, 8899, 18402, 18404, 18405, 18899} <= config.own_ports
    assert replace(config, own_ports=frozenset()).own_ports == frozenset()
