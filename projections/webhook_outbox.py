"""The webhook outbox: projections that turn events into messages for every subscribed endpoint.

`WebhookEndpointsProjection` follows the Webhooks application (the endpoints table); the outbox projections follow
Payments, Listings and Merchants. Each event is written with its tracking record in one transaction: the message
and one delivery per subscribed, enabled endpoint of its merchant, exactly once however often a worker restarts.

An endpoint hears the events that happened after it was created. The outbox reads the endpoints table, which
another projection fills, so the worker sets `horizon` to the moment it last brought the endpoints up to date and
an outbox projection stops (`NotYet`) at the first event newer than that, to take it up again once the endpoints
have caught up: an event is never fanned out against an endpoints table older than itself. The events of the batch
before it are applied and committed (`projections.runner.Later`); under steady traffic a batch nearly always ends
with an event newer than the horizon, and rolling the whole batch back made the worker apply it again and again.

Payloads follow Standard Webhooks (`type`, `timestamp`, `data`), carry the public fields of the payment (never the
transaction bytes, a signature of the client, or any secret) and stay under 20 KB.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from eventsourcing.utils import get_topic

from domain.clients import merchant_of
from domain.listing import DiscoveryListing
from domain.merchant import Merchant, merchant_id
from domain.payment import Payment
from domain.proxy_service import ProxyService
from domain.webhook import WebhookEndpoint, message_id
from projections.runner import Later
from projections.sql import Batch
from projections.webhooks import CANCELLED, PENDING, WebhooksView

MAX_PAYLOAD = 20 * 1024
MAX_TEXT = 1024  # a free-text field (a rejection message, a URL) is cut to this many characters


class NotYet(Later):
    """The event is newer than the endpoints the outbox knows of: take it up again after they catch up."""


def iso(moment: datetime) -> str:
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def payload(kind: str, moment: datetime, data: dict[str, Any]) -> str:
    """Compact JSON, as signed and sent; free text cut so the whole stays under MAX_PAYLOAD."""
    data = {k: (v[:MAX_TEXT] if isinstance(v, str) else v) for k, v in data.items()}
    body = json.dumps({"type": kind, "timestamp": iso(moment), "data": data}, separators=(",", ":"),
                      sort_keys=True)
    if len(body.encode()) >= MAX_PAYLOAD:  # only nested client-supplied values can get here: drop them
        data = {k: v for k, v in data.items() if not isinstance(v, dict | list)}
        body = json.dumps({"type": kind, "timestamp": iso(moment), "data": data}, separators=(",", ":"),
                          sort_keys=True)
    return body


class WebhookEndpointsProjection(Projection[WebhooksView]):
    name = "webhook_endpoints"
    topics = tuple(get_topic(cls) for cls in (
        WebhookEndpoint.Created, WebhookEndpoint.UrlChanged, WebhookEndpoint.EventsChanged,
        WebhookEndpoint.Disabled, WebhookEndpoint.Enabled, WebhookEndpoint.SecretRotated, WebhookEndpoint.Deleted,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: WebhookEndpoint.Created, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO webhook_endpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?)",
                      (str(e.originator_id), e.merchant, str(merchant_id(e.merchant)), e.url, json.dumps(e.events),
                       True, "", False, e.sealed_secret, e.timestamp.timestamp()))

    @process_event.register
    def _(self, e: WebhookEndpoint.UrlChanged, tracking: Tracking) -> None:
        self._set(tracking, e, "url = ?", e.url)

    @process_event.register
    def _(self, e: WebhookEndpoint.EventsChanged, tracking: Tracking) -> None:
        self._set(tracking, e, "events = ?", json.dumps(e.events))

    @process_event.register
    def _(self, e: WebhookEndpoint.Disabled, tracking: Tracking) -> None:
        self._set(tracking, e, "enabled = ?, disabled_reason = ?", False, e.reason)

    @process_event.register
    def _(self, e: WebhookEndpoint.Enabled, tracking: Tracking) -> None:
        self._set(tracking, e, "enabled = ?, disabled_reason = ?", True, "")

    @process_event.register
    def _(self, e: WebhookEndpoint.SecretRotated, tracking: Tracking) -> None:
        self._set(tracking, e, "previous_secret = sealed_secret, sealed_secret = ?, previous_until = ?",
                  e.sealed_secret, e.previous_until.timestamp())

    @process_event.register
    def _(self, e: WebhookEndpoint.Deleted, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE webhook_endpoints SET deleted = ?, enabled = ? WHERE endpoint_id = ?",
                      (True, False, str(e.originator_id)))
            c.execute("UPDATE webhook_deliveries SET status = ? WHERE endpoint_id = ? AND status = ?",
                      (CANCELLED, str(e.originator_id), PENDING))

    def _set(self, tracking: Tracking, e: Any, assignments: str, *params: Any) -> None:
        with self.view.tracked(tracking) as c:
            c.execute(f"UPDATE webhook_endpoints SET {assignments} WHERE endpoint_id = ?",
                      (*params, str(e.originator_id)))


class _Outbox(Projection[WebhooksView]):
    horizon: datetime | None = None  # set by the worker: events at or after it wait (see the module's doc)

    def _wait_for_endpoints(self, e: Any) -> None:
        if self.horizon is not None and e.timestamp >= self.horizon:
            raise NotYet(f"event at {e.timestamp} is newer than the endpoints ({self.horizon})")

    def _subject(self, c: Any, subject_id: str) -> tuple[str, dict[str, Any]] | None:
        batch = self.view.current_batch()
        if batch is not None and subject_id in (pending := _pending_subjects(batch)):
            merchant, data, _ = pending[subject_id]
            return merchant, data
        c.execute("SELECT merchant_id, data FROM webhook_subjects WHERE subject_id = ?", (subject_id,))
        rows = c.fetchall()
        return (rows[0][0], json.loads(rows[0][1])) if rows else None

    def _keep(self, c: Any, subject_id: str, merchant: str, data: dict[str, Any], *, new: bool = False) -> None:
        batch = self.view.current_batch()
        if batch is not None:  # written once at the batch's end (`_write_subjects`)
            pending = _pending_subjects(batch)
            kept = pending.get(subject_id)
            pending[subject_id] = (merchant, data, new or (kept is not None and kept[2]))
            batch.before_commit("webhook_subjects", lambda: _write_subjects(batch))
        elif new:
            c.execute("INSERT INTO webhook_subjects VALUES (?, ?, ?)", (subject_id, merchant, json.dumps(data)))
        else:
            c.execute("UPDATE webhook_subjects SET data = ?, merchant_id = ? WHERE subject_id = ?",
                      (json.dumps(data), merchant, subject_id))

    def _enqueue(self, c: Any, e: Any, merchant: str, kind: str, data: dict[str, Any]) -> int:
        """The message and a delivery to each enabled endpoint of the merchant that subscribes to `kind` and
        existed when the event happened; how many deliveries."""
        moment = e.timestamp.timestamp()
        targets = [row[0] for row in self._endpoints(c, merchant)
                   if kind in json.loads(row[1]) and float(row[2]) <= moment]
        if not targets:
            return 0
        msg_id, now = message_id(e.originator_id, e.originator_version), datetime.now(UTC).timestamp()
        c.execute("INSERT INTO webhook_messages VALUES (?, ?, ?, ?, ?)",
                  (msg_id, merchant, kind, moment, payload(kind, e.timestamp, data)))
        for endpoint_id in sorted(targets):
            c.execute("INSERT INTO webhook_deliveries VALUES (?, ?, ?, 0, ?, NULL, NULL, ?, NULL)",
                      (msg_id, endpoint_id, PENDING, now, now))
        return len(targets)

    def _endpoints(self, c: Any, merchant: str) -> list[list[Any]]:
        """(endpoint_id, events, created_at) of the merchant's enabled endpoints; read once per batch (nothing in
        an outbox batch changes them: the endpoints projection runs before it)."""
        batch = self.view.current_batch()
        cached: dict[str, list[list[Any]]] = batch.state.setdefault("webhook_endpoints", {}) if batch else {}
        if merchant not in cached:
            c.execute("SELECT endpoint_id, events, created_at FROM webhook_endpoints WHERE merchant_id = ? "
                      "AND enabled = ? AND deleted = ?", (merchant, True, False))
            cached[merchant] = c.fetchall()
        return cached[merchant]


def _pending_subjects(batch: Batch) -> dict[str, tuple[str, dict[str, Any], bool]]:
    """The batch's subjects to write: (merchant, data, new) by subject."""
    pending: dict[str, tuple[str, dict[str, Any], bool]] = batch.state.setdefault("webhook_subjects", {})
    return pending


