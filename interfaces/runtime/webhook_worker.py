"""`paywarden webhooks`: fills the outbox from the events and delivers it, until stopped.

One loop: bring the endpoints table up to date, run the outbox projections up to that moment (Payments, Listings,
Merchants), lease the due deliveries and send them on a small thread pool, record every attempt. Any number of
these processes may run at once (deliveries are leased, projections tracked); a killed one loses nothing: its
leases expire and another (or itself, restarted) sends the attempt again with the same `webhook-id`. A database
that is down is waited out with a growing pause, never fatal.
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from domain.webhook import next_delay, outcome, signature_header
from interfaces.adapters.webhook_sender import Answer, post
from interfaces.runtime.webhook_settings import DeliverySettings, load_settings, merchant_share  # noqa: F401
from projections.runner import catch_up
from projections.webhook_outbox import (
    ListingWebhooksProjection,
    MerchantWebhooksProjection,
    NotYet,
    PaymentWebhooksProjection,
    ServiceWebhooksProjection,
    WebhookEndpointsProjection,
)
from projections.webhooks import Attempt, Claimed

if TYPE_CHECKING:  # `paywarden`'s start-up checks read load_settings without building a container
    from interfaces.container import Container

log = logging.getLogger("paywarden.webhooks")
STOP_CHECK_SECONDS = 0.1  # how often a waiting loop looks at its stop event
USER_AGENT = "Paywarden-Webhooks/1"
RENEWALS_PER_LEASE = 3  # a held lease is extended this often per lease period, so one late round never lapses it


def retry_after(answer: Answer, now: float) -> float | None:
    """Seconds the receiver asked us to wait (429 and 503 only): delta-seconds or an HTTP date."""
    raw = answer.headers.get("retry-after", "").strip() if answer.status in (429, 503) else ""
    if not raw:
        return None
    if raw.isdigit():
        return float(raw)
    try:
        return max(email.utils.parsedate_to_datetime(raw).timestamp() - now, 0.0)
    except (TypeError, ValueError):
        return None


class DeliveryWorker:
    def __init__(self, container: Container, settings: DeliverySettings, *,
                 send: Callable[..., Answer] = post, clock: Callable[[], float] = time.time) -> None:
        self._c, self._settings, self._send, self._clock = container, settings, send, clock
        self._view = container.webhooks_view
        self._endpoints = WebhookEndpointsProjection(self._view)
        self._sources: list[tuple[Any, Any]] = [
            (container.payments, PaymentWebhooksProjection(self._view)),
            (container.merchants, MerchantWebhooksProjection(self._view)),
        ]
        if container.listings is not None:
            self._sources.append((container.listings, ListingWebhooksProjection(self._view)))
        if container.proxies is not None:
            self._sources.append((container.proxies, ServiceWebhooksProjection(self._view)))
        self._pool = ThreadPoolExecutor(settings.concurrency, thread_name_prefix="webhook-send")
        self._in_flight = 0
        self._held: dict[str, int] = {}  # lease tokens of this process's claims: deliveries not yet recorded
        self._busy: set[str] = set()  # endpoints this process is sending to
        self._lock = threading.Lock()
        self._freed = threading.Event()  # a sender finished its group: its endpoint may be claimed again

    # -- the outbox ---------------------------------------------------------------------------------------------

    def sync_endpoints(self) -> int:
        return catch_up(self._c.webhooks, self._endpoints)

    def fill_outbox(self) -> int:
        """Endpoints up to date, then every source's events up to that moment; how many events were applied."""
        horizon = datetime.now(UTC)
        done = self.sync_endpoints()
        for app, projection in self._sources:
            projection.horizon = horizon
            try:
                done += catch_up(app, projection)
            except NotYet:
                pass  # newer than the endpoints we know of: the next round takes it
        return done

    # -- deliveries ---------------------------------------------------------------------------------------------

    def deliver_due(self, *, wait: bool = False) -> int:
        """Lease as many due deliveries as there are free senders and start them; with `wait`, finish them.

        One endpoint's deliveries go one after another, oldest event first, and an endpoint this process is still
        sending to is not claimed again meanwhile: a receiver that answers 2xx hears its events in order."""
        with self._lock:
            free, busy = self._settings.concurrency - self._in_flight, sorted(self._busy)
        if free <= 0:
            return 0
        claimed = self._view.claim(self._clock(), self._settings.lease_seconds, free, exclude=busy,
                                   per_merchant=self._settings.merchant_share)
        groups: dict[str, list[Claimed]] = {}
        for item in claimed:
            groups.setdefault(item.endpoint_id, []).append(item)
        with self._lock:
            self._in_flight += len(claimed)
            self._busy.update(groups)
            for item in claimed:
                self._held[item.lease_token] = self._held.get(item.lease_token, 0) + 1
        futures = [self._pool.submit(self._deliver_group, group) for group in groups.values()]
        if wait:
            for future in futures:
                future.result()
        return len(claimed)

    def renew_leases(self) -> int:
        """Keep this process's leases from lapsing while it still holds them: a merchant's share counts the leases,
        so a lease that lapsed under a sender still waiting on a slow receiver let the merchant take another sender
        (and another, one lease period at a time). A killed worker renews nothing: its leases lapse as before."""
        with self._lock:
            tokens = sorted(self._held)
        return self._view.renew(tokens, self._clock() + self._settings.lease_seconds)

    def _deliver_group(self, group: list[Claimed]) -> None:
        try:
            for item in group:
                try:
                    self.attempt(item)
                except Exception:
                    log.exception("webhook delivery %s to %s failed unexpectedly; its lease will expire and it is "
                                  "retried", item.msg_id, item.endpoint_id)
                finally:
                    with self._lock:
                        self._in_flight -= 1
                        self._held[item.lease_token] -= 1
                        if not self._held[item.lease_token]:
                            del self._held[item.lease_token]
        finally:
            with self._lock:
                self._busy.discard(group[0].endpoint_id)
            self._freed.set()

    def attempt(self, item: Claimed) -> Attempt:
        now = self._clock()
        moment = datetime.fromtimestamp(now, UTC)
        previous_until = datetime.fromtimestamp(item.previous_until, UTC) if item.previous_until else None
        secrets = self._c.webhooks.signing_secrets(item.sealed_secret, item.previous_secret, previous_until, moment)
        timestamp = int(now)
        headers = {"webhook-id": item.msg_id, "webhook-timestamp": str(timestamp),
                   "webhook-signature": signature_header(secrets, item.msg_id, timestamp, item.payload),
                   "content-type": "application/json", "user-agent": USER_AGENT}
        answer = self._send(item.url, item.payload.encode(), headers, timeout=self._settings.timeout_seconds,
                            production=not self._c.config.sandbox, resolver=self._resolver(),
                            ca_file=self._settings.ca_file)
        kind = outcome(answer.status)
        attempts = item.attempts + 1
        delay = None if kind != "retry" else next_delay(attempts, self._settings.schedule,
                                                        jitter=random.uniform(0.9, 1.1),
                                                        retry_after=retry_after(answer, now))
        if kind == "retry" and delay is None:
            kind = "failed"
        done_at = self._clock()
        attempt = Attempt(answer.status, kind, answer.latency_ms, answer.text, answer.error, timestamp)
        kept = self._view.record_attempt(item, attempt, done_at, None if delay is None else done_at + delay)
        if kind == "disabled" and self._c.webhooks.disable(item.endpoint_id, "the endpoint answered 410 Gone"):
            self.sync_endpoints()
        if not kept:
            log.warning("webhook %s to endpoint %s: the lease ran out during the attempt; another worker has it",
                        item.msg_id, item.endpoint_id)
        log.info("webhook %s to endpoint %s: attempt %d %s (%s%s, %d ms)", item.msg_id, item.endpoint_id,
                 attempts, kind, answer.status, f", {answer.error}" if answer.error else "", answer.latency_ms)
        return attempt

    def _resolver(self) -> Any:
        return self._c.webhooks.resolver  # the same resolver the endpoint's URL was checked with

    # -- the loop -----------------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Rounds until `stop`. A round that claimed deliveries is followed by another at once (more may be due);
        any other waits for a sender to finish its group or for the poll's pause, whichever comes first. The outbox
        projections read their logs to the end once per pause, not every round: going round again at once would
        only pick up the events of the last few milliseconds, a commit (and its fsync) for each one or two events
        under steady traffic.

        Waking when a sender is free is what lets one endpoint's backlog flow: an endpoint being sent to is not
        claimed again until its group is done, and a round that found it busy used to sleep the whole pause, so an
        endpoint got at most `merchant_share` deliveries per pause (2 every 0.5 s by default, however fast its
        receiver answered)."""
        failures, filled, renewed = 0, float("-inf"), time.monotonic()
        while not stop.is_set():
            self._freed.clear()
            try:
                if time.monotonic() - renewed >= self._settings.lease_seconds / RENEWALS_PER_LEASE:
                    self.renew_leases()
                    renewed = time.monotonic()
                if time.monotonic() - filled >= self._settings.poll_seconds:
                    self.fill_outbox()
                    filled = time.monotonic()
                busy = self.deliver_due()
                failures = 0
            except Exception:
                failures += 1
                log.exception("webhook worker cycle failed (%d in a row); retrying", failures)
                stop.wait(min(self._settings.poll_seconds * 2**failures, 5.0))
                continue
            if not busy:  # until the next fill is due, a sender is free, or `stop`
                due = filled + self._settings.poll_seconds
                while not stop.is_set() and (left := due - time.monotonic()) > 0:
                    if self._freed.wait(min(left, STOP_CHECK_SECONDS)):
                        break
        self._pool.shutdown(wait=True)
