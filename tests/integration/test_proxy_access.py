"""Pay once, come back: a once-paid route through the proxy, with the official x402 SDK's Sign-In-With-X client
extension and a Solana signer, on the sandbox chain; and the x402 payment-identifier extension.

Each case runs on the embedded default and on PostgreSQL with Redis. The in-process stack runs no projection
worker: the paid-access read model is brought level with the Payments log (`catch_up_all`) where a worker would.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from typing import Any

import httpx
import pytest
import requests
from solders.keypair import Keypair

from domain.access import grant_id
from interfaces.config import Config
from interfaces.container import build
from interfaces.http.proxy.factory import create_app as create_proxy_app
from interfaces.runtime.workers import catch_up_all
from interfaces.wiring import proxy_collaborators
from tests.https_backend import MapResolver
from tests.integration.test_proxy import HOSTNAMES, PRICE, running_stack
from tests.wsgi_thread import WsgiThread


@pytest.fixture(params=["embedded", "postgres+redis"])
def stack_on(request, tmp_path, sandbox):
    store = {} if request.param == "embedded" else {"database_url": request.getfixturevalue("postgres_url"),
                                                    "redis_url": request.getfixturevalue("redis_url")}
    with running_stack(tmp_path, sandbox, **store) as running:
        running.store = store
        yield running


def decoded(header: str) -> dict[str, Any]:
    return json.loads(base64.b64decode(header))


def signer_of(keypair: Keypair) -> Any:
    from x402.mechanisms.svm.signers import KeypairSigner

    return KeypairSigner(keypair)


def sdk_get(url: str, rpc_url: str, keypair: Keypair) -> httpx.Response:
    """GET with the official async x402 client: its Solana `exact` scheme and its SIWX client extension."""
    from x402 import x402Client
    from x402.extensions.sign_in_with_x import CreateSIWxClientExtensionOptions, create_siwx_client_extension
    from x402.http.clients import x402HttpxClient
    from x402.mechanisms.svm.exact import ExactSvmScheme

    async def run() -> httpx.Response:
        client = x402Client()
        client.register("solana:*", ExactSvmScheme(signer_of(keypair), rpc_url=rpc_url))
        client.register_extension(create_siwx_client_extension(
            CreateSIWxClientExtensionOptions(signers=[signer_of(keypair)])))
        async with x402HttpxClient(client, timeout=60) as http:
            response = await http.get(url)
            await response.aread()
            return response

    return asyncio.run(run())


def sign_in(stack: Any, path: str, keypair: Keypair, **forged: str) -> str:
    """A SIGN-IN-WITH-X header for the challenge of `path`'s 402, signed with the SDK (`forged`: info fields
    changed before signing)."""
    from x402.extensions.sign_in_with_x import create_siwx_payload, encode_siwx_header

    url = stack.url(path)
    unpaid = requests.get(url, timeout=30)
    assert unpaid.status_code == 402
    declared = decoded(unpaid.headers["PAYMENT-REQUIRED"])["extensions"]["sign-in-with-x"]
    chain = declared["supportedChains"][0]
    info = {**declared["info"], **forged, "chainId": chain["chainId"], "type": chain["type"]}
    bound_to = forged.get("uri", url)
    return encode_siwx_header(asyncio.run(create_siwx_payload(info, signer_of(keypair), bound_to)))


def refused_with(response: requests.Response) -> str:
    assert response.status_code == 402, response.text
    return str(decoded(response.headers["PAYMENT-REQUIRED"])["error"])


def merchant_balance(stack: Any) -> int:
    return stack.balance(stack.gateway.pay_to.pubkey())


def test_a_once_paid_route_declares_the_sdks_challenge_bound_to_the_gateway_and_the_resource(stack_on):
    stack = stack_on
    stack.route("/articles/*", access="once-paid")
    stack.route("/weather")
    unpaid = requests.get(stack.url("/articles/one"), timeout=30)
    required = decoded(unpaid.headers["PAYMENT-REQUIRED"])
    assert unpaid.json() == required
    siwx = required["extensions"]["sign-in-with-x"]
    host = stack.proxy_url.removeprefix("http://")
    assert siwx["info"]["domain"] == host and siwx["info"]["uri"] == stack.url("/articles/one")
    assert siwx["supportedChains"] == [{"chainId": required["accepts"][0]["network"], "type": "ed25519"}]
    assert {"nonce", "issuedAt", "expirationTime"} <= set(siwx["info"])
    again = decoded(requests.get(stack.url("/articles/one"), timeout=30).headers["PAYMENT-REQUIRED"])
    assert again["extensions"]["sign-in-with-x"]["info"]["nonce"] != siwx["info"]["nonce"]  # fresh each time
    assert required["extensions"]["payment-identifier"]["info"] == {"required": False}
    per_request = decoded(requests.get(stack.url("/weather"), timeout=30).headers["PAYMENT-REQUIRED"])
    assert set(per_request["extensions"]) == {"payment-identifier"}  # no sign-in on a per-request route


def test_pay_once_then_come_back_signed_in_and_every_refusal_is_a_402_with_its_reason(stack_on):
    stack = stack_on
    container = stack.gateway.container
    stack.route("/articles/*", access="once-paid")
    stack.route("/reports/*", access="once-paid")
    payer, stranger = stack.gateway.payer, Keypair()
    before = merchant_balance(stack)

    # The SDK client signs in first (refused: never paid), then pays: one transfer.
    paid = sdk_get(stack.url("/articles/one"), stack.rpc_url, payer)
    assert paid.status_code == 200 and decoded(paid.headers["PAYMENT-RESPONSE"])["success"] is True
    assert merchant_balance(stack) == before + PRICE
    catch_up_all(container, ["paid_access"])  # what the projection worker does

    # Back again: the SDK client signs in and gets the resource without paying.
    seen = len(stack.backend.received)
    again = sdk_get(stack.url("/articles/one"), stack.rpc_url, payer)
    assert again.status_code == 200 and "PAYMENT-RESPONSE" not in again.headers
    assert merchant_balance(stack) == before + PRICE  # one transfer in all
    [forwarded] = stack.seen(seen)
    lowered = {k.lower(): v for k, v in forwarded.headers.items()}
    assert lowered["x-paywarden-signed-in"] == str(payer.pubkey())
    assert "x-paywarden-payment-hash" not in lowered and "sign-in-with-x" not in lowered

    # Every grant is an event of its own, named by its nonce.
    header = sign_in(stack, "/articles/one", payer)
    assert requests.get(stack.url("/articles/one"), headers={"SIGN-IN-WITH-X": header}, timeout=30).status_code == 200
    nonce = json.loads(base64.b64decode(header))["nonce"]
    grant = container.access.get_grant(grant_id(nonce))
    assert grant is not None and grant.address == str(payer.pubkey())

    # Replayed, for another route, never paid, expired, another domain, malformed: the ordinary 402, a reason.
    def refusal(header: str, path: str = "/articles/one") -> str:
        return refused_with(requests.get(stack.url(path), headers={"SIGN-IN-WITH-X": header}, timeout=30))

    assert refusal(header).startswith("siwx_nonce_used")
    assert refusal(sign_in(stack, "/articles/one", payer), "/reports/q3").startswith("siwx_other_resource")
    assert refusal(sign_in(stack, "/reports/q3", payer), "/reports/q3").startswith("siwx_not_paid")
    assert refusal(sign_in(stack, "/articles/one", stranger)).startswith("siwx_not_paid")
    assert refusal(sign_in(stack, "/articles/one", payer, expirationTime="2020-01-01T00:00:00Z")).startswith(
        "invalid_siwx_expired")
    elsewhere = stack.url("/articles/one").replace("127.", "10.", 1)
    other = sign_in(stack, "/articles/one", payer, domain=elsewhere.split("/")[2], uri=elsewhere)
    assert refusal(other).startswith("invalid_siwx_domain_mismatch")
    assert refusal("not base64 !").startswith("siwx_malformed")
    assert refusal(base64.b64encode(b'{"domain": 1}').decode()).startswith("siwx_malformed")
    assert merchant_balance(stack) == before + PRICE


def test_a_day_pass_asks_again_after_its_period(stack_on):
    stack = stack_on
    stack.route("/daily/*", access="once-paid", access_seconds=3)
    payer = stack.gateway.payer
    before = merchant_balance(stack)
    assert sdk_get(stack.url("/daily/news"), stack.rpc_url, payer).status_code == 200
    paid_at = time.monotonic()
    catch_up_all(stack.gateway.container, ["paid_access"])
    header = sign_in(stack, "/daily/news", payer)
    assert requests.get(stack.url("/daily/news"), headers={"SIGN-IN-WITH-X": header}, timeout=30).status_code == 200
    time.sleep(max(0.0, 3.2 - (time.monotonic() - paid_at)))
    late = sign_in(stack, "/daily/news", payer)
    assert refused_with(requests.get(stack.url("/daily/news"), headers={"SIGN-IN-WITH-X": late},
                                     timeout=30)).startswith("siwx_access_expired")
    assert sdk_get(stack.url("/daily/news"), stack.rpc_url, payer).status_code == 200  # the SDK client pays again
    assert merchant_balance(stack) == before + 2 * PRICE


def test_two_workers_racing_one_nonce_let_it_in_once(stack_on):
    """Two proxy apps, each with its own container (its own connections, locks and caches) on one store, as two
    workers or two hosts have: the same SIGN-IN-WITH-X sent to both at once is granted by one only."""
    stack = stack_on
    stack.route("/articles/*", access="once-paid")
    payer = stack.gateway.payer
    assert sdk_get(stack.url("/articles/one"), stack.rpc_url, payer).status_code == 200
    catch_up_all(stack.gateway.container, ["paid_access"])
    host = stack.backend.server.server_address[0]
    second = build(Config(data_dir=stack.gateway.container.config.data_dir, **stack.store),
                   sandbox=stack.gateway.sandbox)
    try:
        app = create_proxy_app(proxy_collaborators(
            second, resolver=MapResolver({name: [host] for name in HOSTNAMES}),
            ssl_context=stack.backend.client_context()))
        with WsgiThread(app) as other:
            for _ in range(3):
                header = sign_in(stack, "/articles/one", payer)
                answers: list[int] = []
                start = threading.Barrier(2)

                def send(base: str, header: str = header, answers: list[int] = answers,
                         start: threading.Barrier = start) -> None:
                    start.wait()
                    answers.append(requests.get(f"{base}/{stack.slug}/articles/one",
                                                headers={"SIGN-IN-WITH-X": header}, timeout=30).status_code)

                threads = [threading.Thread(target=send, args=(base,)) for base in (stack.proxy_url, other.url)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                assert sorted(answers) == [200, 402]
    finally:
        second.close()


def test_a_payment_id_gets_one_delivery_then_its_recorded_outcome_and_another_payment_is_refused(stack_on):
    """The x402 payment-identifier extension, with the SDK's client helper: the same id and payment, served
    once and then answered its recorded settlement (never charged twice); the same id with another payment
    refused."""
    from x402 import x402ClientSync
    from x402.extensions.payment_identifier import append_payment_identifier_to_extensions, generate_payment_id
    from x402.http import decode_payment_required_header, encode_payment_signature_header
    from x402.mechanisms.svm.exact import ExactSvmScheme

    stack = stack_on
    stack.route("/weather")
    before, seen = merchant_balance(stack), len(stack.backend.received)

    def signed(identifier: str) -> str:
        unpaid = requests.get(stack.url("/weather"), timeout=30)
        required = decode_payment_required_header(unpaid.headers["PAYMENT-REQUIRED"])
        client = x402ClientSync()
        client.register("solana:*", ExactSvmScheme(signer_of(stack.gateway.payer), rpc_url=stack.rpc_url))
        payload = client.create_payment_payload(required)
        extensions = dict(required.extensions or {})
        append_payment_identifier_to_extensions(extensions, identifier)
        return encode_payment_signature_header(payload.model_copy(update={"extensions": extensions}))

    identifier = generate_payment_id()
    first_header = signed(identifier)
    first = requests.get(stack.url("/weather"), headers={"PAYMENT-SIGNATURE": first_header}, timeout=60)
    assert first.status_code == 200
    receipt = decoded(first.headers["PAYMENT-RESPONSE"])
    assert merchant_balance(stack) == before + PRICE and len(stack.seen(seen)) == 1

    # The same id, the same payment: the recorded outcome, not a second delivery, not a 402.
    again = requests.get(stack.url("/weather"), headers={"PAYMENT-SIGNATURE": first_header}, timeout=60)
    assert again.status_code == 409 and again.json()["error"] == "payment_already_served"
    assert decoded(again.headers["PAYMENT-RESPONSE"]) == receipt
    assert len(stack.seen(seen)) == 1 and merchant_balance(stack) == before + PRICE

    # The same id with another payment: refused, nothing recorded nor charged.
    other = signed(identifier)
    reused = requests.get(stack.url("/weather"), headers={"PAYMENT-SIGNATURE": other}, timeout=60)
    assert reused.status_code == 409 and reused.json()["error"] == "payment_identifier_reused"
    assert len(stack.seen(seen)) == 1 and merchant_balance(stack) == before + PRICE

    # A malformed id is the ordinary 402 with its reason; a payment without an id is unaffected.
    bad = json.loads(base64.b64decode(signed(generate_payment_id())))
    bad["extensions"]["payment-identifier"]["info"]["id"] = "short"
    refused = requests.get(stack.url("/weather"), timeout=60,
                           headers={"PAYMENT-SIGNATURE": base64.b64encode(json.dumps(bad).encode()).decode()})
    assert refused_with(refused).startswith("payment-identifier")


def test_the_paid_access_read_model_is_rebuilt_and_compared_by_audit_rebuild_check(stack_on, monkeypatch, capsys):
    from interfaces.cli.main import main

    stack = stack_on
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(stack.gateway.container.config.data_dir))
    for name, value in stack.store.items():
        monkeypatch.setenv(f"PAYWARDEN_{name.upper()}", value)
    stack.route("/articles/*", access="once-paid")
    assert sdk_get(stack.url("/articles/one"), stack.rpc_url, stack.gateway.payer).status_code == 200
    catch_up_all(stack.gateway.container, ["paid_access"])
    view = stack.gateway.container.paid_access
    [row] = view.rows("SELECT payer, service_id, route_id FROM paid_access_payments WHERE route_id IS NOT NULL")
    assert row[:2] == [str(stack.gateway.payer.pubkey()), stack.service_id]
    assert main(["audit", "rebuild", "--check"]) == 0
    rebuilt = capsys.readouterr().out.splitlines()
    assert any(line.startswith("paid_access: ") and line.endswith("; equal") for line in rebuilt), rebuilt

    # A second source of truth would drift unseen; a row changed by hand is reported.
    with view.datastore.transaction(commit=True) as c:
        c.execute(view.sql("UPDATE paid_access_payments SET confirmed_at = ?"), ("2099-01-01T00:00:00.000000Z",))
    assert main(["audit", "rebuild", "--check"]) == 1
    reported = capsys.readouterr()
    assert "paid_access_payments: row" in reported.out + reported.err
