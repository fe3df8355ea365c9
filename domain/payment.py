"""The Payment aggregate: one x402 payment authorization and every transition it goes through.

Its events are the audit trail. Verify outcomes (APPROVED / REJECTED) and settle outcomes (SUBMITTED, then
CONFIRMED / FAILED) are kept apart, so a verify and a later settle of the same payment each answer with their own
result, and a duplicate of either is answered from what was recorded.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from domain.errors import PaymentStateError
from domain.idempotency import payment_id
from domain.networks import DEFAULT_MAX_TIMEOUT_SECONDS


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

    class Confirmed(Aggregate.Event):
        signature: str

    class Failed(Aggregate.Event):
        reason: str
        message: str
        signature: str | None

    @staticmethod
    def create_id(idempotency_key: str, **_: Any) -> UUID:
        return payment_id(idempotency_key)

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
    ) -> None:
        self.idempotency_key, self.client_id = idempotency_key, client_id
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

    # -- verify outcomes -------------------------------------------------------------------------------

    def approve(self, payer: str, fee_payer: str, blockhash: str) -> None:
        if self.state is not PaymentState.RECEIVED:
            raise PaymentStateError(self.id, self.state, "be approved")
        self._approve(payer=payer, fee_payer=fee_payer, blockhash=blockhash)

    @event(Approved)
    def _approve(self, payer: str, fee_payer: str, blockhash: str) -> None:
        self.payer, self.blockhash = payer, blockhash
        self.state = self.verify_outcome = PaymentState.APPROVED

    def reject(self, reason: str, message: str, payer: str | None, details: dict[str, Any] | None) -> None:
        if self.state is not PaymentState.RECEIVED:
            raise PaymentStateError(self.id, self.state, "be rejected")
        self._reject(reason=reason, message=message, payer=payer, details=details)

    @event(Rejected)
    def _reject(self, reason: str, message: str, payer: str | None, details: dict[str, Any] | None) -> None:
        self.reason, self.message, self.payer, self.details = reason, message, payer, details
        self.state = self.verify_outcome = PaymentState.REJECTED

    # -- settle outcomes -------------------------------------------------------------------------------

    def submit(self, signature: str, fee_payer: str, blockhash: str, transaction: str) -> None:
        """Record the broadcast before it happens: a retry then reconciles by signature, never re-broadcasts."""
        if self.state is not PaymentState.APPROVED:
            raise PaymentStateError(self.id, self.state, "be submitted")
        self._submit(signature=signature, fee_payer=fee_payer, blockhash=blockhash, transaction=transaction)

    @event(SettlementSubmitted)
    def _submit(self, signature: str, fee_payer: str, blockhash: str, transaction: str) -> None:
        self.signature, self.blockhash, self.transaction = signature, blockhash, transaction
        self.state = PaymentState.SUBMITTED

    def confirm(self) -> None:
        if self.state is not PaymentState.SUBMITTED:
            raise PaymentStateError(self.id, self.state, "be confirmed")
        self._confirm(signature=self.signature)

    @event(Confirmed)
    def _confirm(self, signature: str) -> None:
        self.state = PaymentState.CONFIRMED

    def fail(self, reason: str, message: str) -> None:
        if self.is_settled:
            raise PaymentStateError(self.id, self.state, "fail")
        self._fail(reason=reason, message=message, signature=self.signature)

    @event(Failed)
    def _fail(self, reason: str, message: str, signature: str | None) -> None:
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
