"""Webhook metrics, read from the outbox when /metrics is scraped: they count every worker on every host, and
survive restarts, because the attempts and deliveries are rows in the database, not counters in a process."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from projections.webhooks import WebhooksView

log = logging.getLogger("paywarden.webhooks")
OUTCOMES = ("delivered", "retry", "failed", "disabled")
STATUSES = ("pending", "delivered", "failed", "cancelled")


class WebhookCollector(Collector):
    def __init__(self, view: WebhooksView) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        try:
            attempts, deliveries = self._view.counts()
            depth, oldest = self._view.queue_stats(time.time())
        except Exception:  # the database is down: /metrics still answers, /readyz says why
            log.warning("webhook metrics unavailable: the outbox cannot be read", exc_info=True)
            return
        by_outcome = CounterMetricFamily("paywarden_webhook_attempts", "Webhook delivery attempts, by outcome "
                                         "(delivered: 2xx; retry: will be tried again; failed: schedule spent; "
                                         "disabled: 410 Gone).", labels=["outcome"])
        for outcome in OUTCOMES:
            by_outcome.add_metric([outcome], attempts.get(outcome, 0))
        yield by_outcome
        by_status = GaugeMetricFamily("paywarden_webhook_deliveries", "Webhook deliveries (one message to one "
                                      "endpoint), by status.", labels=["status"])
        for status in STATUSES:
            by_status.add_metric([status], deliveries.get(status, 0))
        yield by_status
        yield GaugeMetricFamily("paywarden_webhook_queue_depth", "Webhook deliveries not yet delivered nor given up.",
                                value=depth)
        yield GaugeMetricFamily("paywarden_webhook_oldest_pending_age_seconds",
                                "Age of the oldest webhook delivery still pending (0 when none).", value=oldest)


class Collectors(Collector):
    """Several collectors as one (`interfaces.runtime.metrics_registry.exposition` takes one extra)."""

    def __init__(self, *collectors: Collector) -> None:
        self._collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()
