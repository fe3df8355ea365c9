"""The terminal result cache as a read model: verify and settle results written as Payments records them.

A duplicate settle whose result is terminal is answered from this cache while another request holds the payment's
lock (application/payment_store.py), without the event store.
This projection is the cache's one writer: per payment it folds the events into `PaymentFacts` and writes what
`application.outcomes.terminal_entries` (the functions the live answer calls) says is final, keyed by idempotency
key and operation, in the shape the Payments application replays. It never loads an aggregate. A miss is never an
answer: the event store is. The view is Redis in production (`interfaces/adapters/redis.py`), else the SQL tables
below, filled by the projection worker like every other read model.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import replace
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking, TrackingRecorder
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from application.outcomes import PaymentFacts, terminal_entries
from domain.payment import Payment, PaymentState
from projections.sql import Batch, SqlView


class ResultCacheView(TrackingRecorder):
    """Where the results go, with the projection's tracking position; `get` is the `ResultCache` port."""

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
        facts = PaymentFacts(idempotency_key=e.idempotency_key, terms_digest=e.terms_digest, network=e.network)
        self.view.record(tracking, payment_id=str(e.originator_id), payment=facts.as_json())

    @process_event.register
    def _(self, e: Payment.Approved, tracking: Tracking) -> None:
        self._update(e, tracking, state=PaymentState.APPROVED, verify_outcome=PaymentState.APPROVED, payer=e.payer)

    @process_event.register
    def _(self, e: Payment.Rejected, tracking: Tracking) -> None:
        self._update(e, tracking, state=PaymentState.REJECTED, verify_outcome=PaymentState.REJECTED,
                     reason=e.reason, message=e.message, payer=e.payer, details=e.details)

    @process_event.register
    def _(self, e: Payment.Confirmed, tracking: Tracking) -> None:
        # Confirmed with nobody told yet (`answered` False): the next settle answers success, so nothing is final.
        self._update(e, tracking, state=PaymentState.CONFIRMED, signature=e.signature, success_answered=e.answered,
                     answer_key=e.request_key if e.answered else None)

    @process_event.register
    def _(self, e: Payment.SuccessAnswered, tracking: Tracking) -> None:
        self._update(e, tracking, success_answered=True, answer_key=e.request_key)

    @process_event.register
    def _(self, e: Payment.Failed, tracking: Tracking) -> None:
        self._update(e, tracking, state=PaymentState.FAILED, settle_reason=e.reason, message=e.message,
                     signature=e.signature)

    def _update(self, e: Payment.Event, tracking: Tracking, **changes: Any) -> None:
        stored = self.view.payment(str(e.originator_id))
        facts = PaymentFacts.from_json(stored) if stored is not None else None
        if facts is None:  # its facts expired: leave the answer to the event store
            return self.view.record(tracking)
        facts = replace(facts, **changes)
        self.view.record(tracking, payment_id=str(e.originator_id), payment=facts.as_json(), results={
            (facts.idempotency_key, operation): entry for operation, entry in terminal_entries(facts).items()})


PUT_PAYMENT = ("INSERT INTO result_cache_payments VALUES (?, ?) "
               "ON CONFLICT (payment_id) DO UPDATE SET facts = excluded.facts")
PUT_RESULT = ("INSERT INTO result_cache_results VALUES (?, ?, ?) "
              "ON CONFLICT (idempotency_key, operation) DO UPDATE SET entry = excluded.entry")


class SqlResultCacheView(SqlView, ResultCacheView):
    """The result cache in SQL tables, for a deployment without Redis (the embedded default): the projection
    worker writes them, every web worker reads them (one indexed lookup per request).

    Inside a batch (`SqlView.batch`) the writes are kept in memory and each row is written once at the batch's
    end, before it commits: a payment's Received and Approved, which usually arrive in one batch, are one row
    written once instead of a write, a read and a rewrite. `payment` reads the batch's pending writes first."""

    tables = (
        "CREATE TABLE IF NOT EXISTS result_cache_payments (payment_id TEXT PRIMARY KEY, facts TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS result_cache_results (idempotency_key TEXT NOT NULL, operation TEXT NOT NULL, "
        "entry TEXT NOT NULL, PRIMARY KEY (idempotency_key, operation))",
    )

    def get(self, key: str, operation: str) -> dict[str, Any] | None:
        rows = self.rows("SELECT entry FROM result_cache_results WHERE idempotency_key = ? AND operation = ?",
                         (key, operation))
        return load_entry(rows[0][0]) if rows else None

    def payment(self, payment_id: str) -> dict[str, Any] | None:
        batch = self.current_batch()
        if batch is not None and payment_id in (pending := _pending(batch)[0]):
            return pending[payment_id]
        rows = self.rows("SELECT facts FROM result_cache_payments WHERE payment_id = ?", (payment_id,))
        return load_entry(rows[0][0]) if rows else None

    def record(self, tracking: Tracking, *, payment_id: str | None = None, payment: dict[str, Any] | None = None,
               results: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        batch = self.current_batch()
        if batch is not None:
            payments, entries = _pending(batch)
            if payment_id is not None and payment is not None:
                payments[payment_id] = payment
            entries.update(results or {})
            batch.track(tracking)
            batch.before_commit("result_cache", lambda: self._write(batch))
            return
        with self.tracked(tracking) as c:
            if payment_id is not None and payment is not None:
                c.execute(PUT_PAYMENT, (payment_id, _dumps(payment)))
            for (key, operation), entry in (results or {}).items():
                c.execute(PUT_RESULT, (key, operation, _dumps(entry)))

    def _write(self, batch: Batch) -> None:
        payments, entries = _pending(batch)
        batch.executemany(PUT_PAYMENT, [(p, _dumps(facts)) for p, facts in payments.items()])
        batch.executemany(PUT_RESULT, [(key, op, _dumps(entry)) for (key, op), entry in entries.items()])


def _pending(batch: Batch) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], dict[str, Any]]]:
    """The batch's pending writes: facts by payment, results by (idempotency key, operation)."""
    pending: tuple[dict[str, dict[str, Any]], dict[tuple[str, str], dict[str, Any]]] = \
        batch.state.setdefault("result_cache", ({}, {}))
    return pending


class SqliteResultCacheView(SqlResultCacheView, SQLiteTrackingRecorder):
    pass


class PostgresResultCacheView(SqlResultCacheView, PostgresTrackingRecorder):
    paramstyle = "format"


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def load_entry(raw: str | bytes | None) -> dict[str, Any] | None:
    """A stored entry of the result cache (SQL row or Redis value): its dict, or None when absent or unreadable (a
    miss, never an error)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
