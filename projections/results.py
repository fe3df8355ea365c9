"""The terminal result cache as a read model: verify and settle results written as Payments records them.

A duplicate request whose result is terminal is answered from this cache without the lock or the event store.
Each entry has the shape the Payments application replays: {"terms": digest, "outcome": {...}}, keyed by
idempotency key and operation. The projection keeps, per payment, what later events need (key, terms, network,
payer) in the view itself; it never loads an aggregate. A miss is never an answer: the event store is.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import asdict
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking, TrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.utils import get_topic

from application.outcomes import SettleOutcome, VerifyOutcome
from domain.codes import Code
from domain.payment import Payment


class ResultCacheView(TrackingRecorder):
    """Where the results go (Redis in production), with the projection's tracking position."""

    @abstractmethod
    def payment(self, payment_id: str) -> dict[str, Any] | None:
        """What `record` last kept for the payment, or None (never seen, or expired)."""

    @abstractmethod
    def record(self, tracking: Tracking, *, payment_id: str | None = None, payment: dict[str, Any] | None = None,
               results: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        """Apply the writes with `tracking`, atomically; IntegrityError if `tracking` was applied before."""


class ResultCacheProjection(Projection[ResultCacheView]):
    name = "result_cache"
    topics = tuple(get_topic(cls) for cls in (
        Payment.Received, Payment.Approved, Payment.Rejected, Payment.Confirmed, Payment.Failed,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        self.view.record(tracking)

    @process_event.register
    def _(self, e: Payment.Received, tracking: Tracking) -> None:
        payment = {"key": e.idempotency_key, "terms": e.terms_digest, "network": e.network, "payer": None}
        self.view.record(tracking, payment_id=str(e.originator_id), payment=payment)

    @process_event.register
    def _(self, e: Payment.Approved, tracking: Tracking) -> None:
        self._verified(e, tracking, e.payer, VerifyOutcome(is_valid=True, payer=e.payer))

    @process_event.register
    def _(self, e: Payment.Rejected, tracking: Tracking) -> None:
        details = e.details if e.reason == Code.SIMULATION_FAILED.value else None
        self._verified(e, tracking, e.payer, VerifyOutcome.invalid(e.reason, e.payer, details))

    @process_event.register
    def _(self, e: Payment.Confirmed, tracking: Tracking) -> None:
        payment = self.view.payment(str(e.originator_id))
        if payment is None:
            return self.view.record(tracking)
        outcome = SettleOutcome(success=True, transaction=e.signature, network=payment["network"],
                                payer=payment["payer"])
        self.view.record(tracking, results={(payment["key"], "settle"): _entry(payment, outcome)})

    @process_event.register
    def _(self, e: Payment.Failed, tracking: Tracking) -> None:
        payment = self.view.payment(str(e.originator_id))
        if payment is None:
            return self.view.record(tracking)
        outcome = SettleOutcome.failed(e.reason, payment["payer"], payment["network"], e.signature)
        self.view.record(tracking, results={(payment["key"], "settle"): _entry(payment, outcome)})

    def _verified(self, e: Payment.Event, tracking: Tracking, payer: str | None, outcome: VerifyOutcome) -> None:
        payment = self.view.payment(str(e.originator_id))
        if payment is None:  # its state expired: leave the answer to the event store
            return self.view.record(tracking)
        payment = {**payment, "payer": payer}
        self.view.record(tracking, payment_id=str(e.originator_id), payment=payment,
                         results={(payment["key"], "verify"): _entry(payment, outcome)})


def _entry(payment: dict[str, Any], outcome: VerifyOutcome | SettleOutcome) -> dict[str, Any]:
    return {"terms": payment["terms"], "outcome": asdict(outcome)}
