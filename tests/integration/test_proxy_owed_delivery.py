"""A paid client is never left without its response or the truth (issue 38): a delivery that failed after the
charge is owed to a retry with the same PAYMENT-SIGNATURE, never charged again and never served twice; a
`settle: after` answer is charged only once it arrived whole; a body the proxy cannot decode is refused before
anything is paid; a paid proxied request enters `Payments` once.

On the embedded default and on PostgreSQL + Redis; the HTTPS backend, the chain (LiteSVM behind the JSON-RPC
localnet) and the x402 SDK client are real.
"""

from __future__ import annotations

import http.client
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from application.ports import ChainUnavailableError
from domain.networks import DEVNET
from tests.integration import test_proxy
from tests.integration.test_proxy import PRICE, HeldConfirmations, Stack, decoded

stack, stack_on = test_proxy.stack, test_proxy.stack_on


def get(stack: Stack, path: str, signature: str) -> requests.Response:
    return requests.get(stack.url(path), headers={"PAYMENT-SIGNATURE": signature}, timeout=60)


def events_of(stack: Stack) -> list[str]:
    """The class names of the events of the payment the backend saw last, once its delivery is recorded (a
    streamed answer is recorded delivered when it ended, just after its last byte went out)."""
    key = stack.backend.received[-1].headers["X-Paywarden-Payment-Hash"]
    deadline = time.monotonic() + 5
    while True:
        payment = stack.gateway.container.payments.get_payment(key)
        assert payment is not None
        if payment.delivered or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    recorded = stack.gateway.container.payments.repository.event_store.get(payment.id)
    return [type(e).__name__ for e in recorded]


def assert_owed(failed: requests.Response) -> str:
    """A 502 that says the payment was taken and how to get the response; the transaction it names."""
    assert failed.status_code == 502, failed.text
    receipt = decoded(failed.headers["PAYMENT-RESPONSE"])
    assert receipt["success"] is True and receipt["transaction"]
    body = failed.json()
    assert body["error"] == "upstream_error" and body["transaction"] == receipt["transaction"]
    assert "payment was taken" in body["message"] and "same PAYMENT-SIGNATURE" in body["message"]
    assert body["attemptsLeft"] == 2
    return str(receipt["transaction"])


def test_a_settle_before_delivery_whose_backend_failed_is_owed_to_the_retry_once(stack_on):
    stack = stack_on
    stack.route("/orders", settle="before")
    stack.backend.failing["/orders"] = 1
    before = stack.balance(stack.gateway.pay_to.pubkey())
    signature = stack.signature("/orders")

    transaction = assert_owed(get(stack, "/orders", signature))
    served = get(stack, "/orders", signature)  # the backend has recovered
    assert served.status_code == 200 and served.json()["path"] == "/orders"
    assert decoded(served.headers["PAYMENT-RESPONSE"]) == {"success": True, "transaction": transaction,
                                                           "network": DEVNET.caip2,
                                                           "payer": str(stack.gateway.payer.pubkey())}
    assert events_of(stack)[-3:] == ["Confirmed", "DeliveryFailed", "Delivered"]
    again = get(stack, "/orders", signature)
    assert again.status_code == 402  # delivered: never served again
    assert decoded(again.headers["PAYMENT-REQUIRED"])["error"] == "duplicate_settlement"
    assert len(stack.backend.received) == 2
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before + PRICE  # one transfer


def test_a_settle_after_delivery_that_failed_after_a_202_is_owed_to_the_retry(stack_on):
    stack = stack_on
    stack.route("/weather/*")
    chains = stack.gateway.container.chains.by_network
    chain = chains[DEVNET.caip2] = HeldConfirmations(chains[DEVNET.caip2])
    before = stack.balance(stack.gateway.pay_to.pubkey())
    signature = stack.signature("/weather/x")

    assert get(stack, "/weather/x", signature).status_code == 202
    chain.held = False
    stack.backend.failing["/weather/x"] = 1
    transaction = assert_owed(get(stack, "/weather/x", signature))  # settled by this retry, then the backend failed
    served = get(stack, "/weather/x", signature)
    assert served.status_code == 200
    assert decoded(served.headers["PAYMENT-RESPONSE"])["transaction"] == transaction
    assert get(stack, "/weather/x", signature).status_code == 402
    assert len(stack.backend.received) == 3  # the answer held back by the 202, the failure, the delivery
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before + PRICE
    assert events_of(stack)[-2:] == ["DeliveryFailed", "Delivered"]


