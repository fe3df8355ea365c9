"""Prometheus metrics of the proxy: requests by service and outcome, upstream latency and errors, bytes streamed.

The service label is the slug of a known service, or `unknown` (no label per probed slug).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Histogram

REQUESTS = Counter("paywarden_proxy_requests", "Proxied requests answered, by service and outcome.",
                   ["service", "outcome"])
UPSTREAM_SECONDS = Histogram(
    "paywarden_proxy_upstream_seconds", "Time until the upstream's response headers, by service.", ["service"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
UPSTREAM_ERRORS = Counter("paywarden_proxy_upstream_errors", "Upstream failures, by service and reason.",
                          ["service", "reason"])
BYTES = Counter("paywarden_proxy_bytes", "Body bytes passed through, by service and direction.",
                ["service", "direction"])


def _service(x: Any) -> str:
    return x.slug if getattr(x, "service", None) is not None else "unknown"


def outcome(x: Any, name: str) -> None:
    REQUESTS.labels(_service(x), name).inc()


def upstream_error(x: Any, reason: str) -> None:
    UPSTREAM_ERRORS.labels(_service(x), reason).inc()


def upstream_latency(x: Any, seconds: float) -> None:
    UPSTREAM_SECONDS.labels(_service(x)).observe(seconds)


def bytes_streamed(x: Any, direction: str, count: int) -> None:
    if count:
        BYTES.labels(_service(x), direction).inc(count)
