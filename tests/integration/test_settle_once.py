"""Settled means settled once, over HTTP on a real LiteSVM chain: one paid answer per payment, one payment per
transaction, one payment per (payTo, memo), answers that say what is wrong, and `settlement_pending` as x402
clients read it. Run on the embedded default and on PostgreSQL + Redis (the `gateway` fixture's stores); the
pending settlement also through the JSON-RPC chain adapter."""

from __future__ import annotations

import pytest
from solders.keypair import Keypair

from domain.codes import Code
from domain.networks import DEVNET, KeyEnv
from interfaces.sandbox.exact_client import build_exact_payment, to_base64
from interfaces.sandbox.localnet import LocalnetThread
from tests.conftest import STORES, USDC, Gateway, make_gateway, payment_key
from tests.faults import RpcProxy

AMOUNT = USDC // 100


def settle(gateway: Gateway, body: dict, headers: dict[str, str] | None = None):
    return gateway.post("/settle", body, {**gateway.headers, **(headers or {})})


def balance(gateway: Gateway, keypair: Keypair) -> int:
    return gateway.sandbox.token_balance(str(keypair.pubkey()))


def claims(gateway: Gateway, kind: str) -> list:
    recorder = gateway.container.payments.recorder
    notifications = recorder.select_notifications(1, 10_000)
    events = [gateway.container.payments.mapper.to_domain_event(n) for n in notifications]
    return [e for e in events if type(e).__qualname__ == "Claim.Made" and e.kind == kind]


@STORES
def test_the_second_settle_is_a_duplicate_settlement_that_names_the_original_transaction(gateway):
    body = gateway.body()
    first = settle(gateway, body)
    assert first.status_code == 200 and first.json["success"] is True
    for path in ("/settle", "/v1/settle"):
        again = gateway.post(path, body)
        assert again.status_code == 400
        assert again.json["success"] is False and again.json["errorReason"] == Code.DUPLICATE_SETTLEMENT
        assert {k: again.json[k] for k in ("transaction", "network", "payer")} == {
            k: first.json[k] for k in ("transaction", "network", "payer")}
        assert first.json["transaction"] in again.json["errorMessage"]
        assert "Idempotent-Replayed" not in again.headers
    assert balance(gateway, gateway.pay_to) == AMOUNT


@STORES
def test_a_lost_answer_is_recovered_with_the_same_idempotency_key_and_only_with_it(gateway):
    body = gateway.body()
    first = settle(gateway, body, {"Idempotency-Key": "order-17"})
    replay = settle(gateway, body, {"Idempotency-Key": "order-17"})
    assert replay.status_code == 200 and replay.json == first.json
    assert replay.headers.get("Idempotent-Replayed") == "true" and "Idempotent-Replayed" not in first.headers
    other = settle(gateway, body, {"Idempotency-Key": "order-18"})
    assert (other.status_code, other.json["errorReason"]) == (400, Code.DUPLICATE_SETTLEMENT)
    # The key is recorded on the payment's events.
    payment = gateway.container.payments.get_payment(payment_key(gateway.container, gateway.api_key, body))
    events = list(gateway.container.payments.repository.event_store.get(payment.id))
    assert [getattr(e, "request_key", None) for e in events if type(e).__name__ == "Confirmed"] == ["order-17"]


@STORES
def test_an_idempotency_key_is_one_payment_and_must_be_printable(gateway):
    assert settle(gateway, gateway.body(), {"Idempotency-Key": "order-17"}).status_code == 200
    other = settle(gateway, gateway.body(), {"Idempotency-Key": "order-17"})
    assert (other.status_code, other.json["errorReason"]) == (400, Code.INVALID_PAYLOAD)
    assert "order-17" in other.json["errorMessage"]
    for bad in ("x" * 256, "tab\there", "caf\u00e9"):
        refused = settle(gateway, gateway.body(), {"Idempotency-Key": bad})
        assert (refused.status_code, refused.json["errorReason"]) == (400, Code.INVALID_PAYLOAD), bad
        assert "Idempotency-Key" in refused.json["errorMessage"]
    assert balance(gateway, gateway.pay_to) == AMOUNT


@STORES
def test_a_verify_after_the_settle_is_invalid_and_before_it_the_stored_approval(gateway):
    body = gateway.body()
    assert gateway.post("/verify", body).json == {"isValid": True, "payer": str(gateway.payer.pubkey())}
    replayed = gateway.post("/verify", body)
    assert replayed.status_code == 200 and replayed.headers.get("Idempotent-Replayed") == "true"
    assert settle(gateway, body).status_code == 200
    after = gateway.post("/verify", body)
    assert after.status_code == 400
    assert after.json["invalidReason"] == Code.DUPLICATE_SETTLEMENT and after.json["isValid"] is False


@STORES
def test_a_forged_twin_verified_first_does_not_change_the_genuine_payments_answer(gateway):
    genuine = gateway.body()
    from solders.transaction import VersionedTransaction

    from tests.conftest import decode

    real = VersionedTransaction.from_bytes(decode(genuine["paymentPayload"]["payload"]["transaction"]))
    forged = build_exact_payment(Keypair(), fee_payer=gateway.fee_payer, mint=DEVNET.usdc_mint,
                                 pay_to=gateway.pay_to.pubkey(), amount=AMOUNT, blockhash=gateway.blockhash())
    twin = VersionedTransaction.populate(forged.message, [forged.signatures[0], real.signatures[1]])
    refused = gateway.post("/verify", gateway.body(to_base64(twin)))
    assert (refused.status_code, refused.json["invalidReason"]) == (400, Code.INVALID_PAYLOAD)
    assert gateway.post("/verify", genuine).json["isValid"] is True
    assert settle(gateway, genuine).json["success"] is True