def test_an_owed_delivery_is_attempted_three_times_at_most(stack):
    stack.route("/orders", settle="before")
    stack.backend.failing["/orders"] = 5
    signature = stack.signature("/orders")
    answers = [get(stack, "/orders", signature) for _ in range(4)]
    assert [a.status_code for a in answers] == [502, 502, 502, 402]
    assert [a.json()["attemptsLeft"] for a in answers[:3]] == [2, 1, 0]
    assert "ask the merchant" in answers[2].json()["message"]
    assert len(stack.backend.received) == 3


def test_an_answer_broken_off_mid_body_is_not_charged(stack_on):
    stack = stack_on
    stack.route("/truncated")
    before = stack.balance(stack.gateway.pay_to.pubkey()), stack.balance(stack.gateway.payer.pubkey())
    broken = get(stack, "/truncated", stack.signature("/truncated"))
    assert broken.status_code == 502, broken.text
    assert broken.json()["error"] == "upstream_protocol_error"
    assert "no payment was taken" in broken.json()["message"]
    assert "PAYMENT-RESPONSE" not in broken.headers
    assert (stack.balance(stack.gateway.pay_to.pubkey()), stack.balance(stack.gateway.payer.pubkey())) == before


def test_a_request_body_in_a_transfer_coding_the_proxy_does_not_decode_is_refused_before_any_payment(stack_on):
    stack = stack_on
    stack.route("/orders", method="POST")
    before = stack.balance(stack.gateway.pay_to.pubkey())
    signature = stack.signature("/orders", method="POST")
    url = urlsplit(stack.url("/orders"))
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        connection.putrequest("POST", url.path)
        for name, value in (("Transfer-Encoding", "gzip, chunked"), ("PAYMENT-SIGNATURE", signature),
                            ("Content-Type", "application/json"), ("Connection", "close")):
            connection.putheader(name, value)
        connection.endheaders()
        connection.send(b"a\r\n\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\r\n0\r\n\r\n")
        answer = connection.getresponse()
        status, body = answer.status, answer.read()
    finally:
        connection.close()
    assert status == 501, body
    assert b"unsupported_transfer_coding" in body
    assert stack.backend.received == []
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before


class LosesAnswers:
    """A chain that broadcasts, then cannot say what became of the broadcast."""

    def __init__(self, chain: Any) -> None:
        self._chain = chain

    def signature_status(self, signature: str) -> Any:
        raise ChainUnavailableError("the RPC node went away")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chain, name)


def test_a_broadcast_whose_answer_the_chain_lost_is_pending_not_an_error(stack):
    stack.route("/weather/*")
    chains = stack.gateway.container.chains.by_network
    real = chains[DEVNET.caip2]
    chains[DEVNET.caip2] = LosesAnswers(real)
    signature = stack.signature("/weather/x")
    lost = get(stack, "/weather/x", signature)
    assert lost.status_code == 202, lost.text
    assert decoded(lost.headers["PAYMENT-RESPONSE"])["errorReason"] == "settlement_pending"
    assert lost.json()["transaction"]
    chains[DEVNET.caip2] = real
    assert get(stack, "/weather/x", signature).status_code == 200  # the retry learns it and is served


@pytest.mark.parametrize("settle", ["before", "after"])
def test_a_paid_proxied_request_enters_payments_once_and_is_checked_once(stack, monkeypatch, settle):
    import application.payments

    stack.route("/weather/*", settle=settle)
    signature = stack.signature("/weather/x")
    payments, calls, checks = stack.gateway.container.payments, [], []
    def counting(name: str) -> Any:
        real = getattr(payments, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)
        return counted

    for name in ("verify", "settle", "deliver", "follow_up", "get_payment"):
        monkeypatch.setattr(payments, name, counting(name))
    real_check = application.payments.check_request

    def check(*args: Any, **kwargs: Any) -> Any:
        checks.append(1)
        return real_check(*args, **kwargs)

    monkeypatch.setattr(application.payments, "check_request", check)
    assert get(stack, "/weather/x", signature).status_code == 200
    assert calls == ["deliver"] and len(checks) == 1


