"""The payments read model: one row per payment (merchant, state, amount, asset, network, payTo, payer, on-chain
transaction, times) and its event timeline, for the console's payments pages and overview, `GET /v1/payments/{id}`
and the auditor's look-ups by handle.

Events are read generically: the state each payment event leads to is named by its class, and fields are read
with defaults, so events that gain fields (or new payment events, which only advance the tracking) need no change
here. It never loads an aggregate.

Times: `settled_at` is when a payment was CONFIRMED (money moved) and only then; a FAILED settlement's time is
`failed_at`. Until 2026-11-28 a FAILED payment's time was written to `settled_at`; a view of that shape (no
`failed_at`) is rebuilt from the event store when a process first opens it (projections/reshape.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from application.payments import Payments
from domain.clients import merchant_of
from domain.payment import Payment
from projections.reshape import ReshapedView, Shape
from projections.sql import Batch, values

# Each payment event and the state it records (Received creates the row).
STATES: dict[type[Any], str] = {
    Payment.Received: "RECEIVED", Payment.Approved: "APPROVED", Payment.Rejected: "REJECTED",
    Payment.SettlementSubmitted: "SUBMITTED", Payment.Confirmed: "CONFIRMED", Payment.Failed: "FAILED",
}
# Every event class of a Payment, present and future: each enters the timeline.
EVENTS = tuple(v for v in vars(Payment).values() if isinstance(v, type) and issubclass(v, Payment.Event)
               and v not in (Payment.Event, Payment.Created))
COLUMNS = ("payment_id", "client_id", "merchant_id", "idempotency_key", "client_signature", "message_hash", "state",
           "verify_outcome", "amount", "asset", "network", "pay_to", "payer", "transaction_signature", "reason",
           "received_at", "updated_at", "settled_at", "failed_at")
MAX_PAGE = 200


@dataclass(frozen=True)
class PaymentRow:
    payment_id: str
    client_id: str
    merchant_id: str | None
    idempotency_key: str
    client_signature: str
    message_hash: str | None
    state: str
    verify_outcome: str | None
    amount: int
    asset: str
    network: str
    pay_to: str
    payer: str | None
    transaction_signature: str | None
    reason: str | None
    received_at: str
    updated_at: str
    settled_at: str | None  # when it was CONFIRMED (money moved); None otherwise
    failed_at: str | None  # when its settlement FAILED (no money moved); None otherwise

    @classmethod
    def from_values(cls, row: list[Any]) -> PaymentRow:
        fields = dict(zip(COLUMNS, row, strict=True))
        return cls(**{**fields, "amount": int(fields["amount"])})

    def as_dict(self) -> dict[str, Any]:
        """The wire shape (camelCase, amount as a string of atomic units)."""
        return {
            "id": self.payment_id, "state": self.state, "verifyOutcome": self.verify_outcome,
            "amount": str(self.amount), "asset": self.asset, "network": self.network, "payTo": self.pay_to,
            "payer": self.payer, "transaction": self.transaction_signature, "reason": self.reason,
            "idempotencyKey": self.idempotency_key, "receivedAt": self.received_at, "updatedAt": self.updated_at,
            "settledAt": self.settled_at, "failedAt": self.failed_at,
        }


@dataclass(frozen=True)
class TimelineEvent:
    version: int
    type: str
    recorded_at: str
    fields: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "type": self.type, "recordedAt": self.recorded_at, "fields": self.fields}


@dataclass(frozen=True)
class DayFigures:
    """One merchant's UTC day: verification outcomes (Approved or Rejected, a settle's own check included),
    settlement outcomes (Confirmed or Failed) and the settled volume (amounts of the Confirmed, atomic units)."""

    verifies: int
    settles: int
    settled: int


VERIFIES, SETTLES = ("Payment.Approved", "Payment.Rejected"), ("Payment.Confirmed", "Payment.Failed")


@dataclass(frozen=True)
class PaymentPage:
    items: list[PaymentRow]
    total: int
    more: bool = False  # rows follow this page


class PaymentListView(ReshapedView):
    tables = (
        "CREATE TABLE IF NOT EXISTS payment_list (payment_id TEXT PRIMARY KEY, client_id TEXT NOT NULL, "
        "merchant_id TEXT, idempotency_key TEXT NOT NULL, client_signature TEXT NOT NULL, message_hash TEXT, "
        "state TEXT NOT NULL, "
        "verify_outcome TEXT, amount TEXT NOT NULL, asset TEXT NOT NULL, network TEXT NOT NULL, pay_to TEXT NOT NULL, "
        "payer TEXT, transaction_signature TEXT, reason TEXT, received_at TEXT NOT NULL, updated_at TEXT NOT NULL, "
        "settled_at TEXT, failed_at TEXT)",
        "CREATE TABLE IF NOT EXISTS payment_list_events (payment_id TEXT NOT NULL, version INTEGER NOT NULL, "
        "type TEXT NOT NULL, recorded_at TEXT NOT NULL, fields TEXT NOT NULL, PRIMARY KEY (payment_id, version))",
        "CREATE INDEX IF NOT EXISTS payment_list_merchant ON payment_list (merchant_id, received_at DESC)",
        "CREATE INDEX IF NOT EXISTS payment_list_received ON payment_list (received_at DESC, payment_id)",
        "CREATE INDEX IF NOT EXISTS payment_list_key ON payment_list (idempotency_key)",
        "CREATE INDEX IF NOT EXISTS payment_list_transaction ON payment_list (transaction_signature)",
        "CREATE INDEX IF NOT EXISTS payment_list_client_signature ON payment_list (client_signature)",
        "CREATE INDEX IF NOT EXISTS payment_list_message_hash ON payment_list (message_hash)",
        "CREATE INDEX IF NOT EXISTS payment_list_events_recorded ON payment_list_events (recorded_at, type)",
        # The settlement follow-up asks every 2 s for the SUBMITTED payments: without this it read every payment.
        "CREATE INDEX IF NOT EXISTS payment_list_state ON payment_list (state, received_at DESC, payment_id)",
    )
    # The shape before 2026-11-28: no `failed_at`, and a FAILED payment's time in `settled_at`.
    shape = Shape(Payments.name, ("payment_list", "failed_at"), ("payment_list", "payment_list_events"))

    def get_payment(self, payment_id: str) -> PaymentRow | None:
        rows = self.rows(f"SELECT {', '.join(COLUMNS)} FROM payment_list WHERE payment_id = ?", (payment_id,))
        return PaymentRow.from_values(rows[0]) if rows else None

    def find_ids(self, handle: str) -> list[str]:
        """Payments a handle names: id, idempotency key, on-chain transaction signature, client signature or
        transaction message hash."""
        rows = self.rows("SELECT payment_id FROM payment_list WHERE payment_id = ? OR idempotency_key = ? OR "
                         "transaction_signature = ? OR client_signature = ? OR message_hash = ? "
                         "ORDER BY received_at, payment_id", (handle, handle, handle, handle, handle))
        return [r[0] for r in rows]

    def get_timeline(self, payment_id: str) -> list[TimelineEvent]:
        rows = self.rows("SELECT version, type, recorded_at, fields FROM payment_list_events WHERE payment_id = ? "
                         "ORDER BY version", (payment_id,))
        return [TimelineEvent(int(r[0]), r[1], r[2], json.loads(r[3])) for r in rows]

    def get_page(self, *, merchant_id: str | None = None, state: str | None = None, network: str | None = None,
                 since: str | None = None, until: str | None = None, limit: int = 50, offset: int = 0,
                 after: tuple[str, str] | None = None) -> PaymentPage:
        """Newest first; `since`/`until` bound `received_at` (ISO 8601 UTC, inclusive / exclusive). `after` is the
        (received_at, payment_id) of the last row of the previous page: a keyset cursor, so payments arriving
        meanwhile neither repeat nor skip a row; `total` counts the whole filtered list."""
        where, params = ["1 = 1"], []
        for column, value in (("merchant_id", merchant_id), ("state", state), ("network", network)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if since is not None:
            where.append("received_at >= ?")
            params.append(since)
        if until is not None:
            where.append("received_at < ?")
            params.append(until)
        condition = " AND ".join(where)
        page_condition, page_params, size = condition, list(params), max(1, min(limit, MAX_PAGE))
        if after is not None:
            page_condition += " AND (received_at < ? OR (received_at = ? AND payment_id > ?))"
            page_params += [after[0], after[0], after[1]]
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.sql(f"SELECT COUNT(*) FROM payment_list WHERE {condition}"), tuple(params))
            total = int(values(c.fetchone())[0])
            c.execute(self.sql(f"SELECT {', '.join(COLUMNS)} FROM payment_list WHERE {page_condition} "
                               "ORDER BY received_at DESC, payment_id LIMIT ? OFFSET ?"),
                      (*page_params, size + 1, max(0, offset)))
            items = [PaymentRow.from_values(values(r)) for r in c.fetchall()]
        return PaymentPage(items[:size], total, len(items) > size)

    def iter_pages(self, merchant_id: str, *, state: str | None = None, since: str | None = None,
                   until: str | None = None, size: int = 1000) -> Iterator[list[PaymentRow]]:
        """The merchant's payments oldest first, `size` rows at a time, each page a keyset query after the last
        row of the one before (no OFFSET, no COUNT): a year of payments never sits in memory at once."""
        where, params = ["merchant_id = ?"], [merchant_id]
        for condition, value in (("state = ?", state), ("received_at >= ?", since), ("received_at < ?", until)):
            if value is not None:
                where.append(condition)
                params.append(value)
        after: tuple[str, str] | None = None
        while True:
            keyset, extra = ("", []) if after is None else (
                " AND (received_at > ? OR (received_at = ? AND payment_id > ?))", [after[0], after[0], after[1]])
            rows = [PaymentRow.from_values(r) for r in self.rows(
                f"SELECT {', '.join(COLUMNS)} FROM payment_list WHERE {' AND '.join(where)}{keyset} "
                "ORDER BY received_at, payment_id LIMIT ?", (*params, *extra, size))]
            if rows:
                yield rows
            if len(rows) < size:
                return
            after = (rows[-1].received_at, rows[-1].payment_id)

    def get_day(self, merchant_id: str, day: str) -> DayFigures:
        """The figures of `day` (YYYY-MM-DD, UTC), counted from the timeline: one writer, nothing kept twice."""
        start, end = f"{day}T00:00:00.000000Z", f"{_next_day(day)}T00:00:00.000000Z"
        rows = self.rows("SELECT e.type, COUNT(*), SUM(CAST(p.amount AS NUMERIC)) FROM payment_list_events e "
                         "JOIN payment_list p ON p.payment_id = e.payment_id WHERE e.recorded_at >= ? AND "
                         "e.recorded_at < ? AND e.type IN (?, ?, ?, ?) AND p.merchant_id = ? GROUP BY e.type",
                         (start, end, *VERIFIES, *SETTLES, merchant_id))
        counts = {r[0]: (int(r[1]), int(r[2] or 0)) for r in rows}
        return DayFigures(verifies=sum(counts.get(t, (0, 0))[0] for t in VERIFIES),
                          settles=sum(counts.get(t, (0, 0))[0] for t in SETTLES),
                          settled=counts.get("Payment.Confirmed", (0, 0))[1])

    def get_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table in key order: what a rebuilt copy is compared with."""
        return {
            "payment_list": [tuple(r) for r in self.rows(
                f"SELECT {', '.join(COLUMNS)} FROM payment_list ORDER BY payment_id")],
            "payment_list_events": [(r[0], int(r[1]), r[2], r[3], json.loads(r[4])) for r in self.rows(
                "SELECT payment_id, version, type, recorded_at, fields FROM payment_list_events "
                "ORDER BY payment_id, version")],
        }