@STORES
def test_a_pay_to_and_memo_pair_settles_once_and_the_memo_must_match(gateway):
    def with_memo(memo: bytes, price: int = 1) -> dict:
        tx = build_exact_payment(gateway.payer, fee_payer=gateway.fee_payer, mint=DEVNET.usdc_mint,
                                 pay_to=gateway.pay_to.pubkey(), amount=AMOUNT, blockhash=gateway.blockhash(),
                                 memo=memo, compute_unit_price=price)
        return gateway.body(to_base64(tx), extra={"feePayer": gateway.fee_payer, "memo": "invoice-42"})

    mismatch = gateway.post("/verify", with_memo(b"invoice-43"))
    assert (mismatch.status_code, mismatch.json["invalidReason"]) == (400, Code.MEMO_MISMATCH)
    assert settle(gateway, with_memo(b"invoice-42")).json["success"] is True
    second = settle(gateway, with_memo(b"invoice-42", price=2))  # another transaction, the same invoice
    assert (second.status_code, second.json["errorReason"]) == (400, Code.DUPLICATE_SETTLEMENT)
    assert "memo" in second.json["errorMessage"]
    too_long = gateway.post("/verify", gateway.body(extra={"memo": "x" * 257}))
    assert (too_long.status_code, too_long.json["invalidReason"]) == (400, Code.INVALID_PAYMENT_REQUIREMENTS)
    assert "memo" in too_long.json["invalidMessage"]
    assert balance(gateway, gateway.pay_to) == AMOUNT


def test_settlement_pending_is_a_200_x402_clients_retry_and_the_retry_is_the_success(gateway):
    chain = gateway.container.chains.by_network[DEVNET.caip2]
    status = chain.signature_status
    from application.ports import Confirmation, SignatureStatus

    chain.signature_status = lambda signature: SignatureStatus(Confirmation.PENDING)
    payments = gateway.container.payments
    payments._settings = type(payments._settings)(confirmation_budget_seconds=0.2, confirmation_poll_seconds=0.05)
    body = gateway.body()
    pending = settle(gateway, body)
    assert pending.status_code == 200
    assert pending.json["success"] is False and pending.json["errorReason"] == Code.SETTLEMENT_PENDING
    assert pending.json["transaction"] and pending.json["network"] == DEVNET.caip2
    chain.signature_status = status
    retry = settle(gateway, body)
    assert (retry.status_code, retry.json["success"], retry.json["transaction"]) == (
        200, True, pending.json["transaction"])
    assert settle(gateway, body).json["errorReason"] == Code.DUPLICATE_SETTLEMENT
    assert balance(gateway, gateway.pay_to) == AMOUNT


@pytest.mark.parametrize("stores", ["embedded", "postgres+redis"])
def test_one_transaction_settles_one_payment_across_merchants_when_a_broadcast_is_lost(
        tmp_path, sandbox, stores, request):
    options = {} if stores == "embedded" else {"database_url": request.getfixturevalue("postgres_url"),
                                                 "redis_url": request.getfixturevalue("redis_url")}
    with LocalnetThread(sandbox, slot_ms=None) as localnet, RpcProxy(localnet.url) as rpc:
        gateway = make_gateway(tmp_path, sandbox, devnet_rpc_url=rpc.url, **options)
        try:
            merchants = gateway.container.merchants
            merchants.register("globex")
            merchants.enable_capability("globex", DEVNET.caip2)
            globex_key, _ = merchants.create_key("globex", KeyEnv.TEST)
            body = gateway.body()
            # Merchant A's broadcast is lost on the way (every attempt, retries included, until the network
            # heals): a server fault for A, nothing landed.
            rpc.drop["sendTransaction"] = 1_000
            lost = settle(gateway, body)
            assert lost.status_code == 500 and lost.json["errorReason"] == Code.UNEXPECTED_SETTLE_ERROR
            assert rpc.seen["sendTransaction"] >= 1 and balance(gateway, gateway.pay_to) == 0
            rpc.drop["sendTransaction"] = 0
            # Merchant B settles the very same client transaction: it is A's, B is refused.
            stolen = gateway.post("/settle", body, {"Authorization": f"Bearer {globex_key}"})
            assert (stolen.status_code, stolen.json["errorReason"]) == (400, Code.DUPLICATE_SETTLEMENT)
            # A's retry re-sends its own transaction: the one success, the one transfer.
            retry = settle(gateway, body)
            assert retry.status_code == 200 and retry.json["success"] is True
            assert balance(gateway, gateway.pay_to) == AMOUNT
            assert gateway.post("/settle", body, {"Authorization": f"Bearer {globex_key}"}).json[
                "errorReason"] == Code.DUPLICATE_SETTLEMENT
            assert len(claims(gateway, "transaction")) == 1
        finally:
            gateway.container.close()
