"""`Payment.receive` and the verify outcomes: what the library's constructor and decorated methods make."""

from __future__ import annotations

from eventsourcing.application import Application
from eventsourcing.utils import get_topic

from domain.payment import Payment, PaymentState

TERMS = dict(idempotency_key="k" * 64, client_id="merchant:acme", network="solana:devnet", asset="A" * 44,
             amount=1_000, pay_to="P" * 44, terms_digest="d" * 64, client_signature="s" * 88,
             extensions={"bazaar": {"info": {}}}, resource={"url": "https://example.com/a"})


def _without_times(state: dict) -> dict:
    return {k: v for k, v in state.items() if k not in ("timestamp", "_created_on", "_modified_on", "_pending_events")}


def test_receive_makes_the_payment_and_the_event_the_librarys_constructor_makes():
    for terms in (TERMS, {**TERMS, "max_timeout_seconds": 5, "message_hash": "m" * 64}):
        made, received = Payment(**terms), Payment.receive(**terms)
        assert type(received) is Payment and received.state is PaymentState.RECEIVED
        assert _without_times(vars(received)) == _without_times(vars(made))
        [event], [library_event] = received.collect_events(), made.collect_events()
        assert type(event) is type(library_event)
        assert _without_times(vars(event)) == _without_times(vars(library_event))
        assert event.originator_topic == get_topic(Payment) and event.originator_id == made.id


def test_a_received_payment_is_stored_and_replayed_as_one_the_constructor_made():
    app = Application[object]({"PERSISTENCE_MODULE": "eventsourcing.popo"})
    payment = Payment.receive(**TERMS)
    payment.approve("payer", "fee-payer", "blockhash")
    app.save(payment)
    replayed = app.repository.get(payment.id)
    assert _without_times(vars(replayed)) == _without_times(vars(payment))
    assert (replayed.version, replayed.state, replayed.payer) == (2, PaymentState.APPROVED, "payer")


def test_approve_and_reject_record_what_their_decorated_methods_record():
    """`approve`/`reject` trigger the class the `@event` decorator made: the same event and state as calling the
    decorated `_approve`/`_reject` (which is what a replay runs)."""
    for command, decorated, name, args in [
        ("approve", "_approve", "Approved", dict(payer="payer", fee_payer="fee-payer", blockhash="blockhash")),
        ("reject", "_reject", "Rejected", dict(reason="r", message="m", payer=None, details={"logs": ["a"]})),
    ]:
        ours, theirs = Payment.receive(**TERMS), Payment.receive(**TERMS)
        getattr(ours, command)(**args)
        getattr(theirs, decorated)(**args)
        assert _without_times(vars(ours)) == _without_times(vars(theirs))
        event, library_event = ours.collect_events()[1], theirs.collect_events()[1]
        assert type(event) is type(library_event) and type(event).__qualname__ == f"Payment.{name}"
        assert _without_times(vars(event)) == _without_times(vars(library_event))


def _paid(**terms: object) -> Payment:
    payment = Payment.receive(**{**TERMS, **terms})
    payment.approve("payer", "fee-payer", "blockhash")
    payment.submit("sig", "fee-payer", "blockhash", "tx")
    payment.confirm(answered=True, via="proxy:s:r")
    return payment


def test_a_failed_paid_delivery_is_owed_three_attempts_within_the_payments_timeout_and_replays():
    import pytest

    from domain.errors import PaymentStateError
    from domain.payment import DELIVERY_ATTEMPTS

    payment = _paid(max_timeout_seconds=60)
    assert not payment.owes_delivery(1000.0, "proxy:s:r")  # nothing failed: served once, never again
    payment.fail_delivery("proxy:s:r", "upstream_error", 1000.0)
    assert payment.owes_delivery(1060.0, "proxy:s:r")
    assert not payment.owes_delivery(1060.5, "proxy:s:r")  # the window: maxTimeoutSeconds
    assert not payment.owes_delivery(1001.0, "proxy:s:other")  # owed at the door it failed at
    for attempt in range(2, DELIVERY_ATTEMPTS + 1):
        payment.fail_delivery("proxy:s:r", "upstream_timeout", 1000.0 + attempt)
    assert payment.delivery_failures == 3 and not payment.owes_delivery(1004.0, "proxy:s:r")  # attempts spent

    delivered = _paid()
    delivered.fail_delivery("proxy:s:r", "upstream_error", 1.0)
    delivered.deliver("proxy:s:r")
    assert not delivered.owes_delivery(2.0, "proxy:s:r")
    with pytest.raises(PaymentStateError):
        delivered.deliver("proxy:s:r")
    with pytest.raises(PaymentStateError):
        delivered.fail_delivery("proxy:s:r", "upstream_error", 3.0)
    with pytest.raises(PaymentStateError):  # an unpaid payment owes nothing
        Payment.receive(**TERMS).fail_delivery("proxy:s:r", "upstream_error", 1.0)

    app = Application[object]({"PERSISTENCE_MODULE": "eventsourcing.popo"})
    app.save(delivered)
    replayed = app.repository.get(delivered.id)
    assert (replayed.delivery_failures, replayed.delivery_failed_at, replayed.delivered) == (1, 1.0, True)
