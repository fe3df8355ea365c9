"""`paywarden-bench load`'s second half: every read model projected over the loaded history, each batch of a log read
and decoded once for all its followers, and the SQLite stores tuned for the load (`bulk_sqlite`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOAD_BATCH = 5000  # notifications per transaction of each read model during the load
BULK_CACHE_KIB = 256 * 1024  # each loaded SQLite store's page cache during the load
RECEIVED_TOPIC = "domain.payment:Payment.Received"


class RecentReceived:
    """The discovery follower's `ReceivedPayments` port during the load: the `Received` events of the batch being
    processed (decoded already) first, else the Payments event store, as `StoredPayments` reads it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.recent: dict[Any, Any] = {}

    def get_received(self, payment_id: Any) -> Any:
        return self.recent.get(payment_id) or self.inner.get_received(payment_id)


def catch_up_together(app: Any, projections: list[Any], received: RecentReceived | None = None,
                      batch: int = 500) -> int:
    """`catch_up` for several projections of one application's log: each batch of `batch` notifications is read
    and decoded once and handed to every projection that follows its topic and has not applied it yet. A view
    applies its share in one transaction (`SqlView.batch`); an `EventSourcedProjection` (the discovery
    follower) runs its own `policy` over its share and records the events that result with the batch's last
    position in one transaction, as its `process_event` does for one event (`_process_batch`). Returns how many
    notifications were read."""
    from eventsourcing.persistence import Tracking
    from eventsourcing.projection import Projection

    def position(projection: Any) -> int:
        recorder = projection.view if isinstance(projection, Projection) else projection.recorder
        return recorder.max_tracking_id(app.name) or 0

    read, seen = 0, 0
    while True:
        positions = [position(p) for p in projections]
        notifications = app.recorder.select_notifications(start=min(positions), limit=batch,
                                                          inclusive_of_start=False)
        if received is not None:
            received.recent = {}
        shares: list[list[Any]] = [[] for _ in projections]
        for n in notifications:
            event = None
            for share, projection, after in zip(shares, projections, positions, strict=True):
                if n.id > after and n.topic in projection.topics:
                    event = event or app.mapper.to_domain_event(n)
                    share.append((event, Tracking(app.name, n.id)))
            if received is not None and n.topic == RECEIVED_TOPIC:
                event = event or app.mapper.to_domain_event(n)
                received.recent[event.originator_id] = event
        # One projection after the other, each in its own transaction (none waits idle on another's work).
        for share, projection in zip(shares, projections, strict=True):
            if not share:
                continue
            if isinstance(projection, Projection):
                with projection.view.batch():
                    for event, tracking in share:
                        projection.process_event(event, tracking)
            else:
                _process_batch(projection, share)
        read += sum(1 for n in notifications if n.id > seen)  # a lagging position reads some twice
        seen = max([seen, *(n.id for n in notifications)])
        if len(notifications) < batch:
            return read


def _process_batch(projection: Any, share: list[Any]) -> None:
    """`EventSourcedProjection.process_event` for many events: `policy` for each, into one `ProcessingEvent`
    recorded with the last tracking. An aggregate the batch changed is read from the batch, not the store."""
    from eventsourcing.application import ProcessingEvent

    from domain.listing import claim_id, listing_id
    from projections.runner import record

    processing: ProcessingEvent[Any] = ProcessingEvent(tracking=share[-1][1])
    stored, stored_claim = projection.get_listing, projection.get_claim

    def get_listing(resource: str, method: str) -> Any:
        return processing.aggregates.get(listing_id(resource, method)) or stored(resource, method)

    def get_claim(resource: str) -> Any:
        return processing.aggregates.get(claim_id(resource)) or stored_claim(resource)

    projection.get_listing, projection.get_claim = get_listing, get_claim
    try:
        for event, _ in share:
            projection.policy(event, processing)
    finally:
        del projection.get_listing, projection.get_claim
    record(projection, processing)


