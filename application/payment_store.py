"""What every step of a payment shares: its records in the event store, saved once per step, its way in (the
payment's lock), and the settings and ports a command runs with (`Context`).

The way in is one layer, the same order on every store: the payment's lock first (`Locks`, which never blocks);
only when another request holds it is the terminal result cache read (`ResultCache`), so that a final answer is
still given meanwhile and anything else is `duplicate_request`. A request that holds the lock reads the event
store, which answers what the cache would (the cache is written from the same events by the functions the live
answer calls, application/outcomes.py): the common request, a new payment or a settle after its verify, which no
cache can answer, makes one lock call and no cache read, and the cache costs a round trip only when the lock is
contended. Verify takes no lock at all (docs/facilitator.md, "Verify takes no lock").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError

from application.errors import DuplicateRequestError
from application.payment_checks import PaymentRequest
from application.ports import Chains, Clock, FeePayers, Locks, ResultCache
from domain.claims import Claim, ClaimKind, claim_id
from domain.exact import ExactLimits
from domain.idempotency import payment_id
from domain.payment import Payment

IN_PROGRESS = "another request for this payment is in progress; retry"


@dataclass(frozen=True)
class Settings:
    limits: ExactLimits = ExactLimits()
    confirmation_budget_seconds: float = 15.0
    confirmation_poll_seconds: float = 0.25
    resend_seconds: float = 2.0  # while unconfirmed, the identical signed transaction is sent again this often
    lock_margin_seconds: float = 30.0
    # A delivery holds its payment's lock while its upstream answers (application/deliveries.py): this long more
    # than a settle holds it.
    delivery_seconds: float = 120.0


class PaymentStore:
    """The payments and claims of one `Payments` application: read, saved all-or-nothing, entered under a lock."""

    def __init__(self, app: Application[UUID], locks: Locks, cache: ResultCache) -> None:
        self._app, self._locks, self._cache = app, locks, cache

    def payment(self, key: str) -> Payment | None:
        return self.payment_by_id(payment_id(key))

    def payment_by_id(self, aggregate_id: UUID) -> Payment | None:
        try:
            found: object = self._app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        return found if isinstance(found, Payment) else None

    def claim(self, kind: ClaimKind, subject: str) -> Claim | None:
        try:
            found: object = self._app.repository.get(claim_id(kind, subject))
        except AggregateNotFoundError:
            return None
        return found if isinstance(found, Claim) else None

    def save(self, payment: Payment, request: PaymentRequest | None = None) -> None:
        """One save of the payment and the claims its request made: all of them are recorded, or none
        (`Application.save` records them in one `insert_events`). A version or a claim another request recorded
        first refuses the whole save: `DuplicateRequestError`."""
        claims = list(request.claims) if request else []
        if request:
            request.claims.clear()
        try:
            self._app.save(payment, *claims)
        except IntegrityError as race:
            raise DuplicateRequestError("another request for this payment, or for its transaction, won the race; "
                                        "retry") from race

    @contextmanager
    def admitted(self, key: str, operation: str, ttl: float,
                 usable: Callable[[dict[str, Any]], bool] = lambda cached: True) -> Iterator[dict[str, Any] | None]:
        """None with this request holding the payment's lock; when another request holds it, the terminal result
        the cache holds for `operation` if this request may replay it (`usable`), else `DuplicateRequestError`."""
        with self._locks.hold(key, ttl) as held:
            if held:
                yield None
                return
        cached = self._cache.get(key, operation)
        if cached is None or not usable(cached):
            raise DuplicateRequestError(IN_PROGRESS)
        yield cached

    @contextmanager
    def exclusive(self, key: str, ttl: float) -> Iterator[None]:
        """This request holding the payment's lock, or `DuplicateRequestError`."""
        with self._locks.hold(key, ttl) as held:
            if not held:
                raise DuplicateRequestError(IN_PROGRESS)
            yield


@dataclass(frozen=True)
class Context:
    """What the steps of one command use: built by `Payments` for each command from its current collaborators."""

    store: PaymentStore
    chains: Chains
    fee_payers: FeePayers
    clock: Clock
    settings: Settings
