"""What the verify and settle commands answer: the spec's VerifyResponse and SettleResponse, as values.

The rules that turn a recorded payment into an answer live here once, for the live answer and for the terminal
result cache (its projection calls the same functions): `verify_outcome`, `settle_outcome`, `repeated_settle`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from domain.codes import Code
from domain.payment import Payment, PaymentState

SETTLED_MESSAGE = "this payment is already settled (transaction {transaction}); a settled payment pays for one answer"


@dataclass(frozen=True)
class VerifyOutcome:
    is_valid: bool
    payer: str | None = None
    invalid_reason: str | None = None
    simulation_details: dict[str, Any] | None = None
    replayed: bool = False
    invalid_message: str | None = None

    @classmethod
    def invalid(cls, code: Code | str, payer: str | None = None, details: dict | None = None,
                message: str | None = None) -> VerifyOutcome:
        return cls(is_valid=False, payer=payer, invalid_reason=str(code), simulation_details=details,
                   invalid_message=message or str(code))

    def as_replay(self) -> VerifyOutcome:
        return replace(self, replayed=True)


@dataclass(frozen=True)
class SettleOutcome:
    success: bool
    transaction: str | None = None
    network: str | None = None
    payer: str | None = None
    error_reason: str | None = None
    replayed: bool = False
    error_message: str | None = None

    @classmethod
    def failed(cls, code: Code | str, payer: str | None = None, network: str | None = None,
               transaction: str | None = None, message: str | None = None) -> SettleOutcome:
        return cls(success=False, error_reason=str(code), payer=payer, network=network, transaction=transaction,
                   error_message=message or str(code))

    @property
    def pending(self) -> bool:
        return self.error_reason == Code.SETTLEMENT_PENDING.value

    def as_replay(self) -> SettleOutcome:
        return replace(self, replayed=True)


def verify_outcome(payment: Payment) -> VerifyOutcome:
    """A verify of a recorded payment: its verify result, unless a settle already answered success."""
    if payment.success_answered:
        return settled_verify(payment.payer, payment.signature)
    if payment.verify_outcome is PaymentState.APPROVED:
        return VerifyOutcome(is_valid=True, payer=payment.payer)
    return rejected_verify(str(payment.reason), payment.payer, payment.details, payment.message)


def rejected_verify(reason: str, payer: str | None, details: dict[str, Any] | None, message: str) -> VerifyOutcome:
    """A recorded rejection; `simulationDetails` only with `simulation_failed`, as SPEC.md says."""
    kept = details if reason == Code.SIMULATION_FAILED.value else None
    return VerifyOutcome.invalid(reason, payer, kept, message)


def settled_verify(payer: str | None, transaction: str | None) -> VerifyOutcome:
    return VerifyOutcome.invalid(Code.DUPLICATE_SETTLEMENT, payer,
                                 message=SETTLED_MESSAGE.format(transaction=transaction))


def settle_outcome(payment: Payment) -> SettleOutcome:
    """The settle answer a payment's record gives: success, pending, or its failure."""
    if payment.state is PaymentState.CONFIRMED:
        return settle_success(payment.signature, payment.network, payment.payer)
    if payment.state is PaymentState.SUBMITTED:
        return SettleOutcome.failed(
            Code.SETTLEMENT_PENDING, payment.payer, payment.network, payment.signature,
            "broadcast, not yet confirmed; retry the settle to learn its outcome (it is never broadcast twice)",
        )
    return SettleOutcome.failed(str(payment.settle_reason), payment.payer, payment.network, payment.signature,
                                payment.message)


def terminal_entries(payment: Payment) -> dict[str, dict[str, Any]]:
    """What the terminal result cache holds for a payment, by operation: a rejection, a failure, an answered
    success (and, with it, the `duplicate_settlement` every later verify gets). An approval is not terminal (it
    may become settled), nor is a confirmation no settle has answered yet."""
    terms, entries = payment.terms_digest, {}
    if payment.verify_outcome is PaymentState.REJECTED:
        entries["verify"] = cache_entry(terms, verify_outcome(payment))
    if payment.state is PaymentState.FAILED:
        entries["settle"] = cache_entry(terms, settle_outcome(payment))
    if payment.state is PaymentState.CONFIRMED and payment.success_answered:
        entries.update(answered_entries(terms, payment.signature, payment.network, payment.payer,
                                        payment.answer_key))
    return entries


def answered_entries(terms: str, transaction: str | None, network: str | None, payer: str | None,
                     answer_key: str | None) -> dict[str, dict[str, Any]]:
    return {
        "settle": cache_entry(terms, settle_success(transaction, network, payer), answer_key),
        "verify": cache_entry(terms, settled_verify(payer, transaction)),
    }


def settle_success(transaction: str | None, network: str | None, payer: str | None) -> SettleOutcome:
    return SettleOutcome(success=True, transaction=transaction, network=network, payer=payer)


def repeated_settle(stored: SettleOutcome, answer_key: str | None, request_key: str | None) -> SettleOutcome:
    """A settle of a payment whose settle was already answered.

    A failure is answered again, as recorded. A success is answered once only: a retry carrying the
    `Idempotency-Key` of the request that got it is answered the stored success again (`replayed`); any other
    settle is `duplicate_settlement`, with the original transaction, network and payer.
    """
    if not stored.success or (request_key is not None and request_key == answer_key):
        return stored.as_replay()
    return SettleOutcome.failed(Code.DUPLICATE_SETTLEMENT, stored.payer, stored.network, stored.transaction,
                                SETTLED_MESSAGE.format(transaction=stored.transaction))


def cache_entry(terms: str, outcome: VerifyOutcome | SettleOutcome, answer_key: str | None = None) -> dict[str, Any]:
    """A terminal result cache entry: the terms the payment is bound to, the answer, the success's key."""
    return {"terms": terms, "outcome": asdict(outcome), "answer_key": answer_key}
