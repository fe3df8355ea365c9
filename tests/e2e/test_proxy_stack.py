"""`paywarden up --demo`: the plain demo backend behind the transparent proxy, paid with the x402 SDK client."""

from __future__ import annotations

import base64
import json
import re

import requests
from solana.rpc.api import Client

from tests.e2e.test_stack import PRICE, payer_keypair, usdc_balance


def test_up_names_the_proxy_and_the_demo_services_paid_gateway_url(stack):
    assert stack["proxy_url"].startswith("http://127.0.0.1:")
    assert stack["demo_proxy_url"].startswith(stack["proxy_url"] + "/")
    unpaid = requests.get(stack["demo_proxy_url"], timeout=30)
    assert unpaid.status_code == 402 and unpaid.headers["Cache-Control"] == "no-store"
    required = json.loads(base64.b64decode(unpaid.headers["PAYMENT-REQUIRED"]))
    assert required["resource"]["url"] == stack["demo_proxy_url"]
    assert required["accepts"][0]["amount"] == str(PRICE) and required["accepts"][0]["payTo"] == stack["pay_to"]


def test_the_sdk_client_pays_the_demo_backend_through_the_proxy_under_gunicorn(stack):
    from x402 import x402ClientSync
    from x402.http.clients import wrapRequestsWithPayment
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    rpc = Client(stack["rpc_url"])
    before = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"])
    client = x402ClientSync()
    client.register("solana:*", ExactSvmScheme(KeypairSigner(payer_keypair(stack)), rpc_url=stack["rpc_url"]))
    paid = wrapRequestsWithPayment(requests.Session(), client).get(stack["demo_proxy_url"], timeout=60)
    assert paid.status_code == 200 and paid.json()["forecast"] == "sunny"
    assert re.fullmatch(r"[0-9a-f]{64}", paid.json()["paid_by"])  # the backend saw X-Paywarden-Payment-Hash
    assert json.loads(base64.b64decode(paid.headers["PAYMENT-RESPONSE"]))["success"] is True
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + PRICE
    replay = requests.get(stack["demo_proxy_url"], timeout=30,
                          headers={"PAYMENT-SIGNATURE": paid.request.headers["PAYMENT-SIGNATURE"]})
    assert replay.status_code == 402
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + PRICE


def test_a_payment_the_demo_api_settled_is_not_served_again_through_the_proxy(stack):
    """One payment, two doors: the demo merchant API settles it through `/settle`; the same PAYMENT-SIGNATURE
    sent to the proxy (same price and payTo) is `duplicate_settlement`, and the backend never sees it."""
    from x402 import x402ClientSync
    from x402.http.clients import wrapRequestsWithPayment
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    rpc = Client(stack["rpc_url"])
    client = x402ClientSync()
    client.register("solana:*", ExactSvmScheme(KeypairSigner(payer_keypair(stack)), rpc_url=stack["rpc_url"]))
    paid = wrapRequestsWithPayment(requests.Session(), client).get(stack["demo_url"], timeout=60)
    assert paid.status_code == 200
    after_demo = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"])
    replay = requests.get(stack["demo_proxy_url"], timeout=30,
                          headers={"PAYMENT-SIGNATURE": paid.request.headers["PAYMENT-SIGNATURE"]})
    assert replay.status_code == 402
    assert json.loads(base64.b64decode(replay.headers["PAYMENT-REQUIRED"]))["error"] == "duplicate_settlement"
    assert "PAYMENT-RESPONSE" not in replay.headers
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == after_demo
