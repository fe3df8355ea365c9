"""Probes of what the API depends on: readiness checks, projection lag, fee payer balances.

Each readiness check runs in its own (daemon) thread, green under gevent, and all share one deadline, so a
dependency that hangs costs /readyz at most `timeout` seconds and is named "down: no answer within …".
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import TrackingRecorder
from eventsourcing.projection import EventSourcedProjection, Projection

from application.ports import Chain, FeePayers
from interfaces.adapters.chain.instrumented import network_label

if TYPE_CHECKING:  # a client only where PAYWARDEN_REDIS_URL is set, made by the container
    from redis import Redis

OK = "ok"
READINESS_TIMEOUT_SECONDS = 2.0


def describe_failure(failure: BaseException) -> str:
    text = " ".join(str(failure).split())[:200]
    return f"{type(failure).__name__}: {text}" if text else type(failure).__name__


def run_bounded(checks: dict[str, Callable[[], str]], timeout: float) -> dict[str, str]:
    """Run every check at once; each answers "ok" or a reason; a raise is "down: …", a hang past `timeout` too."""
    results: dict[str, str] = {}

    def run(name: str, check: Callable[[], str]) -> None:
        try:
            results[name] = check()
        except Exception as failure:
            results[name] = f"down: {describe_failure(failure)}"

    threads = [threading.Thread(target=run, args=item, name=f"probe-{item[0]}", daemon=True)
               for item in checks.items()]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {name: results.get(name, f"down: no answer within {timeout:g} s") for name in sorted(checks)}


class ProbedChain(Chain, Protocol):
    """A chain adapter as the probes ask it: the node's health and an account's SOL (every adapter has both)."""

    def health(self) -> None:
        """Raise unless the node is reachable and healthy."""
        ...

    def sol_balance(self, address: str) -> int: ...


ReadModel = Projection[TrackingRecorder] | EventSourcedProjection[UUID]  # over a view, or an application that projects


@dataclass(frozen=True)
class FollowedLog:
    """A read model and the application whose log it follows (its lag is measured in that log's events)."""

    name: str
    application: Application[UUID]
    read_model: ReadModel


class BooksStatus(Protocol):
    def status(self) -> dict[str, Any]: ...  # last_pass, checked, mismatches, latest (application/books.py)


@dataclass(frozen=True)
class ProbeTargets:
    """What the probes ask, built by the composition root (interfaces/wiring.py)."""

    event_stores: Sequence[Application[UUID]]  # each answers when its log can be read
    chains: Mapping[str, ProbedChain]  # by CAIP-2 network
    fee_payers: FeePayers
    fee_payer_floor: int  # lamports: a fee payer under it is "low"
    followed: Sequence[FollowedLog] = ()  # the read models whose lag /metrics shows
    redis: Redis | None = None
    books: BooksStatus | None = None  # the reconciliation of the payments with the chain


class Probes:
    """What /readyz, /metrics and the console's overview ask about the dependencies."""

    def __init__(self, targets: ProbeTargets, *, timeout: float = READINESS_TIMEOUT_SECONDS) -> None:
        self._targets, self.timeout = targets, timeout
        self.fee_payer_floor = targets.fee_payer_floor

    def readiness(self) -> dict[str, str]:
        t = self._targets
        checks: dict[str, Callable[[], str]] = {"event_store": self._event_store}
        if (redis := t.redis) is not None:
            checks["redis"] = lambda: OK if redis.ping() else "down: no PONG"
        for caip2, chain in sorted(t.chains.items()):
            label = network_label(caip2)
            checks[f"rpc:{label}"] = functools.partial(self._healthy, chain)
            for address in t.fee_payers.addresses(caip2):
                checks[f"fee_payer:{label}:{address}"] = functools.partial(self._funded, chain, address)
        return run_bounded(checks, self.timeout)

    def _event_store(self) -> str:
        for app in self._targets.event_stores:
            app.recorder.max_notification_id()
        return OK

    @staticmethod
    def _healthy(chain: ProbedChain) -> str:
        chain.health()  # raises when the node is unreachable or unhealthy
        return OK

    def _funded(self, chain: ProbedChain, address: str) -> str:
        lamports = chain.sol_balance(address)
        if lamports < self.fee_payer_floor:
            return f"low: {lamports} lamports, under the floor of {self.fee_payer_floor}"
        return OK

    def fee_payer_balances(self) -> dict[tuple[str, str], int | str]:
        """Lamports of each fee payer on each served network (a failure's reason instead, when the chain fails)."""
        t = self._targets
        keys: dict[str, tuple[str, str]] = {}
        checks: dict[str, Callable[[], str]] = {}
        for caip2, chain in t.chains.items():
            for address in t.fee_payers.addresses(caip2):
                name = f"{network_label(caip2)}:{address}"
                keys[name] = (network_label(caip2), address)
                checks[name] = functools.partial(_balance_text, chain, address)
        answers = run_bounded(checks, self.timeout)
        return {keys[name]: int(answer) if answer.isdigit() else answer for name, answer in answers.items()}

    def books(self) -> dict[str, Any] | None:
        """The last reconciliation of the books with the chain (None when it is not kept here or cannot be read):
        /readyz's detail, /metrics' `paywarden_books_mismatches_total`, the console's overview."""
        if self._targets.books is None:
            return None
        try:
            return self._targets.books.status()
        except Exception:  # a store that is down is /readyz's event_store check to report
            return None

    def projection_lags(self) -> dict[str, int]:
        """Per read model: the events in its application's log from the oldest one it has not applied (0 when
        caught up). Read models whose store does not answer are left out."""
        lags: dict[str, int] = {}
        for followed in self._targets.followed:
            try:
                lags[followed.name] = lag(followed.application, followed.read_model)
            except Exception:  # a store that is down is /readyz's to report, not the scrape's
                continue
        return lags


def lag(app: Application[UUID], read_model: ReadModel) -> int:
    tracking = read_model.view if isinstance(read_model, Projection) else read_model.recorder
    position = tracking.max_tracking_id(app.name)
    pending = app.recorder.select_notifications(start=position, limit=1, topics=read_model.topics,
                                                inclusive_of_start=False)
    if not pending:
        return 0
    return int(app.recorder.max_notification_id() or 0) - pending[0].id + 1


def _balance_text(chain: ProbedChain, address: str) -> str:
    return str(chain.sol_balance(address))
