"""GET /metrics: the Prometheus text format (no auth: expose it to the scraper only, see docs/operations.md)."""

from __future__ import annotations

import falcon

from interfaces.health import Probes
from interfaces.metrics import ScrapeCollector, exposition


class MetricsResource:
    def __init__(self, probes: Probes) -> None:
        self._collector = ScrapeCollector(probes)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data, resp.content_type = exposition(self._collector)
        resp.cache_control = ["no-store"]