class SqlitePaymentListView(PaymentListView, SQLiteTrackingRecorder):
    pass


class PostgresPaymentListView(PaymentListView, PostgresTrackingRecorder):
    paramstyle = "format"


class PaymentListProjection(Projection[PaymentListView]):
    """Inside a batch (`SqlView.batch`) the rows are kept in memory and written at its end, before it commits: a
    payment received in the batch is one INSERT with the state its later events of the batch left (a verify's
    Received and Approved: one row written once, not an INSERT and an UPDATE), the updates of a payment recorded
    before are one UPDATE, and the timeline rows one multi-row INSERT. Outside a batch each event is its own
    transaction, as before."""

    name = "payment_list"
    topics = tuple(get_topic(cls) for cls in EVENTS)

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        e, key, moment = domain_event, str(domain_event.originator_id), timestamp(domain_event.timestamp)
        state = STATES.get(type(e))
        row = _received_row(e, key, moment) if state == "RECEIVED" else None
        changes = _changes(state, e, moment) if row is None else {}
        event = (key, int(e.originator_version), type(e).__qualname__, moment, _fields_json(e))
        batch = self.view.current_batch()
        if batch is None:
            with self.view.tracked(tracking) as c:
                if row is not None:
                    c.execute(INSERT_PAYMENT, row)
                else:
                    c.execute(_update_statement(changes), (*changes.values(), key))
                c.execute(INSERT_EVENT, event)
            return
        new, updates, events = _pending(batch)
        if row is not None:
            new[key] = dict(zip(COLUMNS, row, strict=True))
        elif key in new:
            new[key].update(changes)
        else:
            updates.setdefault(key, {}).update(changes)
        events.append(event)
        batch.track(tracking)
        batch.before_commit(self.name, lambda: _write(batch))


