"""The money read model: settled USDC and settled payments per merchant, service and UTC day or hour, for the
console's overview chart, and what each merchant payment paid for (its service and resource), for the payments
pages and the CSV export.

Follows the Payments log with its own tracking, so on an existing store it builds from the first event. A
merchant payment's Received records its service, resource, amount and whether the asset is the network's USDC; its
Confirmed adds the amount to the day and the hour (UTC, of the Confirmed event) of that service, once: the event
store records one Confirmed per payment. Anonymous payments belong to no merchant and are left out; payments in
another asset than USDC are listed with their service but add nothing to the USDC figures.

A payment's service is read from its resource URL: its host and first path segment (`proxy.example.com/weather-1a2b`,
for the proxy the service's slug; `api.example.com/v1` for a merchant's own server), `(no resource)` without one.
The buckets are never pruned (24 rows a day per service), so a rebuild gives the same rows whenever it runs.
The overview reads at most 30 + 48 buckets per service, whatever the number of payments.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import singledispatchmethod
from typing import Any, Protocol
from urllib.parse import urlsplit

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from domain.clients import merchant_of
from domain.money import is_usdc
from domain.payment import Payment
from projections.payment_list import EVENTS, timestamp
from projections.sql import SqlView

NO_RESOURCE = "(no resource)"
DAY, HOUR = "day", "hour"


def service_of(resource: Any) -> tuple[str, str]:
    """(service, resource URL) of a payment's recorded resource."""
    url = resource.get("url") if isinstance(resource, dict) else None
    if not isinstance(url, str) or not url:
        return NO_RESOURCE, ""
    parts = urlsplit(url)
    first = parts.path.lstrip("/").split("/", 1)[0]
    host = parts.netloc or url
    return (f"{host}/{first}" if first else host), url


@dataclass(frozen=True)
class Bucket:
    bucket: str  # YYYY-MM-DD (day) or YYYY-MM-DDTHH (hour), UTC
    service: str
    settled: int  # atomic units of USDC
    payments: int


class PaymentVolumeView(SqlView):
    tables = (
        "CREATE TABLE IF NOT EXISTS payment_volume_payments (payment_id TEXT PRIMARY KEY, merchant_id TEXT NOT NULL, "
        "service TEXT NOT NULL, resource TEXT NOT NULL, amount BIGINT NOT NULL, usdc INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS payment_volume_buckets (merchant_id TEXT NOT NULL, span TEXT NOT NULL, "
        "bucket TEXT NOT NULL, service TEXT NOT NULL, settled BIGINT NOT NULL, payments INTEGER NOT NULL, "
        "PRIMARY KEY (merchant_id, span, bucket, service))",
    )

    def get_buckets(self, merchant_id: str, span: str, first: str, last: str) -> list[Bucket]:
        """The buckets of `span` from `first` to `last` (both included), oldest first."""
        rows = self.rows("SELECT bucket, service, settled, payments FROM payment_volume_buckets WHERE merchant_id = ? "
                         "AND span = ? AND bucket >= ? AND bucket <= ? ORDER BY bucket, service",
                         (merchant_id, span, first, last))
        return [Bucket(r[0], r[1], int(r[2]), int(r[3])) for r in rows]

    def get_services(self, payment_ids: list[str]) -> dict[str, tuple[str, str]]:
        """(service, resource URL) of each of these payments that the read model has."""
        found: dict[str, tuple[str, str]] = {}
        for start in range(0, len(payment_ids), 500):
            chunk = payment_ids[start:start + 500]
            rows = self.rows("SELECT payment_id, service, resource FROM payment_volume_payments WHERE payment_id IN "
                             f"({', '.join('?' * len(chunk))})", chunk)
            found.update({r[0]: (r[1], r[2]) for r in rows})
        return found


class VolumeReader(Protocol):
    """What the pages and the export read of the money read model: `PaymentVolumeView`, or `NamedVolume` over it."""

    def get_buckets(self, merchant_id: str, span: str, first: str, last: str) -> list[Bucket]: ...

    def get_services(self, payment_ids: list[str]) -> dict[str, tuple[str, str]]: ...


