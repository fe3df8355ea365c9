"""The terminal result cache as a read model: verify and settle results written as Payments records them.

A duplicate request whose result is terminal is answered from this cache without the lock or the event store.
Each entry has the shape the Payments application replays: {"terms": digest, "outcome": {...}}, keyed by
idempotency key and operation. The projection keeps, per payment, what later events need (key, terms, network,
payer) in the view itself; it never loads an aggregate. A miss is never an answer: the event store is.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking, TrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.utils import get_topic

from application.outcomes import SettleOutcome, answered_entries, cache_entry, rejected_verify
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
    """Writes, from the events, what `application.outcomes.terminal_entries` says the cache holds."""

    name = "result_cache"
    topics = tuple(get_topic(cls) for cls in (
        Payment.Received, Payment.Approved, Payment.Rejected, Payment.Confirmed, Payment.SuccessAnswered,
        Payment.Failed,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        self.view.record(tracking)

    @process_event.register
    def _(self, e: Payment.Received, tracking: Tracking) -> None:
        payment = {"key": e.idempotency_key, "terms": e.terms_digest, "network": e.network, "payer": None,
                   "transaction": None}
        self.view.record(tracking, payment_id=str(e.originator_id), payment=payment)

    @process_event.register
    def _(self, e: Payment.Approved, tracking: Tracking) -> None:
        self._update(e, tracking, lambda payment: ({**payment, "payer": e.payer}, {}))

    @process_event.register
    def _(self, e: Payment.Rejected, tracking: Tracking) -> None:
        outcome = rejected_verify(e.reason, e.payer, e.details, e.message)
        self._update(e, tracking, lambda payment: (
            {**payment, "payer": e.payer}, {"verify": cache_entry(payment["terms"], outcome)}))

    @process_event.register
    def _(self, e: Payment.Confirmed, tracking: Tracking) -> None:
        if not e.answered:  # confirmed with nobody told yet: the next settle answers success, so nothing is final
            return self._update(e, tracking, lambda payment: ({**payment, "transaction": e.signature}, {}))
        self._update(e, tracking, lambda payment: (
            {**payment, "transaction": e.signature},
            answered_entries(payment["terms"], e.signature, payment["network"], payment["payer"], e.request_key)))

    @process_event.register
    def _(self, e: Payment.SuccessAnswered, tracking: Tracking) -> None:
        self._update(e, tracking, lambda payment: (payment, answered_entries(
            payment["terms"], payment["transaction"], payment["network"], payment["payer"], e.request_key)))

    @process_event.register
    def _(self, e: Payment.Failed, tracking: Tracking) -> None:
        self._update(e, tracking, lambda payment: (payment, {"settle": cache_entry(
            payment["terms"], SettleOutcome.failed(e.reason, payment["payer"], payment["network"], e.signature,
                                                   e.message))}))

    def _update(self, e: Payment.Event, tracking: Tracking,
                change: Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, dict[str, Any]]]]) -> None:
        payment = self.view.payment(str(e.originator_id))
        if payment is None:  # its state expired: leave the answer to the event store
            return self.view.record(tracking)
        payment, entries = change(payment)
        self.view.record(tracking, payment_id=str(e.originator_id), payment=payment,
                         results={(payment["key"], operation): entry for operation, entry in entries.items()})
