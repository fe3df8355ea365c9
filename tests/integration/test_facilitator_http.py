"""The facilitator API over HTTP (Falcon's WSGI test client) on a real LiteSVM chain: every reason code,
reached by a real signed transaction or a real malformed body, with its status and body shape."""

from __future__ import annotations

import json

import falcon
import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from application.ports import ChainUnavailableError
from domain.codes import Code
from domain.exact import associated_token_address, decode_transaction
from domain.idempotency import payment_id
from domain.merchant import key_prefix
from domain.networks import DEVNET, MAINNET, KeyEnv, Programs
from interfaces.sandbox.exact_client import (
    compute_unit_limit_ix,
    compute_unit_price_ix,
    memo_ix,
    sign_as_client,
    to_base64,
    transfer_checked_ix,
)
from tests.conftest import CHAINS, EMBEDDED, STORES, USDC, Gateway, payment_key

AMOUNT = USDC // 100


def transfer(gateway: Gateway, *, authority: Keypair | None = None, amount: int = AMOUNT):
    authority = authority or gateway.payer
    source = associated_token_address(str(authority.pubkey()), DEVNET.usdc_mint, Programs.TOKEN)
    destination = associated_token_address(str(gateway.pay_to.pubkey()), DEVNET.usdc_mint, Programs.TOKEN)
    return transfer_checked_ix(Pubkey.from_string(source), Pubkey.from_string(DEVNET.usdc_mint),
                               Pubkey.from_string(destination), authority.pubkey(), amount)


def signed(gateway: Gateway, instructions, *, signers=None, fee_payer: str | None = None) -> str:
    tx = sign_as_client(instructions, fee_payer=Pubkey.from_string(fee_payer or gateway.fee_payer),
                        signers=signers or [gateway.payer], blockhash=gateway.blockhash())
    return to_base64(tx)


def verify(gateway: Gateway, body) -> tuple[int, dict]:
    result = gateway.post("/verify", body)
    return result.status_code, result.json


def settle(gateway: Gateway, body) -> tuple[int, dict]:
    result = gateway.post("/settle", body)
    return result.status_code, result.json


def test_a_valid_payment_is_approved_then_settled_moving_exactly_the_amount(gateway):
    payer, merchant = str(gateway.payer.pubkey()), str(gateway.pay_to.pubkey())
    before = gateway.sandbox.token_balance(payer), gateway.sandbox.token_balance(merchant)
    body = gateway.body()
    assert verify(gateway, body) == (200, {"isValid": True, "payer": payer})
    status, settled = settle(gateway, body)
    assert status == 200
    assert settled["success"] is True and settled["payer"] == payer and settled["network"] == DEVNET.caip2
    assert gateway.sandbox.transaction(settled["transaction"]) is not None
    assert gateway.sandbox.token_balance(payer) == before[0] - AMOUNT
    assert gateway.sandbox.token_balance(merchant) == before[1] + AMOUNT


def test_the_event_history_of_a_settled_payment_reads_received_approved_submitted_confirmed(gateway):
    body = gateway.body()
    verify(gateway, body)
    _, settled = settle(gateway, body)
    payments = gateway.container.payments
    events = list(payments.repository.event_store.get(_payment_id(gateway, body)))
    assert [type(e).__name__ for e in events] == ["Received", "Approved", "SettlementSubmitted", "Confirmed"]
    assert events[0].amount == AMOUNT and events[0].pay_to == str(gateway.pay_to.pubkey())
    assert events[1].payer == str(gateway.payer.pubkey()) and events[1].fee_payer == gateway.fee_payer
    assert events[2].signature == settled["transaction"] == events[3].signature


def key_of(gateway: Gateway, body) -> str:
    return payment_key(gateway.container, gateway.api_key, body)


def _payment_id(gateway: Gateway, body):
    return payment_id(key_of(gateway, body))


@STORES
def test_a_duplicate_after_a_terminal_result_is_replayed_unchanged(gateway):
    poor = Keypair()
    gateway.sandbox.mint_usdc(str(poor.pubkey()), 1)
    body = gateway.body(gateway.transaction(payer=poor))
    first = gateway.post("/verify", body)
    second = gateway.post("/v1/verify", body)
    assert first.status_code == second.status_code == 400
    assert first.json == second.json and second.headers.get("Idempotent-Replayed") == "true"
    assert "Idempotent-Replayed" not in first.headers
    failed = gateway.post("/settle", body)
    again = gateway.post("/v1/settle", body)
    assert failed.json == again.json and failed.json["errorReason"] == Code.SIMULATION_FAILED
    assert again.headers.get("Idempotent-Replayed") == "true"