def test_the_audit_rebuild_replays_the_events_of_an_owed_delivery(request, stack_on, tmp_path, monkeypatch, capsys):
    from interfaces.cli.main import main
    from interfaces.runtime.workers import catch_up_all

    stack = stack_on
    stack.route("/orders", settle="before")
    stack.backend.failing["/orders"] = 1
    signature = stack.signature("/orders")
    assert [get(stack, "/orders", signature).status_code for _ in range(2)] == [502, 200]
    assert events_of(stack)[-1] == "Delivered"
    catch_up_all(stack.gateway.container)
    key = stack.backend.received[-1].headers["X-Paywarden-Payment-Hash"]
    [payment_id] = stack.gateway.container.payment_list.find_ids(key)
    timeline = [e.type for e in stack.gateway.container.payment_list.get_timeline(payment_id)]

    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    if request.node.callspec.params["stack_on"] == "postgres+redis":
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", request.getfixturevalue("postgres_url"))
        monkeypatch.setenv("PAYWARDEN_REDIS_URL", request.getfixturevalue("redis_url"))
    assert main(["audit", "rebuild", "--check"]) == 0
    assert "payment_list: " in capsys.readouterr().out
    assert timeline[-3:] == ["Payment.Confirmed", "Payment.DeliveryFailed", "Payment.Delivered"]  # the history


def test_other_accepted_terms_are_refused_by_the_one_terms_check_the_facilitator_uses(stack):
    import base64
    import json

    from tests.integration.test_proxy_delivery import facilitator_body

    stack.route("/weather/*")
    payload = json.loads(base64.b64decode(stack.signature("/weather/x")))
    terms = dict(payload["accepted"])
    payload["accepted"]["amount"] = str(PRICE // 2)  # the client claims other terms than the route's
    tampered = base64.b64encode(json.dumps(payload).encode()).decode()

    refused = get(stack, "/weather/x", tampered)
    assert refused.status_code == 402
    assert decoded(refused.headers["PAYMENT-REQUIRED"])["error"] == "invalid_payment_requirements"
    settled = stack.gateway.post("/settle", {**facilitator_body(tampered), "paymentRequirements": terms},
                                 stack.gateway.headers)
    assert settled.json["errorReason"] == "invalid_payment_requirements"
    assert stack.backend.received == []


def test_a_paid_answer_that_breaks_off_while_streamed_is_owed_to_the_retry(stack):
    stack.route("/truncated", settle="before")
    before = stack.balance(stack.gateway.pay_to.pubkey())
    signature = stack.signature("/truncated")
    for _ in range(2):
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            get(stack, "/truncated", signature)  # 200 and the success answer, then the body stops short
    payment = stack.gateway.container.payments.get_payment(
        stack.backend.received[-1].headers["X-Paywarden-Payment-Hash"])
    assert payment.delivery_failures == 2 and not payment.delivered
    assert len(stack.backend.received) == 2  # the retry was forwarded again...
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before + PRICE  # ...without a new charge


def test_an_owed_delivery_is_made_at_the_route_it_failed_at_only(stack):
    stack.route("/orders", settle="before")
    stack.route("/other", settle="before")  # the same price and payTo: another door for the same payment
    stack.backend.failing["/orders"] = 1
    signature = stack.signature("/orders")
    assert get(stack, "/orders", signature).status_code == 502
    elsewhere = get(stack, "/other", signature)
    assert elsewhere.status_code == 402
    assert decoded(elsewhere.headers["PAYMENT-REQUIRED"])["error"] == "duplicate_settlement"
    assert get(stack, "/orders", signature).status_code == 200
    assert [r.path for r in stack.backend.received] == ["/orders", "/orders"]