def _write_subjects(batch: Batch) -> None:
    pending = _pending_subjects(batch)
    batch.executemany("INSERT INTO webhook_subjects VALUES (?, ?, ?)",
                      [(s, merchant, json.dumps(data)) for s, (merchant, data, new) in pending.items() if new])
    batch.executemany("UPDATE webhook_subjects SET data = ?, merchant_id = ? WHERE subject_id = ?",
                      [(json.dumps(data), merchant, s) for s, (merchant, data, new) in pending.items() if not new])


class PaymentWebhooksProjection(_Outbox):
    name = "webhook_payments"
    topics = tuple(get_topic(cls) for cls in (
        Payment.Received, Payment.Approved, Payment.Rejected, Payment.SettlementSubmitted, Payment.Confirmed,
        Payment.Failed,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: Payment.Received, tracking: Tracking) -> None:
        merchant = merchant_of(e.client_id)
        with self.view.tracked(tracking) as c:
            if merchant is not None:  # an anonymous payment has nobody to tell
                resource = e.resource if isinstance(e.resource, dict) else {}
                self._keep(c, str(e.originator_id), merchant, {
                    "id": str(e.originator_id), "network": e.network, "asset": e.asset, "amount": str(e.amount),
                    "payTo": e.pay_to, "resource": str(resource.get("url") or "") or None,
                }, new=True)

    @process_event.register
    def _(self, e: Payment.Approved, tracking: Tracking) -> None:
        self._outcome(e, tracking, "payment.approved", payer=e.payer)

    @process_event.register
    def _(self, e: Payment.Rejected, tracking: Tracking) -> None:
        self._outcome(e, tracking, "payment.rejected", payer=e.payer, reason=e.reason, message=e.message)

    @process_event.register
    def _(self, e: Payment.SettlementSubmitted, tracking: Tracking) -> None:
        self._outcome(e, tracking, "payment.settlement_submitted", transaction=e.signature)  # the id, not the bytes

    @process_event.register
    def _(self, e: Payment.Confirmed, tracking: Tracking) -> None:
        self._outcome(e, tracking, "payment.confirmed", transaction=e.signature)

    @process_event.register
    def _(self, e: Payment.Failed, tracking: Tracking) -> None:
        self._outcome(e, tracking, "payment.failed", transaction=e.signature, reason=e.reason, message=e.message)

    def _outcome(self, e: Any, tracking: Tracking, kind: str, **fields: Any) -> None:
        self._wait_for_endpoints(e)
        with self.view.tracked(tracking) as c:
            subject = self._subject(c, str(e.originator_id))
            if subject is None:
                return
            merchant, data = subject
            data = {**data, **{k: v for k, v in fields.items() if k in ("payer", "transaction") and v}}
            self._keep(c, str(e.originator_id), merchant, data)
            extra = {k: v for k, v in fields.items() if k in ("reason", "message")}
            self._enqueue(c, e, merchant, kind, {**data, **extra, "status": kind.removeprefix("payment.")})


class ListingWebhooksProjection(_Outbox):
    name = "webhook_listings"
    topics = tuple(get_topic(cls) for cls in (DiscoveryListing.Registered, DiscoveryListing.MetadataUpdated))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: DiscoveryListing.Registered, tracking: Tracking) -> None:
        self._wait_for_endpoints(e)
        data = {"id": str(e.originator_id), "resource": e.resource, "method": e.method,
                "type": str((e.details or {}).get("type") or "http"), "lastUpdated": iso(e.verified_at)}
        with self.view.tracked(tracking) as c:
            merchant = merchant_of(e.owner)
            self._keep(c, str(e.originator_id), merchant or "", data, new=True)
            if merchant is not None:
                self._enqueue(c, e, merchant, "listing.registered", data)

    @process_event.register
    def _(self, e: DiscoveryListing.MetadataUpdated, tracking: Tracking) -> None:
        self._wait_for_endpoints(e)
        with self.view.tracked(tracking) as c:
            subject = self._subject(c, str(e.originator_id))
            if subject is None:
                return
            merchant = merchant_of(e.owner)
            data = {**subject[1], "type": str((e.details or {}).get("type") or subject[1]["type"]),
                    "lastUpdated": iso(e.verified_at)}
            self._keep(c, str(e.originator_id), merchant or "", data)
            if merchant is not None:
                self._enqueue(c, e, merchant, "listing.updated", data)


