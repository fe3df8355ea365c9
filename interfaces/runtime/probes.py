"""Probes of what the API depends on: readiness checks, projection lag, fee payer balances; start-up checks.

Each readiness check runs in its own (daemon) thread, green under gevent, and all share one deadline, so a
dependency that hangs costs /readyz at most `timeout` seconds and is named "down: no answer within …".
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from eventsourcing.projection import Projection

from interfaces.adapters.chain.instrumented import network_label
from interfaces.config import Config, ConfigError, without_password

OK = "ok"
READINESS_TIMEOUT_SECONDS = 2.0


def _describe(failure: BaseException) -> str:
    text = " ".join(str(failure).split())[:200]
    return f"{type(failure).__name__}: {text}" if text else type(failure).__name__


def run_bounded(checks: dict[str, Callable[[], str]], timeout: float) -> dict[str, str]:
    """Run every check at once; each answers "ok" or a reason; a raise is "down: …", a hang past `timeout` too."""
    results: dict[str, str] = {}

    def run(name: str, check: Callable[[], str]) -> None:
        try:
            results[name] = check()
        except Exception as failure:
            results[name] = f"down: {_describe(failure)}"

    threads = [threading.Thread(target=run, args=item, name=f"probe-{item[0]}", daemon=True)
               for item in checks.items()]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {name: results.get(name, f"down: no answer within {timeout:g} s") for name in sorted(checks)}


class Probes:
    """What /readyz and /metrics ask of a container."""

    def __init__(self, container: Any, *, timeout: float = READINESS_TIMEOUT_SECONDS) -> None:
        self._container, self.timeout = container, timeout
        self.fee_payer_floor = container.config.fee_payer_min_lamports

    def readiness(self) -> dict[str, str]:
        c = self._container
        checks: dict[str, Callable[[], str]] = {"event_store": self._event_store}
        if c.redis is not None:
            checks["redis"] = lambda: OK if c.redis.ping() else "down: no PONG"
        for caip2, chain in sorted(c.chains.by_network.items()):
            label = network_label(caip2)
            checks[f"rpc:{label}"] = functools.partial(self._healthy, chain)
            for address in c.fee_payers.addresses(caip2):
                checks[f"fee_payer:{label}:{address}"] = functools.partial(self._funded, chain, address)
        return run_bounded(checks, self.timeout)

    def _event_store(self) -> str:
        for app in self._applications():
            app.recorder.max_notification_id()
        return OK

    @staticmethod
    def _healthy(chain: Any) -> str:
        chain.health()  # raises when the node is unreachable or unhealthy
        return OK

    def _funded(self, chain: Any, address: str) -> str:
        lamports = chain.sol_balance(address)
        if lamports < self.fee_payer_floor:
            return f"low: {lamports} lamports, under the floor of {self.fee_payer_floor}"
        return OK

    def _applications(self) -> list[Any]:
        c = self._container
        return [app for app in (c.payments, c.merchants, c.listings) if app is not None]

    def fee_payer_balances(self) -> dict[tuple[str, str], int | str]:
        """Lamports of each fee payer on each served network (a failure's reason instead, when the chain fails)."""
        c = self._container
        keys: dict[str, tuple[str, str]] = {}
        checks: dict[str, Callable[[], str]] = {}
        for caip2, chain in c.chains.by_network.items():
            for address in c.fee_payers.addresses(caip2):
                name = f"{network_label(caip2)}:{address}"
                keys[name] = (network_label(caip2), address)
                checks[name] = functools.partial(_balance_text, chain, address)
        answers = run_bounded(checks, self.timeout)
        return {keys[name]: int(answer) if answer.isdigit() else answer for name, answer in answers.items()}

    def projection_lags(self) -> dict[str, int]:
        """Per read model: the events in its application's log from the oldest one it has not applied (0 when
        caught up). Read models whose store does not answer are left out."""
        from interfaces.runtime.workers import PROJECTIONS

        lags: dict[str, int] = {}
        for spec in PROJECTIONS.values():
            try:
                if spec.available(self._container):
                    app = spec.application(self._container)
                    lags[spec.name] = lag(app, spec.projection(spec.view(self._container)))
            except Exception:  # a store that is down is /readyz's to report, not the scrape's
                continue
        return lags


def lag(app: Any, projection: Any) -> int:
    tracking = projection.view if isinstance(projection, Projection) else projection.recorder
    position = tracking.max_tracking_id(app.name)
    pending = app.recorder.select_notifications(start=position, limit=1, topics=projection.topics,
                                                inclusive_of_start=False)
    if not pending:
        return 0
    return int(app.recorder.max_notification_id() or 0) - pending[0].id + 1


# -- start-up ----------------------------------------------------------------------------------------------------


def startup_error(config: Config, failure: BaseException) -> ConfigError | None:
    """A clear, variable-naming ConfigError for a failure to reach what the configuration names (else None)."""
    import psycopg
    import redis
    from eventsourcing.persistence import PersistenceError

    if isinstance(failure, (psycopg.Error, PersistenceError)):
        where = without_password(config.database_url) if config.database_url else "(SQLite files)"
        return ConfigError(f"cannot reach the database PAYWARDEN_DATABASE_URL={where}: {_describe(failure)}")
    if isinstance(failure, redis.RedisError):
        return ConfigError(f"cannot reach Redis at PAYWARDEN_REDIS_URL: {_describe(failure)}")
    if isinstance(failure, OSError) and getattr(failure, "filename", None):
        return ConfigError(f"cannot use {failure.filename} (PAYWARDEN_DATA_DIR / PAYWARDEN_DATABASE_URL): "
                           f"{failure.strerror}")
    return None


def preflight(config: Config) -> None:
    """Before `paywarden serve` starts gunicorn: the database, Redis and the fee payer keypairs answer."""
    from interfaces.adapters.postgres import is_postgres
    from interfaces.container import build_fee_payers, sqlite_dir

    try:
        build_fee_payers(config)
        if is_postgres(config.database_url):
            import psycopg

            psycopg.connect(config.database_url, connect_timeout=config.database_timeout_seconds).close()
        else:
            sqlite_dir(config).mkdir(parents=True, exist_ok=True)
        if config.redis_url:
            from interfaces.adapters.redis import redis_client

            client = redis_client(config.redis_url)
            try:
                client.ping()
            finally:
                client.close()
    except ConfigError:
        raise
    except Exception as failure:
        refused = startup_error(config, failure)
        if refused is None:
            raise
        raise refused from None


def _balance_text(chain: Any, address: str) -> str:
    return str(chain.sol_balance(address))
