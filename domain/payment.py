"""The Payment aggregate: one x402 payment authorization and every transition it goes through.

Its events are the audit trail. Verify outcomes (APPROVED / REJECTED) and settle outcomes (SUBMITTED, then
CONFIRMED / FAILED) are kept apart, so a verify and a later settle of the same payment each answer with their own
result. Settled means settled once: exactly one settle answer says success, and the payment records which one
(`Confirmed` with `answered`, or `SuccessAnswered` after a confirmation nobody was told of), with the merchant's
`Idempotency-Key` of that request, so only a retry carrying that key is answered the stored success again.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from domain.errors import PaymentStateError
from domain.idempotency import payment_id
from domain.networks import DEFAULT_MAX_TIMEOUT_SECONDS

# How often a delivery a payment paid for is attempted in all when its upstream fails after the charge: the first
# attempt and two retries with the same payment (docs/proxy.md, "A paid delivery that failed is owed").
DELIVERY_ATTEMPTS = 3


class PaymentState(StrEnum):
    RECEIVED = "RECEIVED"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    SUBMITTED = "SUBMITTED"
    CONFIRMED = "CONFIRMED"
    FAILED = "FAILED"


class Payment(Aggregate):
    class Received(Aggregate.Created):
        idempotency_key: str
        client_id: str
        network: str
        asset: str
        amount: int
        pay_to: str
        terms_digest: str
        client_signature: str
        extensions: dict[str, Any]
        resource: dict[str, Any] | None
        max_timeout_seconds: int
        message_hash: str | None = None

    class Approved(Aggregate.Event):
        payer: str
        fee_payer: str
        blockhash: str

    class Rejected(Aggregate.Event):
        reason: str
        message: str
        payer: str | None
        details: dict[str, Any] | None

    class SettlementSubmitted(Aggregate.Event):
        signature: str
        fee_payer: str
        blockhash: str
        transaction: str
        request_key: str | None = None

    class Confirmed(Aggregate.Event):
        """The transaction is confirmed. `answered`: a settle request answers success with this very event (events
        recorded before the field existed were all answered); False when a re-send found it confirmed. `via`: the
        door the success answer went out by (`proxy:<service>:<route>`; None for the facilitator's `/settle`)."""

        signature: str
        answered: bool = True
        request_key: str | None = None
        via: str | None = None

    class SuccessAnswered(Aggregate.Event):
        """A settle answered success for a payment confirmed while nobody was waiting (the retry after
        `settlement_pending`)."""

        request_key: str | None
        via: str | None = None

    class Forwarded(Aggregate.Event):
        """The proxy forwards a verified, unsettled payment's request to the service's upstream (`settle: after`),
        recorded before it does: the upstream sees one payment at most `FORWARD_LIMIT` times."""

        via: str

    class DeliveryFailed(Aggregate.Event):
        """A delivery this payment paid for failed after its success answer (the upstream failed or broke off):
        the delivery is owed, and a retry with the same payment is forwarded again without a new charge (at most
        `DELIVERY_ATTEMPTS` attempts in all, within the payment's `max_timeout_seconds` of the first failure).
        `at`: when, in seconds since the epoch (the application's clock)."""

        via: str
        reason: str
        at: float

    class Delivered(Aggregate.Event):
        """An owed delivery was served: the payment is never served again."""

        via: str

    class Failed(Aggregate.Event):
        reason: str
        message: str
        signature: str | None
        request_key: str | None = None

    @staticmethod
    def create_id(idempotency_key: str, **_: Any) -> UUID:
        return payment_id(idempotency_key)

    @classmethod
    def receive(cls, *, idempotency_key: str, client_id: str, network: str, asset: str, amount: int, pay_to: str,
                terms_digest: str, client_signature: str, extensions: dict[str, Any], resource: dict[str, Any] | None,
                max_timeout_seconds: int = DEFAULT_MAX_TIMEOUT_SECONDS, message_hash: str | None = None) -> Payment:
        """A new payment, as `Payment(...)` makes it: the keywords name every term."""
        return cls(idempotency_key=idempotency_key, client_id=client_id, network=network, asset=asset, amount=amount,
                   pay_to=pay_to, terms_digest=terms_digest, client_signature=client_signature,
                   extensions=extensions, resource=resource, max_timeout_seconds=max_timeout_seconds,
                   message_hash=message_hash)

    @event(Received)
    def __init__(
        self,
        idempotency_key: str,
        client_id: str,
        network: str,
        asset: str,
        amount: int,
        pay_to: str,
        terms_digest: str,
        client_signature: str,
        extensions: dict[str, Any],
        resource: dict[str, Any] | None,
        max_timeout_seconds: int = DEFAULT_MAX_TIMEOUT_SECONDS,
        message_hash: str | None = None,
    ) -> None:
        self.idempotency_key, self.client_id, self.message_hash = idempotency_key, client_id, message_hash
        self.network, self.asset, self.amount, self.pay_to = network, asset, amount, pay_to
        self.terms_digest, self.client_signature = terms_digest, client_signature
        self.extensions, self.resource, self.max_timeout_seconds = extensions, resource, max_timeout_seconds
        self.state = PaymentState.RECEIVED
        self.payer: str | None = None
        self.verify_outcome: PaymentState | None = None
        self.reason: str | None = None
        self.message: str = ""
        self.details: dict[str, Any] | None = None
        self.signature: str | None = None
        self.blockhash: str | None = None
        self.transaction: str | None = None
        self.settle_reason: str | None = None
        self.success_answered = False
        self.answer_key: str | None = None  # the Idempotency-Key of the settle request answered success
        self.answered_via: str | None = None
        self.forwards = 0
        self.delivery_failures = 0  # paid deliveries that failed (`DeliveryFailed`)
        self.delivery_failed_at: float | None = None  # the first one's time
        self.owed_via: str | None = None  # the door the first one failed at: the owed delivery is made there
        self.delivered = False  # an owed delivery was served (`Delivered`)

    # -- verify outcomes -------------------------------------------------------------------------------
    # Every verify records one of these two: triggered with the library's public `trigger_event`, the event class
    # the `@event` decorator made (`Payment.Approved` is it: its `apply` runs the decorated method, as a replay
    # does), without the decorator's re-sorting of the arguments (~29k instructions a verify, docs/performance.md).

    def approve(self, payer: str, fee_payer: str, blockhash: str) -> None:
        if self.state is not PaymentState.RECEIVED:
            raise PaymentStateError(self.id, self.state, "be approved")
        self.trigger_event(self.Approved, payer=payer, fee_payer=fee_payer, blockhash=blockhash)

    @event(Approved)
    def _approve(self, payer: str, fee_payer: str, blockhash: str) -> None:
        self.payer, self.blockhash = payer, blockhash
        self.state = self.verify_outcome = PaymentState.APPROVED

    def reject(self, reason: str, message: str, payer: str | None, details: dict[str, Any] | None) -> None:
        if self.state is not PaymentState.RECEIVED:
            raise PaymentStateError(self.id, self.state, "be rejected")
        self.trigger_event(self.Rejected, reason=reason, message=message, payer=payer, details=details)

    @event(Rejected)
    def _reject(self, reason: str, message: str, payer: str | None, details: dict[str, Any] | None) -> None:
        self.reason, self.message, self.payer, self.details = reason, message, payer, details
        self.state = self.verify_outcome = PaymentState.REJECTED

    # -- settle outcomes -------------------------------------------------------------------------------

    def submit(self, signature: str, fee_payer: str, blockhash: str, transaction: str,
               request_key: str | None = None) -> None:
        """Record the broadcast before it happens: a retry re-sends these very bytes, never a different
        transaction."""
        if self.state is not PaymentState.APPROVED:
            raise PaymentStateError(self.id, self.state, "be submitted")
        self._submit(signature=signature, fee_payer=fee_payer, blockhash=blockhash, transaction=transaction,
                     request_key=request_key)

    @event(SettlementSubmitted)
    def _submit(self, signature: str, fee_payer: str, blockhash: str, transaction: str,
                request_key: str | None = None) -> None:
        self.signature, self.blockhash, self.transaction = signature, blockhash, transaction
        self.state = PaymentState.SUBMITTED

    def confirm(self, *, answered: bool, request_key: str | None = None, via: str | None = None) -> None:
        """The chain confirmed the transaction; `answered` when a settle request answers success with it."""
        if self.state is not PaymentState.SUBMITTED or self.signature is None:
            raise PaymentStateError(self.id, self.state, "be confirmed")
        self._confirm(signature=self.signature, answered=answered, request_key=request_key if answered else None,
                      via=via if answered else None)

    @event(Confirmed)
    def _confirm(self, signature: str, answered: bool = True, request_key: str | None = None,
                 via: str | None = None) -> None:
        self.state = PaymentState.CONFIRMED
        self.success_answered, self.answer_key, self.answered_via = answered, request_key, via

    def answer_success(self, request_key: str | None, via: str | None = None) -> None:
        """The one success answer of a payment confirmed while no settle was waiting."""
        if self.state is not PaymentState.CONFIRMED or self.success_answered:
            raise PaymentStateError(self.id, self.state, "answer success again")
        self._answer_success(request_key=request_key, via=via)

    @event(SuccessAnswered)
    def _answer_success(self, request_key: str | None, via: str | None = None) -> None:
        self.success_answered, self.answer_key, self.answered_via = True, request_key, via

    def forward(self, via: str) -> None:
        """The proxy is about to forward this verified, unsettled payment's request (`settle: after`)."""
        if self.state is not PaymentState.APPROVED:
            raise PaymentStateError(self.id, self.state, "be forwarded unsettled")
        self._forward(via=via)

    @event(Forwarded)
    def _forward(self, via: str) -> None:
        self.forwards += 1

    # -- deliveries paid for -------------------------------------------------------------------------------

    def fail_delivery(self, via: str, reason: str, at: float) -> None:
        """The delivery this payment's success answer paid for failed: it is owed."""
        if not self.success_answered or self.delivered:
            raise PaymentStateError(self.id, self.state, "owe a delivery")
        self._fail_delivery(via=via, reason=reason, at=at)

    @event(DeliveryFailed)
    def _fail_delivery(self, via: str, reason: str, at: float) -> None:
        self.delivery_failures += 1
        if self.delivery_failed_at is None:
            self.delivery_failed_at, self.owed_via = at, via

    def deliver(self, via: str) -> None:
        """An owed delivery was served."""
        if not self.delivery_failures or self.delivered:
            raise PaymentStateError(self.id, self.state, "be delivered (nothing is owed)")
        self._deliver(via=via)

    @event(Delivered)
    def _deliver(self, via: str) -> None:
        self.delivered = True

    def owes_delivery(self, now: float, via: str) -> bool:
        """A paid delivery at the door `via` failed, and another attempt may be made: not delivered since, fewer
        than `DELIVERY_ATTEMPTS` attempts failed, and within `max_timeout_seconds` of the first failure."""
        return (self.delivery_failures > 0 and not self.delivered and self.delivery_failures < DELIVERY_ATTEMPTS
                and self.owed_via == via and self.delivery_failed_at is not None
                and now - self.delivery_failed_at <= self.max_timeout_seconds)

    def fail(self, reason: str, message: str, request_key: str | None = None) -> None:
        if self.is_settled:
            raise PaymentStateError(self.id, self.state, "fail")
        self._fail(reason=reason, message=message, signature=self.signature, request_key=request_key)

    @event(Failed)
    def _fail(self, reason: str, message: str, signature: str | None, request_key: str | None = None) -> None:
        self.settle_reason, self.message = reason, message
        self.state = PaymentState.FAILED

    # -- queries ---------------------------------------------------------------------------------------

    @property
    def is_settled(self) -> bool:
        """A terminal settle outcome is recorded."""
        return self.state in (PaymentState.CONFIRMED, PaymentState.FAILED)

    @property
    def is_pending(self) -> bool:
        return self.state is PaymentState.SUBMITTED

