"""The official x402 SDK's facilitator client (the one its merchant middleware uses) talks to the Paywarden API
in-process over a real LiteSVM chain: it parses `/supported` (signers as CAIP family → array of addresses),
sends the API key through its `create_headers` hook, verifies and settles a real payment, and its resource
server's one automatic retry on `settlement_pending` gets the success."""

from __future__ import annotations

import json

import httpx
import pytest
from solders.keypair import Keypair
from x402 import PaymentPayload, PaymentRequirements
from x402.http import HTTPFacilitatorClientSync
from x402.http.facilitator_client_base import CreateHeadersAuthProvider, FacilitatorConfig

from domain.networks import DEVNET, KeyEnv
from interfaces.adapters.signers import write_keypair
from tests.conftest import USDC, Gateway, make_gateway


@pytest.fixture
def gateway(tmp_path, sandbox):
    """The embedded default: the wire shapes do not depend on the stores."""
    gateway = make_gateway(tmp_path, sandbox)
    yield gateway
    gateway.container.close()


def sdk_facilitator(gateway: Gateway, api_key: str | None = None, on_response=None) -> HTTPFacilitatorClientSync:
    key = api_key or gateway.api_key

    def create_headers() -> dict[str, dict[str, str]]:
        auth = {"Authorization": f"Bearer {key}"}
        return {"verify": auth, "settle": auth, "supported": auth}

    http = httpx.Client(transport=httpx.WSGITransport(app=gateway.client.app), base_url="http://paywarden",
                        event_hooks={"response": [on_response] if on_response else []})
    return HTTPFacilitatorClientSync(FacilitatorConfig(url="http://paywarden", http_client=http,
                                                       auth_provider=CreateHeadersAuthProvider(create_headers)))


def test_the_sdk_facilitator_client_parses_supported_with_signers_by_caip_family(gateway):
    supported = sdk_facilitator(gateway).get_supported()
    assert supported.signers == {"solana:*": [gateway.fee_payer]}
    assert [(k.x402_version, k.scheme, k.network, k.extra) for k in supported.kinds] == [
        (2, "exact", DEVNET.caip2, {"feePayer": gateway.fee_payer})]


def test_every_fee_payer_is_listed_once_under_its_family(tmp_path, sandbox):
    paths = []
    for name in ("a", "b"):
        paths.append(tmp_path / f"{name}.json")
        write_keypair(paths[-1], Keypair())
    gateway = make_gateway(tmp_path, sandbox, fee_payer_keypairs=tuple(paths))
    answer = gateway.client.simulate_get("/supported", headers=gateway.headers).json
    assert answer["signers"] == {"solana:*": list(gateway.container.fee_payers.addresses())}
    assert len(answer["signers"]["solana:*"]) == 2
    assert sdk_facilitator(gateway).get_supported().signers == answer["signers"]
    gateway.container.close()


def test_a_client_with_no_capability_gets_no_kinds_and_no_signers(gateway):
    gateway.container.merchants.register("globex")
    key, _ = gateway.container.merchants.create_key("globex", KeyEnv.TEST)
    supported = sdk_facilitator(gateway, key).get_supported()
    assert (supported.kinds, supported.signers) == ([], {})


def test_the_sdk_facilitator_client_verifies_and_settles_a_payment_with_the_key_from_create_headers(gateway):
    body = json.loads(json.dumps(gateway.body()))
    payload = PaymentPayload.model_validate({**body["paymentPayload"], "accepted": body["paymentRequirements"]})
    requirements = PaymentRequirements.model_validate(body["paymentRequirements"])
    payer, merchant = str(gateway.payer.pubkey()), str(gateway.pay_to.pubkey())
    before = gateway.sandbox.token_balance(payer), gateway.sandbox.token_balance(merchant)
    client = sdk_facilitator(gateway)
    verified = client.verify(payload, requirements)
    assert (verified.is_valid, verified.payer) == (True, payer)
    settled = client.settle(payload, requirements)
    assert (settled.success, settled.network, settled.payer) == (True, DEVNET.caip2, payer)
    assert gateway.sandbox.transaction(settled.transaction) is not None
    assert gateway.sandbox.token_balance(payer) == before[0] - USDC // 100
    assert gateway.sandbox.token_balance(merchant) == before[1] + USDC // 100


def test_the_sdk_resource_servers_one_retry_on_settlement_pending_gets_the_success(gateway):
    from x402 import x402ResourceServerSync
    from x402.mechanisms.svm.exact import ExactSvmServerScheme

    from application.ports import Confirmation, SignatureStatus

    chain = gateway.container.chains.by_network[DEVNET.caip2]
    real_status = chain.signature_status
    chain.signature_status = lambda signature: SignatureStatus(Confirmation.PENDING)
    payments = gateway.container.payments
    payments._settings = type(payments._settings)(confirmation_budget_seconds=0.2, confirmation_poll_seconds=0.05)
    answers: list[dict] = []

    def on_response(response: httpx.Response) -> None:
        if response.request.url.path == "/settle":
            answers.append({"status": response.status_code, **json.loads(response.read())})
            chain.signature_status = real_status  # the transaction is seen confirmed from now on

    server = x402ResourceServerSync(sdk_facilitator(gateway, on_response=on_response))
    server.register("solana:*", ExactSvmServerScheme())
    server.initialize()
    body = gateway.body()
    payload = PaymentPayload.model_validate({**body["paymentPayload"], "accepted": body["paymentRequirements"]})
    requirements = PaymentRequirements.model_validate(body["paymentRequirements"])
    payer, merchant = str(gateway.payer.pubkey()), str(gateway.pay_to.pubkey())
    before = gateway.sandbox.token_balance(payer), gateway.sandbox.token_balance(merchant)
    result = server.settle_payment(payload, requirements)
    assert [(a["status"], a["success"], a.get("errorReason")) for a in answers] == [
        (200, False, "settlement_pending"), (200, True, None)]
    assert answers[0]["transaction"] == answers[1]["transaction"]
    assert (result.success, result.transaction, result.payer) == (True, answers[0]["transaction"], payer)
    assert gateway.sandbox.token_balance(payer) == before[0] - USDC // 100
    assert gateway.sandbox.token_balance(merchant) == before[1] + USDC // 100
