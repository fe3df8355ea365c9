"""Merchants built only with the official x402 Python SDK's server side (Flask and FastAPI middleware, its HTTP
facilitator client pointed at Paywarden with the API key from its `create_headers` hook), paid by the SDK's own
client through a running `paywarden up --demo` stack on its JSON-RPC localnet: 402 with PAYMENT-REQUIRED, then 200
with a PAYMENT-RESPONSE whose transaction is confirmed on the chain, and exactly the price moved."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
import requests
from solana.rpc.api import Client
from solders.signature import Signature

from tests.e2e.conftest import ROOT, start_stack
from tests.e2e.test_stack import confirmed_events, payer_keypair, usdc_balance
from tests.faults import free_port

PRICE = 10_000  # "$0.01" in devnet USDC's 6 decimals, as the SDK's server converts it


@pytest.fixture(scope="module")
def stack(fresh_venv, tmp_path_factory):
    """A stack of its own: test_stack.py stops the session's."""
    stack = start_stack(fresh_venv / "bin" / "paywarden", tmp_path_factory.mktemp("merchants-stack"))
    yield stack
    if stack.process.poll() is None:
        stack.stop()


@dataclass
class Merchant:
    process: subprocess.Popen
    url: str


def start_merchant(framework: str, stack) -> Merchant:
    port = free_port()
    argv = [sys.executable, "-m", "tests.e2e.x402_merchants", framework, str(port), stack["base_url"],
            stack["api_key"], stack["network"], stack["pay_to"]]
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the {framework} merchant exited with {process.returncode}: {process.stderr.read()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return Merchant(process, f"http://127.0.0.1:{port}/weather")
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    pytest.fail(f"the {framework} merchant did not answer within 60 s")


@pytest.fixture(scope="module", params=["flask", "fastapi"])
def merchant(request, stack) -> Iterator[Merchant]:
    merchant = start_merchant(request.param, stack)
    yield merchant
    merchant.process.terminate()
    merchant.process.wait(timeout=30)


def sdk_client_scheme(stack):
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    return ExactSvmScheme(KeypairSigner(payer_keypair(stack)), rpc_url=stack["rpc_url"])


def pay_with_requests(stack, url: str) -> requests.Response:
    from x402 import x402ClientSync
    from x402.http.clients import wrapRequestsWithPayment

    client = x402ClientSync()
    client.register("solana:*", sdk_client_scheme(stack))
    return wrapRequestsWithPayment(requests.Session(), client).get(url, timeout=120)


def pay_with_httpx(stack, url: str) -> httpx.Response:
    from x402 import x402Client
    from x402.http.clients import wrapHttpxWithPayment

    async def pay() -> httpx.Response:
        client = x402Client()
        client.register("solana:*", sdk_client_scheme(stack))
        async with wrapHttpxWithPayment(client, timeout=120) as http:
            return await http.get(url)

    return asyncio.run(pay())


class Balances:
    def __init__(self, stack) -> None:
        self._stack, self._rpc = stack, Client(stack["rpc_url"])

    def __call__(self) -> tuple[int, int]:
        mint = self._stack["usdc_mint"]
        return usdc_balance(self._rpc, self._stack["pay_to"], mint), usdc_balance(self._rpc, self._stack["payer"], mint)

    def confirmed(self, signature: str) -> bool:
        status = self._rpc.get_signature_statuses([Signature.from_string(signature)]).value[0]
        return status is not None and status.err is None and str(status.confirmation_status).endswith("Confirmed")


def decode(header: str) -> dict:
    return json.loads(base64.b64decode(header))


def assert_requires_the_price(stack, response) -> None:
    assert response.status_code == 402
    accepts = decode(response.headers["PAYMENT-REQUIRED"])["accepts"]
    assert [(a["scheme"], a["network"], a["amount"], a["asset"], a["payTo"]) for a in accepts] == [
        ("exact", stack["network"], str(PRICE), stack["usdc_mint"], stack["pay_to"])]
    assert accepts[0]["extra"]["feePayer"] in stack["fee_payers"]


def assert_paid_once(stack, balances: Balances, paid, before: tuple[int, int]) -> dict:
    assert paid.status_code == 200, (paid.status_code, paid.headers, paid.text)
    assert paid.json() == {"city": "Lisbon", "forecast": "sunny"}
    receipt = decode(paid.headers["PAYMENT-RESPONSE"])
    assert receipt["success"] is True and receipt["network"] == stack["network"] and receipt["payer"] == stack["payer"]
    assert balances.confirmed(receipt["transaction"])
    assert balances() == (before[0] + PRICE, before[1] - PRICE)
    return receipt


def test_an_sdk_merchant_answers_402_with_payment_required_naming_paywardens_fee_payer(stack, merchant):
    assert_requires_the_price(stack, requests.get(merchant.url, timeout=30))


def test_the_sdk_client_pays_an_sdk_merchant_through_paywarden_moving_exactly_the_price(stack, merchant):
    balances = Balances(stack)
    before = balances()
    assert_paid_once(stack, balances, pay_with_requests(stack, merchant.url), before)


def test_the_sdk_async_client_pays_an_sdk_merchant_through_paywarden_moving_exactly_the_price(stack, merchant):
    balances = Balances(stack)
    before = balances()
    assert_paid_once(stack, balances, pay_with_httpx(stack, merchant.url), before)


def test_a_payment_signature_replayed_at_an_sdk_merchant_is_not_served_a_second_time(stack, merchant):
    balances = Balances(stack)
    before = balances()
    paid = pay_with_requests(stack, merchant.url)
    assert_paid_once(stack, balances, paid, before)
    replay = requests.get(merchant.url, headers={"PAYMENT-SIGNATURE": paid.request.headers["PAYMENT-SIGNATURE"]},
                          timeout=60)
    assert replay.status_code == 402, (replay.status_code, replay.text)
    assert "duplicate_settlement" in decode(replay.headers["PAYMENT-REQUIRED"])["error"]
    assert balances() == (before[0] + PRICE, before[1] - PRICE)


def test_a_payment_signature_replayed_4_times_at_the_example_merchant_gets_one_200_and_one_transfer(stack):
    balances = Balances(stack)
    before, confirmed_before = balances(), confirmed_events(stack)
    paid = pay_with_requests(stack, stack["demo_url"])
    assert paid.status_code == 200 and paid.json()["forecast"] == "sunny"
    receipt = decode(paid.headers["PAYMENT-RESPONSE"])
    assert receipt["success"] is True and balances.confirmed(receipt["transaction"])
    headers = {"PAYMENT-SIGNATURE": paid.request.headers["PAYMENT-SIGNATURE"]}
    with ThreadPoolExecutor(max_workers=4) as pool:
        replays = list(pool.map(lambda _: requests.get(stack["demo_url"], headers=headers, timeout=60), range(4)))
    assert [r.status_code for r in replays] == [402] * 4, [r.text for r in replays]
    assert all("PAYMENT-RESPONSE" not in r.headers for r in replays)
    assert balances() == (before[0] + PRICE, before[1] - PRICE)
    assert confirmed_events(stack) == confirmed_before + 1


def payment_signature(stack, url: str) -> str:
    """A PAYMENT-SIGNATURE header made by the SDK's client for `url`'s 402, not yet sent."""
    from x402 import x402ClientSync
    from x402.http import x402HTTPClientSync

    client = x402ClientSync()
    client.register("solana:*", sdk_client_scheme(stack))
    http = x402HTTPClientSync(client)
    unpaid = requests.get(url, timeout=30)
    required = http.get_payment_required_response(unpaid.headers.get, unpaid.json())
    return http.encode_payment_signature_header(client.create_payment_payload(required))["PAYMENT-SIGNATURE"]


def test_one_payment_signature_sent_4_times_at_once_to_an_sdk_merchant_is_served_once(stack, merchant):
    balances = Balances(stack)
    before = balances()
    headers = {"PAYMENT-SIGNATURE": payment_signature(stack, merchant.url)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda _: requests.get(merchant.url, headers=headers, timeout=60), range(4)))
    assert sorted(a.status_code for a in answers) == [200, 402, 402, 402], [a.text for a in answers]
    refused = [a for a in answers if a.status_code == 402]
    # Refused at verify (PAYMENT-REQUIRED) or at settle (the SDK's PAYMENT-RESPONSE saying it did not settle).
    assert all("PAYMENT-REQUIRED" in a.headers or decode(a.headers["PAYMENT-RESPONSE"])["success"] is False
               for a in refused)
    assert_paid_once(stack, balances, next(a for a in answers if a.status_code == 200), before)
