"""Prometheus metrics of the API: counters and histograms updated as requests run, gauges read at scrape time.

Under gunicorn the values live in `PROMETHEUS_MULTIPROC_DIR` (set by `interfaces/runtime/gunicorn_conf.py`) and a scrape
sums every worker's; otherwise one process-wide registry holds them. Projection lag and fee payer balances are
not stored anywhere: `ScrapeCollector` reads them from the event store and the chain when /metrics is asked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from interfaces.runtime.observability import MULTIPROC_ENV

# Label values come from these sets only, so a client cannot mint series: any other method is "other", and a
# path no resource serves is the route "unmatched" (interfaces/http/common/requestlog.py).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})
OTHER_METHOD = "other"

REQUESTS = Counter("paywarden_http_requests", "HTTP requests answered, by method, route template and status.",
                   ["method", "route", "status"])
PAYMENT_DURATION = Histogram(
    "paywarden_payment_duration_seconds", "Time to answer POST /verify and POST /settle, by operation.",
    ["operation"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60),
)
PAYMENT_OUTCOMES = Counter(
    "paywarden_payment_outcomes", "Verify and settle answers, by operation, outcome, reason code and replay.",
    ["operation", "outcome", "reason", "replayed"],
)
RATE_LIMITED = Counter("paywarden_rate_limit_rejections", "Requests refused with 429, by limit scope and route.",
                       ["scope", "route"])
CHAIN_DURATION = Histogram(
    "paywarden_chain_rpc_duration_seconds", "Chain calls through the Chain port, by network and method.",
    ["network", "method"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
CHAIN_ERRORS = Counter(
    "paywarden_chain_rpc_errors", "Chain calls that raised, by network, method and error "
    "(unavailable: transport or nonsense; refused: the broadcast was refused).", ["network", "method", "error"],
)


# A metric's child per label values, as `labels()` returns it (it keeps them too, behind a lock and a tuple of the
# values made each call): the values come from bounded sets (methods, route templates, statuses, operations, reason
# codes, networks and chain methods), so this holds as many entries as the metrics do.
_children: dict[tuple[Any, ...], Any] = {}


def child(metric: Any, *labels: str) -> Any:
    """`metric.labels(*labels)`, looked up once per label values (the request path records several a request)."""
    key = (metric, *labels)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*labels)
    return found


def method_label(method: str) -> str:
    """The request method as a metric label: one of METHODS, else "other"."""
    return method if method in METHODS else OTHER_METHOD


class ScrapeCollector(Collector):
    """Gauges computed when scraped: projection lag in events, fee payer balances and their floor."""

    def __init__(self, probes: Any) -> None:
        self._probes = probes  # interfaces.runtime.probes.Probes

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily("paywarden_projection_lag_events",
                                "Events in the application's log after the oldest one this view has not applied.",
                                labels=["projection"])
        for name, events in self._probes.projection_lags().items():
            lag.add_metric([name], events)
        yield lag
        balance = GaugeMetricFamily("paywarden_fee_payer_balance_lamports", "SOL balance of each fee payer.",
                                    labels=["network", "address"])
        for (network, address), lamports in self._probes.fee_payer_balances().items():
            if isinstance(lamports, int):
                balance.add_metric([network, address], lamports)
        yield balance
        books = self._probes.books()
        if books is not None:
            yield CounterMetricFamily("paywarden_books_mismatches", "Mismatches the reconciler found between the "
                                      "books and the chain (docs/audit.md).", value=books["mismatches"])
        yield GaugeMetricFamily("paywarden_fee_payer_min_lamports", "The configured floor of a fee payer's balance "
                                "(PAYWARDEN_FEE_PAYER_MIN_LAMPORTS); below it /readyz answers 503.",
                                value=self._probes.fee_payer_floor)


class _Scrape:
    """A registry-like view over several collectors, for `generate_latest`."""

    def __init__(self, collectors: Iterable[Any]) -> None:
        self._collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()


def exposition(extra: Collector) -> tuple[bytes, str]:
    """The Prometheus text of this process (or, in multiprocess mode, of every worker), plus `extra`."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(_Scrape([registry, extra])), CONTENT_TYPE_LATEST
    return generate_latest(_Scrape([REGISTRY, extra])), CONTENT_TYPE_LATEST
