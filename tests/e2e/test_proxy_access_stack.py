"""Pay once, come back, on `paywarden up`: once-paid routes set with the CLI beside the running stack, paid and
entered again with the official x402 client, its Sign-In-With-X client extension and a Solana signer.

The stack's projection worker builds the paid-access read model; the proxy's gunicorn workers serve the grants.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from typing import Any

import pytest
import requests
from solana.rpc.api import Client
from solders.keypair import Keypair

from tests.e2e.test_stack import payer_keypair, usdc_balance
from tests.faults import wait_until
from tests.integration.test_proxy_access import decoded, sdk_get, signer_of

PRICE = 10_000


def cli(fresh_venv: Any, stack: Any, *argv: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    env["PAYWARDEN_DATA_DIR"] = str(stack.data_dir)
    done = subprocess.run([str(fresh_venv / "bin" / "paywarden"), *argv], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def signed_in(url: str, keypair: Keypair, **forged: str) -> str:
    """A SIGN-IN-WITH-X header for `url`'s fresh challenge, signed with the SDK (`forged`: fields changed first)."""
    from x402.extensions.sign_in_with_x import create_siwx_payload, encode_siwx_header

    unpaid = requests.get(url, timeout=30)
    assert unpaid.status_code == 402
    declared = decoded(unpaid.headers["PAYMENT-REQUIRED"])["extensions"]["sign-in-with-x"]
    chain = declared["supportedChains"][0]
    info = {**declared["info"], **forged, "chainId": chain["chainId"], "type": chain["type"]}
    return encode_siwx_header(asyncio.run(create_siwx_payload(info, signer_of(keypair), forged.get("uri", url))))


def entered(url: str, header: str) -> requests.Response:
    return requests.get(url, headers={"SIGN-IN-WITH-X": header}, timeout=30)


def reason(response: requests.Response) -> str:
    assert response.status_code == 402, response.text
    return str(decoded(response.headers["PAYMENT-REQUIRED"])["error"])


def raced(url: str, header: str, clients: int) -> list[int]:
    """The statuses, sorted, of `clients` requests sending one SIGN-IN-WITH-X header at the same moment."""
    answers: list[int] = []
    start = threading.Barrier(clients)

    def send() -> None:
        start.wait()
        answers.append(entered(url, header).status_code)

    threads = [threading.Thread(target=send) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(answers)


def granted_once_applied(url: str, keypair: Keypair) -> str:
    """The first header granted, once the projection worker has applied the payment (a sign-in before that is
    `siwx_not_paid` and consumes nothing)."""
    header: list[str] = []

    def grant() -> bool:
        header[:] = [signed_in(url, keypair)]
        answer = entered(url, header[0])
        assert answer.status_code == 200 or reason(answer).startswith("siwx_not_paid"), answer.text
        return answer.status_code == 200

    wait_until(grant, timeout=30, interval=0.2, what="the payment to reach the paid-access read model")
    return header[0]


@pytest.fixture(scope="module")
def routes(stack, fresh_venv) -> dict[str, str]:
    """A service of the sandbox merchant in front of the demo backend with two once-paid routes, and another with
    a 6-second pass: their gateway URLs."""
    [demo] = [s for s in cli(fresh_venv, stack, "service", "list", "--merchant", "sandbox")
              if s["name"] == "Demo weather"]
    port = demo["baseUrl"].rsplit(":", 1)[1]
    urls = {}
    for name, paths, period in (("Articles", ("/weather", "/stream"), ()), ("Day pass", ("/weather",),
                                                                             ("--access-seconds", "6"))):
        service = cli(fresh_venv, stack, "service", "create", "--merchant", "sandbox", "--name", name,
                      "--domain", "localhost", "--port", port)
        for path in paths:
            route = cli(fresh_venv, stack, "route", "add", "--merchant", "sandbox", "--service", service["id"],
                        "--path", path, "--price", str(PRICE), "--pay-to", stack["pay_to"], "--access", "once-paid",
                        *period)
            assert route["access"] == "once-paid"
            urls[f"{name}{path}"] = f"{stack['proxy_url']}/{service['slug']}{path}"
    return urls


def test_a_wallet_pays_once_and_comes_back_and_every_other_sign_in_is_asked_to_pay(stack, routes):
    url, other_route = routes["Articles/weather"], routes["Articles/stream"]
    rpc, payer = Client(stack["rpc_url"]), payer_keypair(stack)
    before = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"])

    paid = sdk_get(url, stack["rpc_url"], payer)
    assert paid.status_code == 200 and paid.json()["forecast"] == "sunny"
    assert decoded(paid.headers["PAYMENT-RESPONSE"])["success"] is True
    header = granted_once_applied(url, payer)
    back = sdk_get(url, stack["rpc_url"], payer)  # the SDK client signs in by itself
    assert back.status_code == 200 and back.json()["forecast"] == "sunny" and "PAYMENT-RESPONSE" not in back.headers
    assert back.json()["paid_by"] is None  # the backend got no payment hash: a grant, not a payment
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + PRICE  # one transfer in all

    assert reason(entered(url, signed_in(url, Keypair()))).startswith("siwx_not_paid")  # a wallet that never paid
    assert reason(entered(url, header)).startswith("siwx_nonce_used")  # replayed
    assert reason(entered(other_route, signed_in(url, payer))).startswith("siwx_other_resource")
    assert reason(entered(url, signed_in(url, payer, expirationTime="2020-01-01T00:00:00Z"))).startswith(
        "invalid_siwx_expired")
    elsewhere = url.replace("127.0.0.1", "paywarden.example")
    assert reason(entered(url, signed_in(url, payer, domain=elsewhere.split("/")[2], uri=elsewhere))).startswith(
        "invalid_siwx_domain_mismatch")
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + PRICE


def test_two_requests_racing_one_nonce_through_the_proxy_workers_are_granted_once(stack, routes):
    url = routes["Articles/weather"]
    payer = payer_keypair(stack)
    granted_once_applied(url, payer)  # paid by the test before, or by this one's retry of the grant
    for _ in range(3):
        assert raced(url, signed_in(url, payer), 4) == [200, 402, 402, 402]


def test_a_day_pass_asks_again_after_its_period(stack, routes):
    url = routes["Day pass/weather"]
    rpc, payer = Client(stack["rpc_url"]), payer_keypair(stack)
    before = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"])
    assert sdk_get(url, stack["rpc_url"], payer).status_code == 200
    paid_at = time.monotonic()
    granted_once_applied(url, payer)
    time.sleep(max(0.0, 6.3 - (time.monotonic() - paid_at)))
    assert reason(entered(url, signed_in(url, payer))).startswith("siwx_access_expired")
    again = sdk_get(url, stack["rpc_url"], payer)  # signs in, is refused, pays
    assert again.status_code == 200 and "PAYMENT-RESPONSE" in again.headers
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + 2 * PRICE