@CHAINS
def test_simulation_failure_of_an_unfunded_payer_gives_the_last_five_logs(gateway):
    poor = Keypair()
    gateway.sandbox.mint_usdc(str(poor.pubkey()), 1)
    status, body = verify(gateway, gateway.body(gateway.transaction(payer=poor)))
    assert status == 400 and body["invalidReason"] == "simulation_failed" and body["payer"] == str(poor.pubkey())
    details = body["simulationDetails"]
    assert details["errorCode"] == "InstructionError" and details["error"]
    assert len(details["logs"]) == 5 and any("insufficient funds" in line.lower() for line in details["logs"])


@CHAINS
def test_a_merchant_without_a_usdc_account_gets_a_clear_reason_and_nothing_moves(gateway):
    nowhere = Keypair().pubkey()  # a wallet whose USDC account was never created
    status, body = verify(gateway, gateway.body(gateway.transaction(pay_to=nowhere), payTo=str(nowhere)))
    assert (status, body["invalidReason"]) == (400, "simulation_failed")
    assert body["simulationDetails"]["errorCode"] == "AccountNotFound"
    assert "does not exist" in body["simulationDetails"]["error"]


@EMBEDDED
@pytest.mark.parametrize("mutate, code", [
    (lambda b: b["paymentPayload"].update(x402Version=1), Code.INVALID_X402_VERSION),
    (lambda b: b.update(x402Version=3), Code.INVALID_X402_VERSION),
    (lambda b: b["paymentPayload"].pop("payload"), Code.INVALID_PAYLOAD),
    (lambda b: b["paymentPayload"]["payload"].update(transaction=12), Code.INVALID_PAYLOAD),
    (lambda b: b.pop("paymentPayload"), Code.INVALID_PAYLOAD),
    (lambda b: b.pop("paymentRequirements"), Code.INVALID_PAYMENT_REQUIREMENTS),
    (lambda b: b["paymentRequirements"].update(amount="1.5"), Code.INVALID_PAYMENT_REQUIREMENTS),
    (lambda b: b["paymentRequirements"].update(payTo="not-an-address"), Code.INVALID_PAYMENT_REQUIREMENTS),
    (lambda b: b["paymentRequirements"].update(network="solana"), Code.INVALID_NETWORK),
    (lambda b: b["paymentRequirements"].update(network="solana:unknownreference"), Code.INVALID_NETWORK),
    (lambda b: b["paymentRequirements"].update(scheme="upto"), Code.UNSUPPORTED_SCHEME),
    (lambda b: b["paymentRequirements"].update(asset=MAINNET.usdc_mint), Code.CAPABILITY_NOT_ENABLED),
    (lambda b: b["paymentPayload"]["payload"].update(transaction="not base64!"), Code.INVALID_TRANSACTION_FORMAT),
    (lambda b: b["paymentPayload"]["payload"].update(transaction="AAAA"), Code.INVALID_TRANSACTION_FORMAT),
])
@pytest.mark.parametrize("path", ["/verify", "/v1/settle"])
def test_malformed_requests_get_their_code_and_record_nothing(gateway, mutate, code, path):
    body = gateway.body()
    mutate(body)
    result = gateway.post(path, body)
    assert result.status_code == 400
    key = "invalidReason" if "verify" in path else "errorReason"
    assert result.json[key] == code
    assert result.json.get("isValid", result.json.get("success")) is False
    # x402 v2's message field names what is wrong, in words beyond the code.
    message = result.json["invalidMessage" if "verify" in path else "errorMessage"]
    assert message and message != code
    assert gateway.container.payments.recorder.max_notification_id() in (None, 0)


@EMBEDDED
def test_each_transaction_rule_has_its_code_over_http(gateway):
    g = gateway
    fee_payer = Keypair.from_seed(g.container.fee_payers._by_address[g.fee_payer].private_bytes_raw())
    other_mint = Keypair().pubkey()
    cases = {
        Code.AUTHORIZATION_VALUE: g.transaction(amount=AMOUNT + 1),
        Code.RECIPIENT_MISMATCH: g.transaction(pay_to=Keypair().pubkey()),
        Code.ASSET_MISMATCH: g.transaction(mint=other_mint),
        Code.INVALID_FEE_PAYER: g.transaction(fee_payer=Keypair().pubkey()),
        Code.PRIORITY_FEE_EXCEEDS_LIMIT: g.transaction(compute_unit_price=5_000_001),
        Code.MISSING_COMPUTE_BUDGET_LIMIT: signed(g, [compute_unit_price_ix(1), transfer(g), memo_ix(b"a")]),
        Code.MISSING_COMPUTE_BUDGET_PRICE: signed(g, [compute_unit_limit_ix(20_000), transfer(g), memo_ix(b"a")]),
        Code.INSTRUCTION_TOPOLOGY: signed(g, [compute_unit_limit_ix(20_000), compute_unit_price_ix(1),
                                              memo_ix(b"memo first"), transfer(g)]),
        Code.FACILITATOR_CANNOT_BE_PAYER: signed(g, [compute_unit_limit_ix(20_000), compute_unit_price_ix(1),
                                                     transfer(g, authority=fee_payer)], signers=[fee_payer]),
    }
    for code, transaction in cases.items():
        status, body = verify(g, g.body(transaction))
        assert (status, body["isValid"], body["invalidReason"]) == (400, False, code), code
        assert "simulationDetails" not in body
        assert body["invalidMessage"] and body["invalidMessage"] != code
    assert settle(g, g.body(g.transaction(amount=AMOUNT - 1)))[1]["errorReason"] == Code.AUTHORIZATION_VALUE