INSERT_PAYMENT = f"INSERT INTO payment_list VALUES ({', '.join('?' * len(COLUMNS))})"
INSERT_EVENT = "INSERT INTO payment_list_events VALUES (?, ?, ?, ?, ?)"


def _received_row(e: Any, key: str, moment: str) -> tuple[Any, ...]:
    return (key, str(e.client_id), merchant_of(e.client_id), e.idempotency_key, getattr(e, "client_signature", ""),
            getattr(e, "message_hash", None), "RECEIVED", None, str(e.amount), e.asset, e.network, e.pay_to, None,
            None, None, moment, moment, None, None)


def _changes(state: str | None, e: Any, moment: str) -> dict[str, Any]:
    """The columns an event other than Received sets; one with no state (SuccessAnswered, …) only touches the
    row (its timeline row is the rest)."""
    if state is None:
        return {"updated_at": moment}
    changes: dict[str, Any] = {"state": state, "updated_at": moment}
    if state in ("APPROVED", "REJECTED"):
        changes["verify_outcome"] = state
    if getattr(e, "payer", None):
        changes["payer"] = e.payer
    if getattr(e, "signature", None):
        changes["transaction_signature"] = e.signature
    if getattr(e, "reason", None):
        changes["reason"] = e.reason
    if state == "CONFIRMED":
        changes["settled_at"] = moment
    elif state == "FAILED":
        changes["failed_at"] = moment
    return changes


