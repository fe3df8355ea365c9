"""The delivery rule's first half as a table: what the proxy may do with a `settle: after` request for a payment
in each state (`application.outcomes.proxy_decision`), on a real `Payment` aggregate."""

from __future__ import annotations

import pytest

from application.outcomes import FORWARD_LIMIT, FORWARDS_SPENT, ProxyStep, proxy_decision
from domain.errors import PaymentStateError
from domain.payment import Payment


def payment() -> Payment:
    return Payment(idempotency_key="k" * 64, client_id="merchant:x", network="solana:devnet", asset="USDC",
                   amount=1000, pay_to="payTo", terms_digest="terms", client_signature="sig", extensions={},
                   resource=None)


def approved() -> Payment:
    p = payment()
    p.approve("payer", "feepayer", "blockhash")
    return p


def submitted() -> Payment:
    p = approved()
    p.submit("txsig", "feepayer", "blockhash", "dHg=")
    return p


def confirmed(answered: bool) -> Payment:
    p = submitted()
    p.confirm(answered=answered, via="proxy:s:r" if answered else None)
    return p


def rejected() -> Payment:
    p = payment()
    p.reject("simulation_failed", "no funds", "payer", None)
    return p


def failed() -> Payment:
    p = submitted()
    p.fail("submission_failed", "insufficient funds")
    return p


def forwarded(times: int) -> Payment:
    p = approved()
    for _ in range(times):
        p.forward("proxy:s:r")
    return p


@pytest.mark.parametrize(("make", "step", "reason"), [
    (approved, ProxyStep.FORWARD, None),
    (lambda: forwarded(FORWARD_LIMIT - 1), ProxyStep.FORWARD, None),
    (lambda: forwarded(FORWARD_LIMIT), ProxyStep.REFUSE, FORWARDS_SPENT),
    (submitted, ProxyStep.SETTLE, None),
    (lambda: confirmed(answered=False), ProxyStep.SETTLE, None),  # confirmed by a re-send; nobody told yet
    (lambda: confirmed(answered=True), ProxyStep.REFUSE, "duplicate_settlement"),  # answered, by any door
    (failed, ProxyStep.REFUSE, "submission_failed"),
    (rejected, ProxyStep.REFUSE, "simulation_failed"),
])
def test_what_the_proxy_may_do_with_a_payment_in_each_state(make, step, reason):
    decision = proxy_decision(make(), "key")
    assert (decision.step, decision.reason) == (step, reason)
    assert decision.key == "key"


def test_the_success_answer_records_its_door_and_only_a_verified_unsettled_payment_is_forwarded():
    answered = confirmed(answered=True)
    assert answered.answered_via == "proxy:s:r" and answered.success_answered
    late = confirmed(answered=False)
    late.answer_success(None, via="proxy:s2:r2")
    assert late.answered_via == "proxy:s2:r2"
    for not_forwardable in (submitted(), failed(), rejected(), payment()):
        with pytest.raises(PaymentStateError):
            not_forwardable.forward("proxy:s:r")
