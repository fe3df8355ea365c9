"""Projection workers: each read model follows its application's notification log in its own process.

`paywarden project [NAME ...]` runs them (all by default); `paywarden up` and `paywarden serve` start one.
Register a read model in `PROJECTIONS`; the container builds its view for the configured store.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from interfaces.adapters.redis import RedisResultCacheView
from interfaces.container import Container
from interfaces.runtime.followup import follow_up_pending
from projections.accounts import AccountsProjection
from projections.catalog import CatalogProjection
from projections.console import ConsoleProjection
from projections.payment_list import PaymentListProjection
from projections.results import ResultCacheProjection
from projections.runner import catch_up, follow
from projections.service_scopes import ServiceScopesProjection


@dataclass(frozen=True)
class ProjectionSpec:
    name: str
    application: Callable[[Container], Any]  # the application whose log it follows
    projection: Callable[[Any], Any]  # a Projection class over the view; the identity for an EventSourcedProjection
    view: Callable[[Container], Any]
    available: Callable[[Container], bool] = lambda c: True  # False: this deployment has no such read model


PROJECTIONS: dict[str, ProjectionSpec] = {
    "accounts": ProjectionSpec("accounts", lambda c: c.merchants, AccountsProjection, lambda c: c.accounts),
    # Scoped keys: the services and routes they are checked against (follows the ProxyServices log).
    "service_scopes": ProjectionSpec("service_scopes", lambda c: c.proxies, ServiceScopesProjection,
                                     lambda c: c.service_scopes, lambda c: c.service_scopes is not None),
    "console": ProjectionSpec("console", lambda c: c.merchants, ConsoleProjection, lambda c: c.console),
    # Discovery: Listings follows approved payments and records listings; the catalog follows the listings.
    "listings": ProjectionSpec("listings", lambda c: c.payments, lambda listings: listings, lambda c: c.listings),
    "catalog": ProjectionSpec("catalog", lambda c: c.listings, CatalogProjection, lambda c: c.catalog),
    "payment_list": ProjectionSpec("payment_list", lambda c: c.payments, PaymentListProjection,
                                   lambda c: c.payment_list),
    # The terminal result cache lives in Redis when there is one, else in SQL tables beside the other views.
    "result_cache": ProjectionSpec("result_cache", lambda c: c.payments, ResultCacheProjection,
                                   lambda c: _result_cache_view(c)),
}


def _result_cache_view(container: Container) -> Any:
    return container.result_cache if container.redis is None else RedisResultCacheView(container.redis)


def catch_up_all(container: Container, names: Sequence[str] = ()) -> int:
    total = 0
    for spec in _selected(names, container):
        total += catch_up(spec.application(container), spec.projection(spec.view(container)))
    return total


def run(container: Container, names: Sequence[str] = (), stop: threading.Event | None = None) -> None:
    """Follow the selected projections until SIGINT/SIGTERM (or `stop`)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    threads = [
        threading.Thread(target=follow, args=(spec.application(container), spec.projection(spec.view(container)),
                                              stop), name=f"projection-{spec.name}", daemon=True)
        for spec in _selected(names, container)
    ]
    if not names:  # the audit log trails every application's events (interfaces/audit/log.py)
        from interfaces.audit.log import follow as follow_audit_log

        threads.append(threading.Thread(target=follow_audit_log, args=(container.config, stop), name="audit-log",
                                        daemon=True))
        # Settlements answered `settlement_pending` are carried on to CONFIRMED or FAILED
        # (interfaces/runtime/followup.py).
        threads.append(threading.Thread(target=follow_up_pending, args=(container, stop), name="settlement-followup",
                                        daemon=True))
    for thread in threads:
        thread.start()
    stop.wait()
    for thread in threads:
        thread.join(timeout=5)


def _selected(names: Sequence[str], container: Container) -> list[ProjectionSpec]:
    unknown = set(names) - set(PROJECTIONS)
    if unknown:
        raise ValueError(f"unknown projection(s): {', '.join(sorted(unknown))}; known: {', '.join(PROJECTIONS)}")
    specs = [PROJECTIONS[n] for n in (names or PROJECTIONS)]
    missing = [s.name for s in specs if names and not s.available(container)]
    if missing:
        raise ValueError(f"not available in this configuration: {', '.join(missing)}")
    return [s for s in specs if s.available(container)]
