"""The DiscoveryListing aggregate: one paid resource (URL and method) in the public catalog; and the ResourceClaim
that makes a resource URL one merchant's.

A listing is registered by the first approved payment that carried `extensions.bazaar` for it, and follows later
ones: their payment terms replace its own, each network's terms kept apart. What a payment's extension says (title,
tags, provider, descriptions, schemas) is only *proposed*: a payer can write anything there. What the catalog shows
of a merchant's listing is what the merchant *declared*: its proxy route's discovery settings (recorded with each
payment through its gateway), or a proposal the merchant confirmed in the console. The client that registered it
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


CLAIM_NAMESPACE = uuid5(NAMESPACE_URL, "https://paywarden.dev/resource-claims")


def listing_id(resource: str, method: str) -> UUID:
    return uuid5(LISTING_NAMESPACE, f"{method} {resource}")


def claim_id(resource: str) -> UUID:
    return uuid5(CLAIM_NAMESPACE, resource)


class ResourceClaim(Aggregate):
    """A resource URL (every method of it) is its first lister's: the id derives from the canonical URL, so two
    claims of one URL cannot both be saved (the event store refuses the second creation). The anonymous identity's
    claim passes to the first registered account that lists the URL (anyone can act as the anonymous identity)."""

    class Claimed(Aggregate.Created):
        resource: str
        owner: str

    class Transferred(Aggregate.Event):
        owner: str

    @staticmethod
    def create_id(resource: str, **_: Any) -> UUID:
        return claim_id(resource)

    @event(Claimed)
    def __init__(self, resource: str, owner: str) -> None:
        self.resource, self.owner = resource, owner

    def take(self, owner: str) -> bool:
        """Whether `owner` may list the URL; a registered account takes over the anonymous identity's claim."""
        if owner == self.owner:
            return True
        if self.owner == ANONYMOUS_ID and owner != ANONYMOUS_ID:
            self._transfer(owner=owner)
            return True
        return False

    @event(Transferred)
    def _transfer(self, owner: str) -> None:
        self.owner = owner


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
    declared: dict[str, Any] | None = None  # a snapshot taken before the field existed holds no declaration

    class Registered(Aggregate.Created):
        resource: str
        method: str
        owner: str
        details: dict[str, Any]
        offers: list[dict[str, Any]]
        payment_id: UUID
        verified_at: datetime
        declared: dict[str, Any] | None = None  # events recorded before the field: nothing declared

    class MetadataUpdated(Aggregate.Event):
        owner: str
        details: dict[str, Any]  # the latest payment's proposal
        offers: list[dict[str, Any]]
        payment_id: UUID
        verified_at: datetime
        declared: dict[str, Any] | None = None  # what the catalog shows: the merchant's declaration, if any

    class Confirmed(Aggregate.Event):
        """The owner declared the proposal it saw (from the console): the catalog shows it from now on."""

        owner: str
        declared: dict[str, Any]
        details: dict[str, Any]
        offers: list[dict[str, Any]]
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
                 offers: list[dict[str, Any]], payment_id: UUID, verified_at: datetime,
                 declared: dict[str, Any] | None = None) -> None:
        self.resource, self.method, self.owner = resource, method, owner
        self.details, self.offers, self.verified_at = details, offers, verified_at
        self.declared = declared
        self.enabled, self.delisted = True, False

    @classmethod
    def register(cls, resource: str, method: str, owner: str, details: dict[str, Any], offer: dict[str, Any],
                 payment_id: UUID, verified_at: datetime, declared: dict[str, Any] | None = None) -> DiscoveryListing:
        """`declared`: the merchant's own declaration (its proxy route's settings), when the payment came with one."""
        return cls(resource=resource, method=method, owner=owner, details=details, offers=[offer],
                   payment_id=payment_id, verified_at=verified_at, declared=declared)

    def update(self, owner: str, details: dict[str, Any], offer: dict[str, Any], payment_id: UUID,
               verified_at: datetime, *, discovery_enabled: bool, declared: dict[str, Any] | None = None) -> Change:
        """`declared` replaces the listing's declaration when given (a route's settings are the merchant's word
        each time); else the declaration stands whatever the payment proposes."""
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
        declared = self.declared if declared is None else declared
        if (owner, details, offers, declared) == (self.owner, self.details, self.offers, self.declared) and fresh:
            return Change.UNCHANGED
        self._update(owner=owner, details=details, offers=offers, payment_id=payment_id, verified_at=verified_at,
                     declared=declared)
        return Change.UPDATED

    @event(MetadataUpdated)
    def _update(self, owner: str, details: dict[str, Any], offers: list[dict[str, Any]], payment_id: UUID,
                verified_at: datetime, declared: dict[str, Any] | None = None) -> None:
        self.owner, self.details, self.offers, self.verified_at = owner, details, offers, verified_at
        self.declared = declared

    def confirm(self, owner: str, proposal: dict[str, Any]) -> None:
        """The owner declares the proposal it was shown (`proposal`, which must still be the latest: a payment
        that proposed something else meanwhile makes the owner look again)."""
        if owner != self.owner or owner == ANONYMOUS_ID or self.delisted:
            raise ListingOwnershipError(f"{self.method} {self.resource} is not yours")
        if proposal != self.details:
            raise ListingOwnershipError(f"{self.method} {self.resource} has a newer proposal: look again")
        if self.declared != self.details:
            self._confirm(owner=owner, declared=self.details, details=self.details, offers=self.offers,
                          verified_at=self.verified_at)

    @event(Confirmed)
    def _confirm(self, owner: str, declared: dict[str, Any], details: dict[str, Any], offers: list[dict[str, Any]],
                 verified_at: datetime) -> None:
        self.declared = declared

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
