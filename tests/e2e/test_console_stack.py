"""`paywarden up` serves the merchant console beside the API, `up --json` gives its login, and a payment made
through the demo shows in the console's payments with its timeline (filled by the projection worker `up` runs)."""

from __future__ import annotations

import base64
import csv
import io
import json

import httpx
import requests


def test_up_prints_a_console_login_that_works_and_shows_the_sandbox_key(stack):
    console = stack["console_url"]
    assert console.startswith("http://127.0.0.1:")
    login = httpx.post(f"{console}/api/v1/session", timeout=30,
                       json={"email": stack["console_email"], "password": stack["console_password"]})
    assert login.status_code == 200, login.text
    cookies, csrf = login.cookies, login.json()["csrfToken"]
    me = httpx.get(f"{console}/api/v1/me", cookies=cookies, timeout=10).json()
    assert me["merchant"] == stack["merchant"] and me["email"] == stack["console_email"]
    keys = httpx.get(f"{console}/api/v1/keys", cookies=cookies, timeout=10).json()["keys"]
    assert stack["api_key"][:16] in {k["prefix"] for k in keys}
    assert stack["api_key"] not in str(keys)
    # localhost is pre-verified for the sandbox merchant, so a local backend can be proxied
    domains = httpx.get(f"{console}/api/v1/domains", cookies=cookies, timeout=10).json()["domains"]
    assert [(d["domain"], d["status"], d["method"]) for d in domains] == [("localhost", "verified", "sandbox")]
    # the pages are served too, and an unsafe request without the token is refused
    assert "Log in" in httpx.get(f"{console}/login", timeout=10).text
    refused = httpx.post(f"{console}/api/v1/keys", cookies=cookies, json={"env": "test"}, timeout=10)
    assert refused.status_code == 403
    created = httpx.post(f"{console}/api/v1/keys", cookies=cookies, json={"env": "test"}, timeout=10,
                         headers={"X-CSRF-Token": csrf})
    assert created.status_code == 201
    # the API answers on its own port, not the console's routes
    assert httpx.get(f"{stack['base_url']}/api/v1/me", timeout=10).status_code == 404
    supported = httpx.get(f"{stack['base_url']}/supported", timeout=10,
                          headers={"Authorization": f"Bearer {created.json()['key']}"})
    assert supported.status_code == 200


def test_a_payment_through_the_demo_shows_in_the_console_with_its_timeline(stack):
    # the x402 SDK client pays the example merchant API, which settles with the sandbox merchant's key
    from x402 import x402ClientSync
    from x402.http.clients import wrapRequestsWithPayment
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    from tests.e2e.test_stack import payer_keypair
    from tests.faults import wait_until

    client = x402ClientSync()
    client.register("solana:*", ExactSvmScheme(KeypairSigner(payer_keypair(stack)), rpc_url=stack["rpc_url"]))
    paid = wrapRequestsWithPayment(requests.Session(), client).get(stack["demo_url"], timeout=60)
    assert paid.status_code == 200, paid.text
    transaction = json.loads(base64.b64decode(paid.headers["PAYMENT-RESPONSE"]))["transaction"]
    console = stack["console_url"]
    cookies = httpx.post(f"{console}/api/v1/session", timeout=30, json={
        "email": stack["console_email"], "password": stack["console_password"]}).cookies

    # the projection worker `up` started fills the payments read model; the console lists it
    def settled() -> list[dict]:
        answer = httpx.get(f"{console}/api/v1/payments?state=CONFIRMED&limit=200", cookies=cookies, timeout=10)
        return [p for p in answer.json()["payments"] if p["transaction"] == transaction]

    wait_until(lambda: settled(), timeout=30, what="the settled payment in the console's list")
    [payment] = settled()
    assert payment["network"] == stack["network"] and payment["payer"] == stack["payer"]
    events = httpx.get(f"{console}/api/v1/payments/{payment['id']}", cookies=cookies, timeout=10).json()["events"]
    types = [e["type"] for e in events]
    assert types[0] == "Payment.Received" and types[-1] == "Payment.Confirmed", types
    page = httpx.get(f"{console}/payments/{payment['id']}", cookies=cookies, timeout=10)
    assert page.status_code == 200 and transaction in page.text and "Event timeline" in page.text
    # the books: the CSV export streams through gunicorn (chunked, no Content-Length) and holds the payment
    exported = httpx.get(f"{console}/api/v1/payments/export?state=CONFIRMED", cookies=cookies, timeout=30)
    assert exported.status_code == 200 and exported.headers["transfer-encoding"] == "chunked"
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [r["amount_atomic"] for r in rows if r["transaction"] == transaction] == [payment["amount"]]
