"""The DiscoveryListing aggregate: one paid resource (URL and method) in the public catalog.

It is registered by the first approved payment that carried `extensions.bazaar` for it, and follows later ones:
their metadata and payment terms replace its own, each network's terms kept apart. The client that registered it
owns it; a registered account may take over a listing the anonymous identity registered, never the reverse. While
its owner has discovery turned off, the listing is frozen: it stays as it was and takes no update. Its owner may
delist it (from the console): the catalog drops it, and later payments for that resource do not list it again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.clients import ANONYMOUS_ID
from domain.errors import DomainError

# Unchanged metadata is recorded again at most this often, so `lastUpdated` also tells a reader the resource is
# still being paid for, without an event per payment.
REFRESH_AFTER = timedelta(hours=24)
LISTING_NAMESPACE = uuid5(NAMESPACE_URL, "https://paywarden.dev/discovery-listings")


def listing_id(resource: str, method: str) -> UUID:
    return uuid5(LISTING_NAMESPACE, f"{method} {resource}")


class Change(StrEnum):
    """What one approved payment did to a listing."""

    REGISTERED = "registered"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    DISABLED = "disabled"
    DELISTED = "delisted"


class ListingOwnershipError(DomainError):
    """The payment's client does not own the listing of that resource."""


class DiscoveryListing(Aggregate):
    class Registered(Aggregate.Created):
        resource: str
        method: str
        owner: str
        details: dict[str, Any]
        offers: list[dict[str, Any]]
        payment_id: UUID
        verified_at: datetime

    class MetadataUpdated(Aggregate.Event):
        owner: str
        details: dict[str, Any]
        offers: list[dict[str, Any]]
        payment_id: UUID
        verified_at: datetime

    class Disabled(Aggregate.Event):
        payment_id: UUID  # the first update refused because the owner turned discovery off

    class Enabled(Aggregate.Event):
        payment_id: UUID  # the first update taken after the owner turned discovery back on

    class Delisted(Aggregate.Event):
        owner: str

    @staticmethod
    def create_id(resource: str, method: str, **_: Any) -> UUID:
        return listing_id(resource, method)

    @event(Registered)
    def __init__(self, resource: str, method: str, owner: str, details: dict[str, Any],
                 offers: list[dict[str, Any]], payment_id: UUID, verified_at: datetime) -> None:
        self.resource, self.method, self.owner = resource, method, owner
        self.details, self.offers, self.verified_at = details, offers, verified_at
        self.enabled, self.delisted = True, False

    @classmethod
    def register(cls, resource: str, method: str, owner: str, details: dict[str, Any], offer: dict[str, Any],
                 payment_id: UUID, verified_at: datetime) -> DiscoveryListing:
        return cls(resource=resource, method=method, owner=owner, details=details, offers=[offer],
                   payment_id=payment_id, verified_at=verified_at)

    def update(self, owner: str, details: dict[str, Any], offer: dict[str, Any], payment_id: UUID,
               verified_at: datetime, *, discovery_enabled: bool) -> Change:
        if owner != self.owner and not (self.owner == ANONYMOUS_ID and owner != ANONYMOUS_ID):
            raise ListingOwnershipError(f"{self.method} {self.resource} is listed by another account")
        if self.delisted:
            return Change.DELISTED
        if not discovery_enabled:
            if self.enabled:
                self._disable(payment_id=payment_id)
            return Change.DISABLED
        if not self.enabled:
            self._enable(payment_id=payment_id)
        offers = merge_offers(self.offers, offer)
        fresh = verified_at - self.verified_at < REFRESH_AFTER
        if (owner, details, offers) == (self.owner, self.details, self.offers) and fresh:
            return Change.UNCHANGED
        self._update(owner=owner, details=details, offers=offers, payment_id=payment_id, verified_at=verified_at)
        return Change.UPDATED

    @event(MetadataUpdated)
    def _update(self, owner: str, details: dict[str, Any], offers: list[dict[str, Any]], payment_id: UUID,
                verified_at: datetime) -> None:
        self.owner, self.details, self.offers, self.verified_at = owner, details, offers, verified_at

    @event(Disabled)
    def _disable(self, payment_id: UUID) -> None:
        self.enabled = False

    @event(Enabled)
    def _enable(self, payment_id: UUID) -> None:
        self.enabled = True

    def delist(self, owner: str) -> None:
        """Only its owner delists a listing; the anonymous identity has no console to do it from."""
        if owner != self.owner or owner == ANONYMOUS_ID:
            raise ListingOwnershipError(f"{self.method} {self.resource} is not yours")
        if not self.delisted:
            self._delist(owner=owner)

    @event(Delisted)
    def _delist(self, owner: str) -> None:
        self.delisted = True


def merge_offers(offers: list[dict[str, Any]], offer: dict[str, Any]) -> list[dict[str, Any]]:
    """The payment terms of each (scheme, network, asset): a new payment's replace those it matches."""
    def key(o: dict[str, Any]) -> tuple[str, str, str]:
        return o["scheme"], o["network"], o["asset"]

    merged = [offer if key(o) == key(offer) else o for o in offers]
    return merged if offer in merged else [*merged, offer]