@EMBEDDED
def test_a_client_signature_that_does_not_verify_is_invalid_payload_before_the_chain_is_asked(gateway):
    """The exact inspection is the one check of a client's signature (the in-process chain's simulation trusts it,
    docs/performance.md): a forged or missing one is refused there, with its code, on verify and on settle."""
    g = gateway
    good = decode_transaction(g.transaction())
    forged = VersionedTransaction.populate(good.message, [good.signatures[0], Keypair().sign_message(b"other")])
    missing = VersionedTransaction.populate(good.message, [good.signatures[0], Signature.default()])
    chain = g.container.chains.by_network[DEVNET.caip2]
    simulate, asked = chain.simulate, []
    chain.simulate = lambda tx, **flags: asked.append(tx) or simulate(tx, **flags)
    for tx in (forged, missing):
        status, body = verify(g, g.body(to_base64(tx)))
        assert (status, body["isValid"], body["invalidReason"]) == (400, False, Code.INVALID_PAYLOAD)
        assert body["invalidMessage"] == "the payer's signature does not verify"
        status, body = settle(g, g.body(to_base64(tx)))
        assert (status, body["success"], body["errorReason"]) == (400, False, Code.INVALID_PAYLOAD)
    assert asked == []
    assert g.sandbox.token_balance(str(g.pay_to.pubkey())) == 0


@CHAINS
def test_a_transaction_whose_blockhash_expires_before_the_broadcast_is_submission_failed(gateway):
    chain = gateway.container.chains.by_network[DEVNET.caip2]
    send = chain.send

    def send_late(transaction: bytes, **flags: bool) -> str:
        gateway.sandbox.advance(200)  # the cluster moves on between simulation and broadcast
        return send(transaction, **flags)

    chain.send = send_late
    status, body = settle(gateway, gateway.body())
    assert (status, body["success"], body["errorReason"]) == (400, False, Code.SUBMISSION_FAILED)
    assert gateway.sandbox.token_balance(str(gateway.pay_to.pubkey())) == 0


@STORES
def test_a_concurrent_duplicate_gets_duplicate_request(gateway):
    """A settle finds the payment's lock held: `duplicate_request`. A verify takes no lock (the event store refuses
    a second insert of a payment, docs/facilitator.md): it is answered while the lock is held, and as recorded."""
    body = gateway.body()
    with gateway.container.payments._locks.hold(key_of(gateway, body), 30) as held:
        assert held
        status, refused = settle(gateway, body)
        assert (status, refused["success"], refused["errorReason"]) == (400, False, "duplicate_request")
        assert "in progress" in refused["errorMessage"]
        assert verify(gateway, body)[0] == 200
    status, again = verify(gateway, body)
    assert (status, again["isValid"]) == (200, True)


@STORES
@pytest.mark.parametrize("path, code", [("/verify", Code.UNEXPECTED_VERIFY_ERROR),
                                        ("/settle", Code.UNEXPECTED_SETTLE_ERROR)])
def test_a_chain_outage_is_a_500_with_the_unexpected_code_and_records_nothing(gateway, path, code):
    chain = gateway.container.chains.by_network[DEVNET.caip2]

    def down(_: bytes, **flags: bool):
        raise ChainUnavailableError("connection refused")

    chain.simulate = down
    result = gateway.post(path, gateway.body())
    assert result.status_code == 500
    assert code in result.json.values()
    assert gateway.container.payments.recorder.max_notification_id() in (None, 0)


@EMBEDDED
def test_oversized_and_non_json_bodies_are_413_and_415_in_the_endpoint_shape(gateway):
    huge = gateway.client.simulate_post("/verify", body=b"{" + b" " * (64 * 1024) + b"}", headers={
        **gateway.headers, "Content-Type": "application/json"})
    assert huge.status_code == 413 and huge.json == {"isValid": False, "invalidReason": "invalid_payload",
                                                     "invalidMessage": "the body exceeds 64 KB"}
    text = gateway.client.simulate_post("/settle", body=b"{}", headers={**gateway.headers,
                                                                        "Content-Type": "text/plain"})
    assert text.status_code == 415 and text.json["success"] is False
    assert text.json["errorReason"] == "invalid_payload" and "application/json" in text.json["errorMessage"]
    garbage = gateway.client.simulate_post("/verify", body=b"{not json", headers={
        **gateway.headers, "Content-Type": "application/json"})
    assert garbage.status_code == 400 and garbage.json["invalidReason"] == "invalid_payload"


