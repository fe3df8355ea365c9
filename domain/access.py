"""Access rules of proxy routes, and the grants of "pay once, come back" (Sign-In-With-X).

A route's access rule is `per-request` (every request pays; the default) or `once-paid`: a wallet with a CONFIRMED
payment for the route keeps access, for `access_seconds` after that payment when set (a day pass), else for good.
A returning wallet proves itself with a signed Sign-In-With-X message; each grant is an `AccessGrant`, whose id is
derived from the message's nonce, so a nonce grants once: a second grant of it cannot be saved (the event store's
uniqueness decides, across every worker and host sharing the store).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.errors import DomainError

PER_REQUEST = "per-request"
ONCE_PAID = "once-paid"
ACCESS_RULES = (PER_REQUEST, ONCE_PAID)
MAX_ACCESS_SECONDS = 366 * 24 * 3600
GRANT_NAMESPACE = UUID("5d0f3c56-8a3e-4f57-b7a1-2c1e9b6d4a70")


class AccessRuleError(DomainError):
    """An access rule the route cannot have; `field` names the input at fault."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def check_access(access: Any, seconds: Any) -> tuple[str, int | None]:
    """The route's (access, access_seconds), checked: seconds only with `once-paid`, 1 to a year."""
    if access not in ACCESS_RULES:
        raise AccessRuleError(f"access is {' or '.join(ACCESS_RULES)}", field="access")
    if seconds is None:
        return access, None
    if access != ONCE_PAID:
        raise AccessRuleError("accessSeconds is only for a once-paid route", field="accessSeconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not 1 <= seconds <= MAX_ACCESS_SECONDS:
        raise AccessRuleError(f"accessSeconds is 1 to {MAX_ACCESS_SECONDS}", field="accessSeconds")
    return access, seconds


def access_until(paid_at: datetime, seconds: int | None) -> datetime | None:
    """When access bought at `paid_at` ends (None: it does not)."""
    return None if seconds is None else paid_at + timedelta(seconds=seconds)


def grant_id(nonce: str) -> UUID:
    return uuid5(GRANT_NAMESPACE, nonce)


class AccessGrant(Aggregate):
    """A wallet that paid for a route came back with a signed message (nonce `nonce`) and was let in."""

    class Granted(Aggregate.Created):
        nonce: str
        address: str
        service_id: str
        route_id: str
        resource: str
        paid_at: str  # the CONFIRMED payment's time the grant rests on (ISO 8601, UTC)

    @staticmethod
    def create_id(nonce: str, **_: Any) -> UUID:
        return grant_id(nonce)

    @event(Granted)
    def __init__(self, nonce: str, address: str, service_id: str, route_id: str, resource: str,
                 paid_at: str) -> None:
        self.nonce, self.address, self.service_id, self.route_id = nonce, address, service_id, route_id
        self.resource, self.paid_at = resource, paid_at