class MerchantWebhooksProjection(_Outbox):
    name = "webhook_merchants"
    topics = tuple(get_topic(cls) for cls in (Merchant.Registered, Merchant.KeyRevoked))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: Merchant.Registered, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            self._keep(c, str(e.originator_id), str(e.originator_id), {"merchant": e.name}, new=True)

    @process_event.register
    def _(self, e: Merchant.KeyRevoked, tracking: Tracking) -> None:
        self._wait_for_endpoints(e)
        with self.view.tracked(tracking) as c:
            subject = self._subject(c, str(e.originator_id))
            name = subject[1]["merchant"] if subject else None
            self._enqueue(c, e, str(e.originator_id), "key.revoked", {"merchant": name, "prefix": e.prefix})


class ServiceWebhooksProjection(_Outbox):
    name = "webhook_services"
    topics = tuple(get_topic(cls) for cls in (ProxyService.Created, ProxyService.Renamed, ProxyService.Deactivated))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: ProxyService.Created, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            self._keep(c, str(e.originator_id), str(merchant_id(e.merchant)),
                       {"id": str(e.originator_id), "name": e.name, "slug": e.slug}, new=True)

    @process_event.register
    def _(self, e: ProxyService.Renamed, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            subject = self._subject(c, str(e.originator_id))
            if subject is not None:
                self._keep(c, str(e.originator_id), subject[0], {**subject[1], "name": e.name})

    @process_event.register
    def _(self, e: ProxyService.Deactivated, tracking: Tracking) -> None:
        self._wait_for_endpoints(e)
        with self.view.tracked(tracking) as c:
            subject = self._subject(c, str(e.originator_id))
            if subject is not None:
                self._enqueue(c, e, subject[0], "service.deactivated", {**subject[1], "status": "deactivated"})