def project_all(container: Any, config: Any, report: Any, received: RecentReceived | None = None,
                durable: list[Callable[[], None]] | None = None) -> dict[str, int]:
    """Run every read model over the new events, as `paywarden project` and `paywarden webhooks` would: the
    followers of one application's log together (`catch_up_together`, `LOAD_BATCH` notifications per transaction
    of each view), the applications in the order their events feed each other (payments before listings). On
    SQLite each view the load writes runs in bulk mode (`bulk_sqlite`); the barriers that make them durable are
    appended to `durable`."""
    from eventsourcing.projection import Projection

    from application.listings import Listings
    from interfaces.audit.log import AuditLog
    from interfaces.runtime.workers import PROJECTIONS
    from projections.runner import catch_up
    from projections.webhook_outbox import (
        ListingWebhooksProjection,
        MerchantWebhooksProjection,
        PaymentWebhooksProjection,
        ServiceWebhooksProjection,
        WebhookEndpointsProjection,
    )

    durable = durable if durable is not None else []
    view = container.webhooks_view
    followers = [(spec.name, spec.application(container), spec.projection(spec.view(container)))
                 for spec in PROJECTIONS.values() if spec.available(container)]
    followers[3:3] = [("webhook_endpoints", container.webhooks, WebhookEndpointsProjection(view)),
                      ("webhook_merchants", container.merchants, MerchantWebhooksProjection(view)),
                      ("webhook_services", container.proxies, ServiceWebhooksProjection(view))]
    followers += [("webhook_payments", container.payments, PaymentWebhooksProjection(view)),
                  ("webhook_listings", container.listings, ListingWebhooksProjection(view))]
    tuned: set[int] = set()
    for _, _, projection in followers:
        store = projection.view if isinstance(projection, Projection) else projection.recorder
        datastore = getattr(store, "datastore", None)
        if datastore is not None and id(datastore) not in tuned:
            tuned.add(id(datastore))
            durable.append(bulk_sqlite(datastore))
    done: dict[str, int] = {}
    apps = list({id(app): app for _, app, _ in followers}.values())
    apps.sort(key=lambda app: app is container.listings)  # the listings are written by a follower of payments
    for app in apps:
        mine = [f for f in followers if f[1] is app]
        # A view with batches, and the discovery follower, together; any other (the result cache in Redis) alone.
        together = [f for f in mine if isinstance(f[2], Listings) or (
            isinstance(f[2], Projection) and hasattr(f[2].view, "batch"))]
        label = "payments log" if app is container.payments else f"{app.name} log"
        started, cpu = time.monotonic(), time.process_time()
        if together:
            done[label] = catch_up_together(app, [f[2] for f in together],
                                            received if app is container.payments else None, LOAD_BATCH)
            for name, _, _ in together:
                done[name] = done[label]
            report(f"  {', '.join(f[0] for f in together)}: {done[label]} events in "
                   f"{time.monotonic() - started:.0f} s ({time.process_time() - cpu:.0f} s CPU)")
        for name, _, projection in mine:
            if any(projection is f[2] for f in together):
                continue
            started, cpu = time.monotonic(), time.process_time()
            done[name] = catch_up(app, projection)
            report(f"  {name}: {done[name]} events in {time.monotonic() - started:.0f} s "
                   f"({time.process_time() - cpu:.0f} s CPU)")
    started, cpu = time.monotonic(), time.process_time()
    audit = AuditLog.open(config)
    durable.append(bulk_sqlite(audit.view.datastore))
    try:
        done["audit_log"] = audit.catch_up()
        try:
            audit.checkpoint()
        except Exception as unsigned:  # production without a signing key: the follower signs later
            report(f"  audit checkpoint not signed: {unsigned}")
    finally:
        audit.close()
    report(f"  audit_log: {done['audit_log']} events in {time.monotonic() - started:.0f} s "
           f"({time.process_time() - cpu:.0f} s CPU)")
    return done


def bulk_sqlite(datastore: Any) -> Callable[[], None]:
    """For the load only: every connection of a SQLite store runs at `synchronous=OFF` (no fsync at any commit or
    checkpoint) with a large page cache (`BULK_CACHE_KIB`), so a batch's writes into big, randomly keyed indexes
    stay in memory and each commit is one write to the WAL in the operating system's cache. Returns the barrier
    that makes the store durable (`fsync_database`), run once at the end of the load. A crash of the operating
    system during the load can lose or damage that store: load again. A PostgreSQL datastore is left as it is
    (returns a barrier that does nothing)."""
    from interfaces.adapters.sqlite import LeanDatastore
    from interfaces.adapters.sqlite_durability import fsync_database

    if not isinstance(datastore, LeanDatastore):
        return lambda: None
    # The connections opened already (none is in use: the stack is stopped), and those opened later.
    datastore.tune("PRAGMA synchronous=OFF", f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
    return fsync_database(Path(datastore.pool.db_name))
