"""What the verify and settle commands answer: the spec's VerifyResponse and SettleResponse, as values.

The rules that turn a recorded payment into an answer live here once: `verify_outcome` and `settle_outcome` (what
a record answers), `repeated_settle` (a settle of an answered payment) and `terminal_entries` (which answers are
final). The live answer calls them on the `Payment` aggregate; the terminal result cache's projection, its only
writer, calls them on the `PaymentFacts` it folds from the same events; a replay answers from either with `replay`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any, Protocol

from domain.codes import Code
from domain.payment import PaymentState

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
    def invalid(cls, code: Code | str, payer: str | None = None, details: dict[str, Any] | None = None,
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


class PaymentRecord(Protocol):
    """What an answer is made of: the `Payment` aggregate, or the `PaymentFacts` a projection keeps of it."""

    terms_digest: str
    network: str
    state: PaymentState
    verify_outcome: PaymentState | None
    payer: str | None
    reason: str | None
    message: str
    details: dict[str, Any] | None
    signature: str | None
    settle_reason: str | None
    success_answered: bool
    answer_key: str | None


@dataclass
class PaymentFacts:
    """The facts of a payment an answer needs, as plain JSON-able values (the `Payment` attributes of the same
    names); the result cache projection keeps them per payment, folded from the payment's events."""

    idempotency_key: str
    terms_digest: str
    network: str
    state: PaymentState = PaymentState.RECEIVED
    verify_outcome: PaymentState | None = None
    payer: str | None = None
    reason: str | None = None
    message: str = ""
    details: dict[str, Any] | None = None
    signature: str | None = None
    settle_reason: str | None = None
    success_answered: bool = False
    answer_key: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The fields by name, the values shared with these facts (JSON-able already; nothing changes them):
        not `dataclasses.asdict`, whose deep copy was most of the result cache projection's own time."""
        return {name: getattr(self, name) for name in _FACT_NAMES}

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> PaymentFacts | None:
        """The facts kept by `as_json`; None for anything else (an older shape: the event store answers)."""
        names = {f.name for f in fields(cls)}
        if not names.issuperset(stored) or not {"idempotency_key", "terms_digest", "network"} <= stored.keys():
            return None
        facts = cls(**stored)
        facts.state = PaymentState(facts.state)
        facts.verify_outcome = PaymentState(facts.verify_outcome) if facts.verify_outcome else None
        return facts


_FACT_NAMES = tuple(f.name for f in fields(PaymentFacts))


def verify_outcome(payment: PaymentRecord) -> VerifyOutcome:
    """A verify of a recorded payment: its verify result, unless a settle already answered success."""
    if payment.success_answered:
        return settled_verify(payment.payer, payment.signature)
    if payment.verify_outcome is PaymentState.APPROVED:
        return VerifyOutcome(is_valid=True, payer=payment.payer)
    # A recorded rejection; `simulationDetails` only with `simulation_failed`
    # (docs/architecture.md#the-interface-contract).
    reason = str(payment.reason)
    details = payment.details if reason == Code.SIMULATION_FAILED.value else None
    return VerifyOutcome.invalid(reason, payment.payer, details, payment.message)


def settled_verify(payer: str | None, transaction: str | None) -> VerifyOutcome:
    return VerifyOutcome.invalid(Code.DUPLICATE_SETTLEMENT, payer,
                                 message=SETTLED_MESSAGE.format(transaction=transaction))


def settle_outcome(payment: PaymentRecord) -> SettleOutcome:
    """The settle answer a payment's record gives: success, pending, or its failure."""
    if payment.state is PaymentState.CONFIRMED:
        return SettleOutcome(success=True, transaction=payment.signature, network=payment.network,
                             payer=payment.payer)
    if payment.state is PaymentState.SUBMITTED:
        return SettleOutcome.failed(
            Code.SETTLEMENT_PENDING, payment.payer, payment.network, payment.signature,
            "broadcast, not yet confirmed; retry the settle to learn its outcome (it is never broadcast twice)",
        )
    return SettleOutcome.failed(str(payment.settle_reason), payment.payer, payment.network, payment.signature,
                                payment.message)