@dataclass(frozen=True)
class NamedVolume:
    """The money read model as one merchant reads it: a series of one of its proxy services is named by the
    service's name ("My Quotes") instead of the `host/slug` recorded (`127.0.0.1:8405/my-quotes`); every other
    series (a merchant's own server, `(no resource)`) as recorded. Names are read when shown, so a rename renames
    the history too; the read model keeps the recorded series, so nothing is rebuilt."""

    view: VolumeReader
    slugs: dict[str, str]  # slug → the name shown
    proxy_host: str  # the proxy's public host (PAYWARDEN_PROXY_URL); empty: any host

    @classmethod
    def of(cls, view: VolumeReader, services: Iterable[tuple[str, str]], proxy_host: str) -> NamedVolume:
        """Over `view`, with the merchant's live services as (slug, name); two services of one name are told apart
        by their slug (`Quotes (quotes-2)`)."""
        listed = list(services)
        twice = {name for name, n in Counter(name for _, name in listed).items() if n > 1}
        return cls(view, {slug: (f"{name} ({slug})" if name in twice else name) for slug, name in listed},
                   proxy_host)

    def name(self, service: str) -> str:
        host, _, slug = service.rpartition("/")
        named = self.slugs.get(slug) if host and (not self.proxy_host or host == self.proxy_host) else None
        return named or service

    def get_buckets(self, merchant_id: str, span: str, first: str, last: str) -> list[Bucket]:
        return [replace(b, service=self.name(b.service))
                for b in self.view.get_buckets(merchant_id, span, first, last)]

    def get_services(self, payment_ids: list[str]) -> dict[str, tuple[str, str]]:
        return {k: (self.name(service), url) for k, (service, url) in self.view.get_services(payment_ids).items()}


class SqlitePaymentVolumeView(PaymentVolumeView, SQLiteTrackingRecorder):
    pass


class PostgresPaymentVolumeView(PaymentVolumeView, PostgresTrackingRecorder):
    paramstyle = "format"


INSERT_PAYMENT = "INSERT INTO payment_volume_payments VALUES (?, ?, ?, ?, ?, ?)"
# A confirmed USDC payment's amount added to its bucket of `span` (the first two parameters: span, bucket), read from
# its row in the statement itself: a payment without one (anonymous, another asset) adds nothing. No answer is read,
# so a batch sends these with the inserts in one pipeline (`Cursor.write`).
ADD = ("INSERT INTO payment_volume_buckets SELECT merchant_id, ?, ?, service, amount, 1 FROM payment_volume_payments "
       "WHERE payment_id = ? AND usdc = 1 ON CONFLICT (merchant_id, span, bucket, service) "
       "DO UPDATE SET settled = payment_volume_buckets.settled + excluded.settled, "
       "payments = payment_volume_buckets.payments + 1")


class PaymentVolumeProjection(Projection[PaymentVolumeView]):
    name = "payment_volume"
    # Every payment event, though only Received and Confirmed change a row: the position then follows the whole
    # log, so waiting for a notification (`view.wait`) works whatever event it is.
    topics = tuple(get_topic(cls) for cls in EVENTS)

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: Payment.Received, tracking: Tracking) -> None:
        merchant = merchant_of(e.client_id)
        with self.view.tracked(tracking) as c:
            if merchant is not None:
                service, resource = service_of(e.resource)
                c.write(INSERT_PAYMENT, (str(e.originator_id), merchant, service,
                                         resource, int(e.amount), int(is_usdc(e.network, e.asset))))

    @process_event.register
    def _(self, e: Payment.Confirmed, tracking: Tracking) -> None:
        moment, payment_id = timestamp(e.timestamp), str(e.originator_id)
        with self.view.tracked(tracking) as c:
            c.write(ADD, (DAY, moment[:10], payment_id))
            c.write(ADD, (HOUR, moment[:13], payment_id))
