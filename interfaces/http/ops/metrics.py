"""GET /metrics: the Prometheus text format (no auth: expose it to the scraper only, see docs/operations.md)."""

from __future__ import annotations

import falcon
from prometheus_client.registry import Collector

from interfaces.runtime.metrics_registry import ScrapeCollector, exposition
from interfaces.runtime.probes import Probes
from projections.webhooks import WebhooksView


class MetricsResource:
    def __init__(self, probes: Probes, webhooks_view: WebhooksView | None = None) -> None:
        self._collector: Collector = ScrapeCollector(probes)
        if webhooks_view is not None:
            from interfaces.http.ops.webhook_metrics import Collectors, WebhookCollector

            self._collector = Collectors(self._collector, WebhookCollector(webhooks_view))

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data, resp.content_type = exposition(self._collector)
        resp.cache_control = ["no-store"]