def terminal_entries(payment: PaymentRecord) -> dict[str, dict[str, Any]]:
    """What the terminal result cache holds for a payment, by operation: a rejection, a failure, an answered
    success (and, with it, the `duplicate_settlement` every later verify gets). An approval is not terminal (it
    may become settled), nor is a confirmation no settle has answered yet. Only a settle reads the cache now (a
    verify takes no lock, docs/facilitator.md); the verify entries are still written, as the caches that earlier
    releases filled hold them and `audit rebuild --check` compares a cache with its rebuild."""
    terms, entries = payment.terms_digest, {}
    if payment.verify_outcome is PaymentState.REJECTED or payment.success_answered:
        entries["verify"] = cache_entry(terms, verify_outcome(payment))
    if payment.state is PaymentState.FAILED or (payment.state is PaymentState.CONFIRMED and payment.success_answered):
        entries["settle"] = cache_entry(terms, settle_outcome(payment), payment.answer_key)
    return entries


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


OTHER_TERMS = "this payment was first presented with other requirements"


def replayed_settle(cached: dict[str, Any], terms: str, network: str, request_key: str | None) -> SettleOutcome:
    """A duplicate settle answered from its terminal result cache entry, through `repeated_settle`. A payment is
    bound to the terms it was first presented with: other terms are refused, not replayed."""
    if cached["terms"] != terms:
        return SettleOutcome.failed(Code.INVALID_PAYMENT_REQUIREMENTS, network=network, message=OTHER_TERMS)
    return repeated_settle(SettleOutcome(**cached["outcome"]), cached.get("answer_key"), request_key)


# -- the proxy's delivery rule ----------------------------------------------------------------------------------

# How often the upstream may see one payment that is verified but not settled (`settle: after`): its first
# forward and two retries after an upstream answer of 400 or more (docs/proxy.md).
FORWARD_LIMIT = 3
FORWARDS_SPENT = "payment_forwards_exhausted"


class ProxyStep(StrEnum):
    FORWARD = "forward"  # verified, unsettled: forward, and settle on an upstream answer below 400
    SETTLE = "settle"  # broadcast before (or confirmed, unanswered): settle first; only its success is delivered
    REFUSE = "refuse"  # never forwarded: rejected, failed, answered success already, or forwards spent


@dataclass(frozen=True)
class ProxyDecision:
    """What the proxy may do with a paid request before any settle: the payment's key, the step, and why not."""

    step: ProxyStep
    key: str = ""
    reason: str | None = None
    message: str | None = None
    payer: str | None = None

    @classmethod
    def refused(cls, key: str, reason: Code | str, message: str | None = None,
                payer: str | None = None) -> ProxyDecision:
        return cls(ProxyStep.REFUSE, key, str(reason), message or str(reason), payer)


class ForwardedRecord(PaymentRecord, Protocol):
    forwards: int


def proxy_decision(payment: ForwardedRecord, key: str, limit: int = FORWARD_LIMIT) -> ProxyDecision:
    """The delivery rule's first half, for a proxied `settle: after` request (the second half is settle's own:
    a response is delivered only with the payment's single success answer, whichever door asked first).

    A payment answered success (by any door), failed, or rejected is never forwarded; one broadcast before is
    settled first; a verified one is forwarded at most `limit` times while it stays unsettled."""
    if payment.success_answered:
        return ProxyDecision.refused(key, Code.DUPLICATE_SETTLEMENT,
                                     SETTLED_MESSAGE.format(transaction=payment.signature), payment.payer)
    if payment.state is PaymentState.FAILED:
        return ProxyDecision.refused(key, str(payment.settle_reason), payment.message, payment.payer)
    if payment.verify_outcome is PaymentState.REJECTED:
        return ProxyDecision.refused(key, str(payment.reason), payment.message, payment.payer)
    if payment.state in (PaymentState.SUBMITTED, PaymentState.CONFIRMED):
        return ProxyDecision(ProxyStep.SETTLE, key, payer=payment.payer)
    if payment.forwards >= limit:
        return ProxyDecision.refused(key, FORWARDS_SPENT, f"this payment reached its upstream {limit} times "
                                     "without being settled; sign a new payment", payment.payer)
    return ProxyDecision(ProxyStep.FORWARD, key, payer=payment.payer)
