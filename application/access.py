"""The Access application: a wallet that paid for a `once-paid` route comes back with Sign-In-With-X.

`enter` takes the request's SIGN-IN-WITH-X header and the route it asks for, and lets it in or says why not:
- the message and its signature are checked by the `SignIns` port (the x402 SDK's own server-side validation and
  ed25519 verification, interfaces/adapters/siwx.py): the message's domain and URI origin are this gateway's,
  it is within its issued-at age and expiry, the signature is the address's;
- here: its URI is the very resource asked for (a message for another route or service is refused), its chain is
  the route's network, the address has a CONFIRMED payment for this route (`PaidRoutes`, the read model of the
  payment events) within the route's access period, and its nonce has not granted before. The grant is an
  `AccessGrant` saved with the nonce as its identity: a replay, on any worker or host, fails in the event store.
Every refusal is an `AccessRefusedError` with a code (the proxy answers the ordinary 402 with it), never a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError

from domain.access import ONCE_PAID, AccessGrant, access_until
from domain.proxy_service import Route

NOT_PAID = "siwx_not_paid"
ACCESS_EXPIRED = "siwx_access_expired"
OTHER_RESOURCE = "siwx_other_resource"
OTHER_CHAIN = "siwx_other_chain"
NONCE_USED = "siwx_nonce_used"
NOT_ONCE_PAID = "siwx_not_accepted"


class AccessRefusedError(Exception):
    """A Sign-In-With-X that does not let its wallet in: `code` says why (docs/proxy.md lists them)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class SignedIn:
    """A Sign-In-With-X message whose fields and signature were checked: who signed it, for what, with which
    nonce."""

    address: str
    uri: str
    chain_id: str
    nonce: str


class SignIns(Protocol):
    """Checks a SIGN-IN-WITH-X header for this gateway's `origin` (scheme://host[:port]); `AccessRefusedError`
    when it is malformed, for another domain, expired, too old or badly signed."""

    def check(self, header: str, origin: str) -> SignedIn: ...


class PaidRoutes(Protocol):
    """The read model of payments made through proxy routes (projections/paid_access.py)."""

    def last_paid(self, payer: str, service_id: str, route_id: str) -> datetime | None:
        """When `payer`'s latest CONFIRMED payment for that route was confirmed; None if it never paid it."""
        ...


@dataclass(frozen=True)
class Grant:
    address: str
    paid_at: datetime
    until: datetime | None  # None: the access does not end


class Access(Application[UUID]):
    """Grants of `once-paid` routes; each grant an `AccessGrant` event."""

    def __init__(self, env: Mapping[str, str] | None = None, *, sign_ins: SignIns | None = None,
                 paid: PaidRoutes | None = None, now: Callable[[], datetime] | None = None) -> None:
        super().__init__(env)
        self._sign_ins, self._paid = sign_ins, paid
        self._now = now or (lambda: datetime.now(UTC))

    def enter(self, header: str, *, origin: str, resource: str, service_id: str, route: Route) -> Grant:
        """Let the signed-in wallet in to `resource` (the route's gateway URL), or `AccessRefusedError`."""
        if route.access != ONCE_PAID:
            raise AccessRefusedError(NOT_ONCE_PAID, "this route charges every request; sign a payment")
        if self._sign_ins is None or self._paid is None:
            raise RuntimeError("Access needs its sign-in checks and the paid routes read model")
        signed = self._sign_ins.check(header, origin)
        if signed.uri != resource:
            raise AccessRefusedError(OTHER_RESOURCE, f"the message signs in to {signed.uri}, not to {resource}")
        if signed.chain_id != route.network:
            raise AccessRefusedError(OTHER_CHAIN, f"the message is for chain {signed.chain_id}; this route is "
                                                  f"paid on {route.network}")
        paid_at = self._paid.last_paid(signed.address, service_id, route.id)
        if paid_at is None:
            raise AccessRefusedError(NOT_PAID, f"{signed.address} has no settled payment for this route; pay it")
        until, now = access_until(paid_at, route.access_seconds), self._now()
        if until is not None and until <= now:
            raise AccessRefusedError(ACCESS_EXPIRED, f"the access bought at {paid_at.isoformat()} ended at "
                                                     f"{until.isoformat()}; pay again")
        grant = AccessGrant(nonce=signed.nonce, address=signed.address, service_id=service_id, route_id=route.id,
                            resource=resource, paid_at=paid_at.isoformat())
        try:
            self.save(grant)
        except IntegrityError:
            raise AccessRefusedError(NONCE_USED, "this message was used before; sign a fresh challenge") from None
        return Grant(signed.address, paid_at, until)

    def get_grant(self, grant_id: UUID) -> AccessGrant | None:
        try:
            found: object = self.repository.get(grant_id)
        except AggregateNotFoundError:
            return None
        return found if isinstance(found, AccessGrant) else None
