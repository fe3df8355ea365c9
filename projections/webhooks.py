"""The webhooks read model and outbox: endpoints, messages, deliveries and every attempt, in one database.

Filled by the projections of `projections/webhook_outbox.py` (each write in one transaction with its tracking
record, so each event is enqueued exactly once per subscribed endpoint), and worked by the delivery worker through
`claim` / `record_attempt`. A claim takes a lease on the delivery: on PostgreSQL the due rows are picked with
`FOR UPDATE SKIP LOCKED`, on SQLite the single writer serializes the claim statement; either way the lease column
is what keeps two workers from sending one attempt at once, and what hands a killed worker's delivery to another
once it expires. Times are Unix seconds (floats).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteTrackingRecorder

from projections.sql import SqlView, rowcount, values

PENDING, DELIVERED, FAILED, CANCELLED = "pending", "delivered", "failed", "cancelled"
RESPONSE_EXCERPT = 1024  # characters of a receiver's answer kept with the attempt


@dataclass(frozen=True)
class Endpoint:
    id: str
    merchant: str
    url: str
    events: list[str]
    enabled: bool
    disabled_reason: str
    created_at: float

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "url": self.url, "events": self.events, "enabled": self.enabled,
                "disabledReason": self.disabled_reason or None}


@dataclass(frozen=True)
class Claimed:
    """One delivery this worker holds the lease of, with what sending it needs."""

    msg_id: str
    endpoint_id: str
    attempts: int  # attempts already made in this delivery's current cycle
    lease_token: str
    url: str
    payload: str
    sealed_secret: str
    previous_secret: str | None
    previous_until: float | None


@dataclass(frozen=True)
class Attempt:
    status_code: int | None
    outcome: str  # delivered, retry, failed, disabled, refused
    latency_ms: int
    response: str
    error: str
    webhook_timestamp: int


_COUNT = ("INSERT INTO webhook_counts VALUES ('{kind}', {name}, {delta}) "
          "ON CONFLICT (kind, name) DO UPDATE SET n = n + excluded.n;")
COUNTED = (
    "CREATE TABLE IF NOT EXISTS webhook_counts (kind TEXT NOT NULL, name TEXT NOT NULL, n INTEGER NOT NULL, "
    "PRIMARY KEY (kind, name))",
    # The first time only (no count of that kind yet, and the triggers below not made yet): what the tables hold.
    "INSERT INTO webhook_counts SELECT 'attempt', outcome, COUNT(*) FROM webhook_attempts "
    "WHERE NOT EXISTS (SELECT 1 FROM webhook_counts WHERE kind = 'attempt') GROUP BY outcome",
    "INSERT INTO webhook_counts SELECT 'delivery', status, COUNT(*) FROM webhook_deliveries "
    "WHERE NOT EXISTS (SELECT 1 FROM webhook_counts WHERE kind = 'delivery') GROUP BY status",
    "CREATE TRIGGER IF NOT EXISTS webhook_attempt_counted AFTER INSERT ON webhook_attempts BEGIN "
    + _COUNT.format(kind="attempt", name="NEW.outcome", delta=1) + " END",
    "CREATE TRIGGER IF NOT EXISTS webhook_delivery_counted AFTER INSERT ON webhook_deliveries BEGIN "
    + _COUNT.format(kind="delivery", name="NEW.status", delta=1) + " END",
    "CREATE TRIGGER IF NOT EXISTS webhook_delivery_recounted AFTER UPDATE OF status ON webhook_deliveries "
    "WHEN OLD.status IS NOT NEW.status BEGIN "
    + _COUNT.format(kind="delivery", name="OLD.status", delta=-1) + " "
    + _COUNT.format(kind="delivery", name="NEW.status", delta=1) + " END",
    "CREATE TRIGGER IF NOT EXISTS webhook_delivery_uncounted AFTER DELETE ON webhook_deliveries BEGIN "
    + _COUNT.format(kind="delivery", name="OLD.status", delta=-1) + " END",
)


class WebhooksView(SqlView):
    skip_locked = ""
    # Claims one after another (the count of a merchant's leases and the leases taken in one step): on SQLite the
    # single writer does it; PostgreSQL takes this transaction-scoped lock first.
    claim_lock = ""
    row_lock = ""  # PostgreSQL: the selected row is locked until the transaction ends
    tables: Sequence[str] = (
        "CREATE TABLE IF NOT EXISTS webhook_endpoints (endpoint_id TEXT PRIMARY KEY, merchant TEXT NOT NULL, "
        "merchant_id TEXT NOT NULL, url TEXT NOT NULL, events TEXT NOT NULL, enabled BOOLEAN NOT NULL, "
        "disabled_reason TEXT NOT NULL, deleted BOOLEAN NOT NULL, sealed_secret TEXT NOT NULL, "
        "previous_secret TEXT, previous_until DOUBLE PRECISION, created_at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX IF NOT EXISTS webhook_endpoints_merchant ON webhook_endpoints (merchant_id)",
        # What later events of a payment, listing or merchant need from its first one (public fields only).
        "CREATE TABLE IF NOT EXISTS webhook_subjects (subject_id TEXT PRIMARY KEY, merchant_id TEXT NOT NULL, "
        "data TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS webhook_messages (msg_id TEXT PRIMARY KEY, merchant_id TEXT NOT NULL, "
        "type TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, payload TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS webhook_deliveries (msg_id TEXT NOT NULL, endpoint_id TEXT NOT NULL, "
        "status TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_at DOUBLE PRECISION NOT NULL, "
        "lease_until DOUBLE PRECISION, lease_token TEXT, created_at DOUBLE PRECISION NOT NULL, "
        "finished_at DOUBLE PRECISION, PRIMARY KEY (msg_id, endpoint_id))",
        "CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at)",
        "CREATE TABLE IF NOT EXISTS webhook_attempts (attempt_id TEXT PRIMARY KEY, msg_id TEXT NOT NULL, "
        "endpoint_id TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, status_code INTEGER, outcome TEXT NOT NULL, "
        "latency_ms INTEGER NOT NULL, response TEXT NOT NULL, error TEXT NOT NULL, webhook_timestamp INTEGER NOT NULL)",
        "CREATE INDEX IF NOT EXISTS webhook_attempts_message ON webhook_attempts (msg_id, endpoint_id)",
    )

    # -- the delivery worker -----------------------------------------------------------------------------------

    def claim(self, now: float, lease_seconds: float, limit: int, exclude: list[str] | None = None,
              per_merchant: int | None = None) -> list[Claimed]:
        """Lease up to `limit` due deliveries of enabled endpoints (not those in `exclude`); nobody else sends them
        until the lease ends. Returned oldest event first.

        With `per_merchant`, a merchant holds at most that many leased deliveries at once (its leases of every
        worker counted), and the merchants take turns: each one's oldest due delivery comes before anyone's
        second, so one merchant's backlog of slow receivers never fills the senders. Claims run one after another
        (`claim_lock`), so two workers claiming at the same moment cannot both take a merchant's share."""
        token, exclude = uuid.uuid4().hex, exclude or []
        skip = f"AND d.endpoint_id NOT IN ({', '.join('?' for _ in exclude)}) " if exclude else ""
        due = ("FROM webhook_deliveries d JOIN webhook_endpoints e ON e.endpoint_id = d.endpoint_id "
               "WHERE d.status = ? AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until < ?) "
               f"AND e.enabled = ? {skip}")
        due_args: tuple[Any, ...] = (PENDING, now, now, True, *exclude)
        if per_merchant is None:
            chosen = f"SELECT d.msg_id, d.endpoint_id {due}ORDER BY d.next_attempt_at, d.created_at LIMIT ?"
            chosen_args: tuple[Any, ...] = (*due_args, limit)
        else:
            chosen = (
                "SELECT r.msg_id, r.endpoint_id FROM (SELECT d.msg_id, d.endpoint_id, d.next_attempt_at, "
                "d.created_at, e.merchant_id, ROW_NUMBER() OVER (PARTITION BY e.merchant_id "
                f"ORDER BY d.next_attempt_at, d.created_at, d.msg_id) AS turn {due}) r "
                "LEFT JOIN (SELECT be.merchant_id, COUNT(*) AS n FROM webhook_deliveries b JOIN webhook_endpoints be "
                "ON be.endpoint_id = b.endpoint_id WHERE b.status = ? AND b.lease_until >= ? "
                "GROUP BY be.merchant_id) busy ON busy.merchant_id = r.merchant_id "
                "WHERE r.turn + COALESCE(busy.n, 0) <= ? ORDER BY r.turn, r.next_attempt_at, r.created_at LIMIT ?")
            chosen_args = (*due_args, PENDING, now, per_merchant, limit)
        with self.datastore.transaction(commit=True) as c:
            if self.claim_lock:
                c.execute(self.claim_lock)
            c.execute(self.sql(
                "UPDATE webhook_deliveries SET lease_until = ?, lease_token = ? WHERE (msg_id, endpoint_id) IN ("
                f"SELECT d.msg_id, d.endpoint_id FROM webhook_deliveries d WHERE (d.msg_id, d.endpoint_id) IN ("
                f"{chosen}) AND (d.lease_until IS NULL OR d.lease_until < ?){self.skip_locked}) "
                "RETURNING msg_id, endpoint_id"),
                (now + lease_seconds, token, *chosen_args, now))
            keys = [tuple(values(r)) for r in c.fetchall()]
        claimed: list[tuple[float, Claimed]] = []
        for msg_id, endpoint_id in keys:
            rows = self.rows(
                "SELECT d.attempts, e.url, m.payload, e.sealed_secret, e.previous_secret, e.previous_until, "
                "m.created_at "
                "FROM webhook_deliveries d JOIN webhook_endpoints e ON e.endpoint_id = d.endpoint_id "
                "JOIN webhook_messages m ON m.msg_id = d.msg_id WHERE d.msg_id = ? AND d.endpoint_id = ?",
                (msg_id, endpoint_id))
            attempts, url, payload, sealed, previous, until, created = rows[0]
            claimed.append((float(created), Claimed(msg_id, endpoint_id, int(attempts), token, url, payload, sealed,
                                                    previous, until)))
        return [item for _, item in sorted(claimed, key=lambda pair: (pair[0], pair[1].msg_id))]

    def renew(self, tokens: Sequence[str], until: float) -> int:
        """Extend the leases of these claims, still held by the worker that is sending them, to `until`: a lease
        lapses only when its worker is gone, never while a sender waits on a slow receiver (which would free the
        merchant's share for another of its deliveries). How many leases were extended."""
        if not tokens:
            return 0
        marks = ", ".join("?" for _ in tokens)
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql(f"UPDATE webhook_deliveries SET lease_until = ? WHERE status = ? AND lease_token IN "
                               f"({marks})"), (until, PENDING, *tokens))
            return rowcount(c)

    def record_attempt(self, claimed: Claimed, attempt: Attempt, now: float, next_attempt_at: float | None) -> bool:
        """Record the attempt, and (if this worker still holds the lease) the delivery's new state: delivered,
        failed for good (`next_attempt_at` None), or pending again. False when the lease was lost meanwhile."""
        status = DELIVERED if attempt.outcome == "delivered" else PENDING if next_attempt_at is not None else FAILED
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql("INSERT INTO webhook_attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                      (uuid.uuid4().hex, claimed.msg_id, claimed.endpoint_id, now, attempt.status_code,
                       attempt.outcome, attempt.latency_ms, attempt.response[:RESPONSE_EXCERPT],
                       attempt.error[:RESPONSE_EXCERPT], attempt.webhook_timestamp))
            c.execute(self.sql(
                "UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, next_attempt_at = ?, "
                "lease_until = NULL, lease_token = NULL, finished_at = ? "
                "WHERE msg_id = ? AND endpoint_id = ? AND lease_token = ?"),
                (status, next_attempt_at if next_attempt_at is not None else now,
                 None if status == PENDING else now, claimed.msg_id, claimed.endpoint_id, claimed.lease_token))
            return bool(rowcount(c))

    # -- commands on the outbox (the API and CLI) -----------------------------------------------------------------

    def enqueue_test(self, endpoint: Endpoint, payload: str, msg_id: str, now: float,
                     at_most: int = 2**31 - 1) -> bool:
        """A `webhook.test` message to one endpoint, whatever it subscribes to, unless `at_most` tests already wait
        for it (then False). The count and the insert are one step: on SQLite the insert's statement takes the
        writer, on PostgreSQL the endpoint's row is locked first, so tests queued at the same instant cannot all
        pass the count."""
        merchant_id = _merchant_id(self, endpoint.id)
        with self.datastore.transaction(commit=True) as c:
            if self.row_lock:
                c.execute(self.sql(f"SELECT endpoint_id FROM webhook_endpoints WHERE endpoint_id = ?{self.row_lock}"),
                          (endpoint.id,))
            c.execute(self.sql(
                "INSERT INTO webhook_deliveries SELECT ?, ?, ?, 0, ?, NULL, NULL, ?, NULL WHERE (SELECT COUNT(*) "
                "FROM webhook_deliveries d JOIN webhook_messages m ON m.msg_id = d.msg_id WHERE d.endpoint_id = ? "
                "AND d.status = ? AND m.type = ?) < ?"),
                (msg_id, endpoint.id, PENDING, now, now, endpoint.id, PENDING, "webhook.test", at_most))
            if not rowcount(c):
                return False
            c.execute(self.sql("INSERT INTO webhook_messages VALUES (?, ?, ?, ?, ?)"),
                      (msg_id, merchant_id, "webhook.test", now, payload))
            return True

    def resend(self, endpoint_id: str, msg_id: str, now: float) -> bool:
        """Deliver one message to the endpoint again, now, with a fresh retry schedule."""
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql("UPDATE webhook_deliveries SET status = ?, attempts = 0, next_attempt_at = ?, "
                               "finished_at = NULL WHERE msg_id = ? AND endpoint_id = ? AND status <> ?"),
                      (PENDING, now, msg_id, endpoint_id, CANCELLED))
            return bool(rowcount(c))

    def replay_failed(self, endpoint_ids: list[str], since: float, now: float) -> int:
        """Every failed delivery to these endpoints created at or after `since` is pending again, now."""
        if not endpoint_ids:
            return 0
        marks = ", ".join("?" for _ in endpoint_ids)
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql(f"UPDATE webhook_deliveries SET status = ?, attempts = 0, next_attempt_at = ?, "
                               f"finished_at = NULL WHERE status = ? AND created_at >= ? AND endpoint_id IN ({marks})"),
                      (PENDING, now, FAILED, since, *endpoint_ids))
            return rowcount(c)

    # -- queries ------------------------------------------------------------------------------------------------

    def get_endpoint(self, endpoint_id: str) -> Endpoint | None:
        rows = self.rows("SELECT endpoint_id, merchant, url, events, enabled, disabled_reason, created_at "
                         "FROM webhook_endpoints WHERE endpoint_id = ? AND deleted = ?", (endpoint_id, False))
        return _endpoint(rows[0]) if rows else None

    def count_endpoints(self, merchant: str) -> int:
        return int(self.rows("SELECT COUNT(*) FROM webhook_endpoints WHERE merchant = ? AND deleted = ?",
                             (merchant, False))[0][0])

    def pending_tests(self, endpoint_id: str) -> int:
        return int(self.rows("SELECT COUNT(*) FROM webhook_deliveries d JOIN webhook_messages m ON m.msg_id = d.msg_id "
                             "WHERE d.endpoint_id = ? AND d.status = ? AND m.type = ?",
                             (endpoint_id, PENDING, "webhook.test"))[0][0])

    def list_endpoints(self, merchant: str) -> list[Endpoint]:
        rows = self.rows("SELECT endpoint_id, merchant, url, events, enabled, disabled_reason, created_at "
                         "FROM webhook_endpoints WHERE merchant = ? AND deleted = ? ORDER BY created_at, endpoint_id",
                         (merchant, False))
        return [_endpoint(r) for r in rows]

    def list_deliveries(self, endpoint_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The endpoint's latest deliveries, newest first, each with its attempts."""
        rows = self.rows("SELECT d.msg_id, m.type, d.status, d.attempts, d.next_attempt_at, d.created_at, "
                         "d.finished_at FROM webhook_deliveries d JOIN webhook_messages m ON m.msg_id = d.msg_id "
                         "WHERE d.endpoint_id = ? ORDER BY d.created_at DESC, d.msg_id LIMIT ?", (endpoint_id, limit))
        shown = [r[0] for r in rows]
        marks = ", ".join("?" for _ in shown) or "NULL"
        attempts = self.rows("SELECT msg_id, at, status_code, outcome, latency_ms, response, error "
                             f"FROM webhook_attempts WHERE endpoint_id = ? AND msg_id IN ({marks}) ORDER BY at",
                             (endpoint_id, *shown))
        by_msg: dict[str, list[dict[str, Any]]] = {}
        for msg_id, at, code, outcome, latency, response, error in attempts:
            by_msg.setdefault(msg_id, []).append({"at": at, "status": code, "outcome": outcome,
                                                  "latencyMs": latency, "response": response, "error": error})
        return [{"id": r[0], "type": r[1], "status": r[2], "nextAttemptAt": r[4] if r[2] == PENDING else None,
                 "createdAt": r[5], "finishedAt": r[6], "attempts": by_msg.get(r[0], [])} for r in rows]

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Attempts by outcome and deliveries by status, over every worker that ever ran (for /metrics)."""
        attempts = self.rows("SELECT outcome, COUNT(*) FROM webhook_attempts GROUP BY outcome")
        deliveries = self.rows("SELECT status, COUNT(*) FROM webhook_deliveries GROUP BY status")
        return {str(o): int(n) for o, n in attempts}, {str(s): int(n) for s, n in deliveries}

    def queue_stats(self, now: float) -> tuple[int, float]:
        """Deliveries still pending, and the age in seconds of the oldest of them (0 when none)."""
        count, oldest = self.rows("SELECT COUNT(*), MIN(created_at) FROM webhook_deliveries WHERE status = ?",
                                  (PENDING,))[0]
        return int(count), (now - float(oldest)) if oldest is not None else 0.0


def _endpoint(row: list[Any]) -> Endpoint:
    return Endpoint(row[0], row[1], row[2], json.loads(row[3]), bool(row[4]), row[5], float(row[6]))


def _merchant_id(view: WebhooksView, endpoint_id: str) -> str:
    return str(view.rows("SELECT merchant_id FROM webhook_endpoints WHERE endpoint_id = ?", (endpoint_id,))[0][0])


class SqliteWebhooksView(WebhooksView, SQLiteTrackingRecorder):
    """On SQLite the counts of `/metrics` are kept by triggers, in the transaction of every write to the two tables
    (whoever writes: the outbox projection, the delivery worker, a resend or replay from the console or the CLI), so
    a scrape reads a few rows instead of counting the tables: on the embedded default the scrape runs on the API
    worker's event loop, where `GROUP BY` over a million attempts held every request for ~300 ms. A database made
    before the counts existed has them filled from the tables once, in the same transaction that makes them.
    (PostgreSQL keeps the `GROUP BY`: there the scrape's wait yields to the worker's other requests, and counter
    rows that every webhook worker and the outbox update would serialize their transactions.)"""

    tables = (*WebhooksView.tables, *COUNTED)

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        rows = self.rows("SELECT kind, name, n FROM webhook_counts")
        return ({str(name): int(n) for kind, name, n in rows if kind == "attempt"},
                {str(name): int(n) for kind, name, n in rows if kind == "delivery"})


class PostgresWebhooksView(WebhooksView, PostgresTrackingRecorder):
    paramstyle = "format"
    skip_locked = " FOR UPDATE OF d SKIP LOCKED"
    row_lock = " FOR UPDATE"
    claim_lock = "SELECT pg_advisory_xact_lock(hashtext('paywarden webhook claims'))"
