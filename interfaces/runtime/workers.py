"""Projection workers: the read models follow their applications' notification logs in one process.

`paywarden project [NAME ...]` runs them (all by default); `paywarden up` and `paywarden serve` start one.
Register a read model in `PROJECTIONS`; the container builds its view for the configured store. Each application's
log has one reader thread in the process (`projections.runner.Follower`) feeding every read model that follows it:
a batch is read and decoded once, each read model applies its share in its own transaction.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interfaces.adapters.postgres import is_postgres
from interfaces.adapters.redis import RedisResultCacheView
from interfaces.adapters.sqlite_durability import BackgroundCheckpoints
from interfaces.container import PAYMENTS_STORE, Container, store_env
from interfaces.runtime.followup import follow_up_pending, runs_in_the_api_worker
from projections.accounts import AccountsProjection
from projections.catalog import CatalogProjection
from projections.paid_access import PaidAccessProjection
from projections.payment_list import PaymentListProjection
from projections.payment_volume import PaymentVolumeProjection
from projections.results import ResultCacheProjection
from projections.runner import Follower
from projections.service_scopes import ServiceScopesProjection


@dataclass(frozen=True)
class ProjectionSpec:
    name: str
    application: Callable[[Container], Any]  # the application whose log it follows
    projection: Callable[[Any], Any]  # a Projection class over the view; the identity for an EventSourcedProjection
    view: Callable[[Container], Any]
    available: Callable[[Container], bool] = lambda c: True  # False: this deployment has no such read model


PROJECTIONS: dict[str, ProjectionSpec] = {
    # Merchants, keys, capabilities, domains and logins: what every request authenticates against, and what the
    # console and the CLI show.
    "accounts": ProjectionSpec("accounts", lambda c: c.merchants, AccountsProjection, lambda c: c.accounts),
    # Scoped keys: the services and routes they are checked against (follows the ProxyServices log).
    "service_scopes": ProjectionSpec("service_scopes", lambda c: c.proxies, ServiceScopesProjection,
                                     lambda c: c.service_scopes, lambda c: c.service_scopes is not None),
    # Discovery: Listings follows approved payments and records listings; the catalog follows the listings.
    "listings": ProjectionSpec("listings", lambda c: c.payments, lambda listings: listings, lambda c: c.listings),
    "catalog": ProjectionSpec("catalog", lambda c: c.listings, CatalogProjection, lambda c: c.catalog),
    "payment_list": ProjectionSpec("payment_list", lambda c: c.payments, PaymentListProjection,
                                   lambda c: c.payment_list),
    # The overview's chart (settled USDC per day and hour and service) and each payment's service and resource.
    "payment_volume": ProjectionSpec("payment_volume", lambda c: c.payments, PaymentVolumeProjection,
                                     lambda c: c.payment_volume, lambda c: c.payment_volume is not None),
    # Who paid which proxy route when: what a once-paid route's Sign-In-With-X asks (application/access.py).
    "paid_access": ProjectionSpec("paid_access", lambda c: c.payments, PaidAccessProjection, lambda c: c.paid_access,
                                  lambda c: c.paid_access is not None),
    # The terminal result cache lives in Redis when there is one, else in SQL tables beside the other views.
    "result_cache": ProjectionSpec("result_cache", lambda c: c.payments, ResultCacheProjection,
                                   lambda c: _result_cache_view(c)),
}


def _result_cache_view(container: Container) -> Any:
    return container.result_cache if container.redis is None else RedisResultCacheView(container.redis)


def reconciler(container: Container) -> Any:
    """The books' reconciler of this deployment, once an RPC endpoint of a served network is known (beside `up`,
    the localnet it serves, which it records once it answers); None until then."""
    from domain.networks import DEVNET, MAINNET
    from interfaces.audit.books import Reconciler
    from interfaces.audit.chain import JsonRpc
    from interfaces.audit.stores import reader
    from interfaces.config import beside_running_stack

    config = beside_running_stack(container.config)
    urls = {DEVNET.caip2: config.devnet_rpc_url, MAINNET.caip2: config.mainnet_rpc_url}
    networks = [n for n in container.chains.by_network if urls.get(n)]
    if not networks or container.books is None:
        return None
    clients = {n: JsonRpc(urls[n]) for n in networks}
    return Reconciler(container.books, reader(config, PAYMENTS_STORE), clients.get,
                      {n: list(container.fee_payers.addresses(n)) for n in networks},
                      booked_elsewhere=lambda signature: bool(container.payment_list.find_ids(signature)))


def catch_up_all(container: Container, names: Sequence[str] = ()) -> int:
    """The selected read models level with their logs now, as the worker brings them (`followers`); how many
    notifications they applied, all together."""
    return sum(follower.catch_up() for follower in followers(container, names))


def run(container: Container, names: Sequence[str] = (), stop: threading.Event | None = None) -> None:
    """Follow the selected projections until SIGINT/SIGTERM (or `stop`)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    threads = [
        threading.Thread(target=follower.follow, args=(stop,), name=f"projections-{follower.app.name}", daemon=True)
        for follower in followers(container, names)
    ]
    if not names:  # the audit log trails every application's events (interfaces/audit/log.py)
        from interfaces.audit.log import follow as follow_audit_log

        threads.append(threading.Thread(target=follow_audit_log, args=(container.config, stop), name="audit-log",
                                        daemon=True))
        from interfaces.audit.books import follow as follow_books

        threads.append(threading.Thread(target=follow_books, args=(functools.partial(reconciler, container), stop),
                                        kwargs={"seconds": container.config.books_reconcile_seconds},
                                        name="books-reconciler", daemon=True))
    if not names and not runs_in_the_api_worker(container):
        # Settlements answered `settlement_pending` are carried on to CONFIRMED or FAILED
        # (interfaces/runtime/followup.py); with in-process locks, by the API worker instead.
        threads.append(threading.Thread(target=follow_up_pending, args=(container, stop), name="settlement-followup",
                                        daemon=True))
    if not is_postgres(container.config.database_url):
        # The payments store's WAL checkpointed here, out of the API worker's requests, by every projection worker
        # (two at once are harmless: one of two concurrent checkpoints finds the other's lock and skips a pass);
        # interfaces/adapters/sqlite.py, BackgroundCheckpoints.
        checkpoints = BackgroundCheckpoints(Path(store_env(container.config, PAYMENTS_STORE)["SQLITE_DBNAME"]))
        threads.append(threading.Thread(target=checkpoints.run, args=(stop,), name="payments-checkpoints",
                                        daemon=True))
    for thread in threads:
        thread.start()
    stop.wait()
    for thread in threads:
        thread.join(timeout=5)


def followers(container: Container, names: Sequence[str] = ()) -> list[Follower]:
    """One `Follower` per application whose log the selected read models follow. The Payments one holds its batch
    in `container.payments_batch`, where Listings reads a payment's Received first (`BatchFirst`)."""
    by_app: dict[int, tuple[Any, list[Any]]] = {}
    for spec in _selected(names, container):
        app = spec.application(container)
        by_app.setdefault(id(app), (app, []))[1].append(spec.projection(spec.view(container)))
    return [Follower(app, projections, batch=container.payments_batch if app is container.payments else None)
            for app, projections in by_app.values()]


def _selected(names: Sequence[str], container: Container) -> list[ProjectionSpec]:
    unknown = set(names) - set(PROJECTIONS)
    if unknown:
        raise ValueError(f"unknown projection(s): {', '.join(sorted(unknown))}; known: {', '.join(PROJECTIONS)}")
    specs = [PROJECTIONS[n] for n in (names or PROJECTIONS)]
    missing = [s.name for s in specs if names and not s.available(container)]
    if missing:
        raise ValueError(f"not available in this configuration: {', '.join(missing)}")
    return [s for s in specs if s.available(container)]