def _update_statement(changes: dict[str, Any]) -> str:
    return f"UPDATE payment_list SET {', '.join(f'{c} = ?' for c in changes)} WHERE payment_id = ?"


def _pending(batch: Batch) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[tuple[Any, ...]]]:
    """The batch's pending writes: new rows by payment, changes to earlier rows by payment, timeline rows."""
    pending: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[tuple[Any, ...]]] = \
        batch.state.setdefault("payment_list", ({}, {}, []))
    return pending


def _write(batch: Batch) -> None:
    new, updates, events = _pending(batch)
    batch.executemany(INSERT_PAYMENT, [tuple(row.values()) for row in new.values()])
    for key, changes in updates.items():
        batch.execute(_update_statement(changes), (*changes.values(), key))
    batch.executemany(INSERT_EVENT, events)


ENVELOPE = frozenset({"originator_id", "originator_version", "timestamp", "originator_topic"})


def fields(domain_event: Any) -> dict[str, Any]:
    """Every recorded field of an event but its envelope, as JSON values."""
    return json.loads(_fields_json(domain_event))


def _fields_json(domain_event: Any) -> str:
    """`fields` as the timeline stores it (the same text: `json.dumps` of what this text decodes to is this)."""
    return json.dumps({k: v for k, v in vars(domain_event).items() if k not in ENVELOPE}, default=str)


def _next_day(day: str) -> str:
    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds: fixed width, so it also sorts as text."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- queries --------------------------------------------------------------------------------------------------


def list_payments(view: PaymentListView, **filters: Any) -> PaymentPage:
    return view.get_page(**filters)


def get_payment_for(view: PaymentListView, payment_id: str, client_id: str) -> PaymentRow | None:
    """The payment when `client_id` made it; None otherwise (so a stranger cannot tell it exists)."""
    row = view.get_payment(payment_id)
    return row if row is not None and row.client_id == client_id else None