@STORES
@pytest.mark.parametrize("authorization, code", [
    ("Bearer pw_test_" + "A" * 40, "invalid_api_key"),
    ("Bearer pw_test_short", "invalid_api_key"),
    ("Basic dXNlcjpwYXNz", "invalid_api_key"),
    ("Bearer sk_test_" + "A" * 40, "invalid_api_key"),
])
def test_unknown_or_malformed_keys_are_401(gateway, authorization, code):
    result = gateway.post("/verify", gateway.body(), headers={"Authorization": authorization})
    assert result.status_code == 401 and result.json["error"] == code and result.json["message"]


@STORES
def test_a_revoked_key_is_401_on_the_next_request_though_it_was_just_used(gateway):
    # The key was just looked up, so this process holds it in its key cache (interfaces/adapters/accounts_cache.py).
    assert gateway.client.simulate_get("/supported", headers=gateway.headers).status_code == 200
    gateway.container.merchants.revoke_key(key_prefix(gateway.api_key), "acme")
    result = gateway.post("/verify", gateway.body())
    assert result.status_code == 401 and result.json["error"] == "revoked_api_key"


@EMBEDDED
def test_a_test_key_is_refused_on_mainnet(gateway):
    gateway.container.chains.by_network[MAINNET.caip2] = gateway.container.chains.by_network[DEVNET.caip2]
    result = gateway.post("/verify", gateway.body(network=MAINNET.caip2, asset=MAINNET.usdc_mint))
    assert result.status_code == 401 and result.json["error"] == "key_environment_mismatch"


@STORES
def test_without_a_key_the_anonymous_identity_pays_when_enabled(gateway):
    result = gateway.post("/verify", gateway.body(), headers={})
    assert result.status_code == 200 and result.json["isValid"] is True


@STORES
def test_supported_lists_the_enabled_kinds_with_the_fee_payer(gateway):
    for path in ("/supported", "/v1/supported"):
        result = gateway.client.simulate_get(path, headers=gateway.headers)
        assert result.status_code == 200
        assert result.json == {
            "kinds": [{"x402Version": 2, "scheme": "exact", "network": DEVNET.caip2,
                       "extra": {"feePayer": gateway.fee_payer}}],
            "extensions": [],
            "signers": {"solana:*": [gateway.fee_payer]},
        }
    assert gateway.client.simulate_get("/supported", headers={"Authorization": "Bearer x"}).status_code == 401
    # `service` names one of the merchant's proxy services (docs/proxy.md); an unknown one is refused.
    unknown = gateway.client.simulate_get("/supported", headers=gateway.headers, params={"service": "s", "path": "/a"})
    assert unknown.status_code == 400 and unknown.json["error"] == "unknown_service"


@STORES
def test_the_101st_request_in_a_minute_for_one_key_is_429_and_other_keys_are_unaffected(gateway):
    for _ in range(100):
        assert gateway.client.simulate_get("/supported", headers=gateway.headers).status_code == 200
    limited = gateway.client.simulate_get("/v1/supported", headers=gateway.headers)
    assert limited.status_code == 429 and limited.json["error"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert gateway.post("/verify", gateway.body()).status_code == 429
    other, _ = gateway.container.merchants.create_key("acme", KeyEnv.TEST)
    gateway.container.merchants.register("globex")
    globex, _ = gateway.container.merchants.create_key("globex", KeyEnv.TEST)
    # The limit is per API key (docs/architecture.md#the-interface-contract): another key of acme has its own
    # budget, as globex's key does.
    assert gateway.client.simulate_get("/supported", headers={"Authorization": f"Bearer {other}"}).status_code == 200
    assert gateway.client.simulate_get("/supported", headers={"Authorization": f"Bearer {globex}"}).status_code == 200


@STORES
def test_an_operator_can_raise_one_merchants_limit(gateway):
    gateway.container.merchants.set_rate_limit("acme", 150)
    statuses = [gateway.client.simulate_get("/supported", headers=gateway.headers).status_code for _ in range(151)]
    assert statuses[:150] == [200] * 150 and statuses[150] == 429


@EMBEDDED
def test_answers_are_written_by_the_one_json_encoder(gateway):
    from interfaces.http.facilitator.app import JSON_ANSWERS

    assert gateway.client.app.resp_options.media_handlers[falcon.MEDIA_JSON] is JSON_ANSWERS
    answer = gateway.client.simulate_post("/verify", json=gateway.body(), headers=gateway.headers)
    assert answer.status_code == 200 and answer.text == json.dumps(answer.json, ensure_ascii=False)
