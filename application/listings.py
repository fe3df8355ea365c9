"""The Listings application: discovery listings, registered from the approved payments that carried
`extensions.bazaar`.

It is an event-sourced projection of the Payments notification log: each `Payment.Approved` is processed once,
and the listing events it causes are recorded in one transaction with the position in that log, so a restarted
follower resumes where it stopped and never registers twice. It runs in the projection workers, never on the
request path: a verification answers the same, as fast, with or without the extension. A registration the rules
refuse, or one for a merchant who turned discovery off, is skipped silently: logged and counted, nothing recorded.

Whose a listing is (docs/discovery.md): its resource URL must be the merchant's, on one of its verified domains
(`VerifiedDomains`) or a route of its proxy services (`Gateways`), or, in the sandbox, a loopback host; the first
merchant to list a URL claims it (`ResourceClaim`, saved with the listing), and no other takes it over. What the
catalog shows of it is what the merchant declared: its route's discovery settings, or a proposal it confirmed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import singledispatchmethod
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.projection import EventSourcedProjection
from eventsourcing.system import Leader
from eventsourcing.utils import get_topic

from application.ports import (
    DiscoveryOff,
    DiscoverySettings,
    Gateways,
    NoGateways,
    NoReceivedPayments,
    NoVerifiedDomains,
    ReceivedPayments,
    RecentEvents,
    Resolver,
    ResolvesNothing,
    VerifiedDomains,
)
from domain.clients import ANONYMOUS_ID, merchant_of
from domain.discovery import (
    DiscoveryInvalidError,
    ListingDetails,
    Reason,
    ResourceUrl,
    check_addresses,
    check_owner,
    parse_info,
    parse_resource_url,
    provider_url,
)
from domain.discovery_routes import apply_route_template, route_params
from domain.listing import Change, DiscoveryListing, ListingOwnershipError, ResourceClaim, claim_id, listing_id
from domain.networks import DEFAULT_MAX_TIMEOUT_SECONDS, SCHEME_EXACT
from domain.payment import Payment

log = logging.getLogger("paywarden.discovery")


class StoredPayments:
    """`ReceivedPayments` read from the Payments event store: payment events never change once recorded."""

    def __init__(self, payments: Application[UUID]) -> None:
        self._events = payments.repository.event_store

    def get_received(self, payment_id: UUID) -> Payment.Received | None:
        first = next(iter(self._events.get(payment_id, limit=1)), None)
        return first if isinstance(first, Payment.Received) else None


class BatchFirst:
    """The projection worker's `ReceivedPayments`: a payment's Received from the batch of the Payments log being
    applied when it is there (a verify's Received and Approved are usually read together), decoded once for every
    read model; else from `stored`. The same stored event either way."""

    def __init__(self, batch: RecentEvents, stored: ReceivedPayments) -> None:
        self._batch, self._stored = batch, stored

    def get_received(self, payment_id: UUID) -> Payment.Received | None:
        recent = self._batch.get(payment_id, 1)
        if isinstance(recent, Payment.Received):
            return recent
        return self._stored.get_received(payment_id)


@dataclass(frozen=True)
class VerifiedPayment:
    """An approved payment, as discovery needs it."""

    payment_id: UUID
    client_id: str
    extensions: dict[str, Any]
    resource: dict[str, Any] | None
    network: str
    asset: str
    amount: int
    pay_to: str
    verified_at: datetime
    max_timeout_seconds: int = DEFAULT_MAX_TIMEOUT_SECONDS

    @classmethod
    def of(cls, received: Payment.Received, approved: Payment.Approved) -> VerifiedPayment:
        return cls(received.originator_id, received.client_id, received.extensions, received.resource,
                   received.network, received.asset, received.amount, received.pay_to, approved.timestamp,
                   # Events recorded before the field existed carry no value: the spec's default applies.
                   getattr(received, "max_timeout_seconds", DEFAULT_MAX_TIMEOUT_SECONDS))

    @property
    def registered(self) -> bool:
        return self.client_id != ANONYMOUS_ID


class Listings(EventSourcedProjection[UUID], Leader[UUID]):
    """Follows the Payments log (`Payment.Approved`); records `DiscoveryListing` events. A Leader for the owner's
    delisting and confirmation only (projections/read_your_writes.py): the listings it records as it follows
    payments are the catalog worker's to apply."""

    topics = (get_topic(Payment.Approved),)
    notify_topics = (get_topic(DiscoveryListing.Delisted), get_topic(DiscoveryListing.Confirmed))
    # A listing is loaded for every payment that describes it, and changes with each new price or once a day: a
    # snapshot every 50 events bounds what a load replays (docs/performance.md).
    snapshotting_intervals = {DiscoveryListing: 50}

    def __init__(self, env: Mapping[str, str] | None = None, *, payments: ReceivedPayments | None = None,
                 discovery: DiscoverySettings | None = None, resolver: Resolver | None = None,
                 production: bool = False, domains: VerifiedDomains | None = None, gateways: Gateways | None = None,
                 sandbox: bool = False) -> None:
        """`Listings(env)` alone (as eventsourcing's runners build it) reads its log and lists nothing new.
        `production`: only public hosts are listed; `sandbox`: loopback hosts are anyone's to list."""
        super().__init__(env)
        self._payments: ReceivedPayments = payments or NoReceivedPayments()
        self._discovery: DiscoverySettings = discovery or DiscoveryOff()
        self._resolver: Resolver = resolver or ResolvesNothing()
        self._domains: VerifiedDomains = domains or NoVerifiedDomains()
        self._gateways: Gateways = gateways or NoGateways()
        self._production, self._sandbox = production, sandbox
        self.counts: Counter[str] = Counter()  # by outcome: registered, updated, ..., skipped:<reason>

    # -- commands -----------------------------------------------------------------------------------------

    def register_from_payment(self, payment: VerifiedPayment) -> Change | None:
        """Register or update the listing a payment describes; None when skipped (logged and counted)."""
        change, listing, claim = self._decide(payment)
        if listing is not None:
            self.save(claim, listing)
        return change

    @singledispatchmethod
    def policy(self, domain_event: Any, processing_event: ProcessingEvent[UUID]) -> None:
        """Other payment events list nothing."""

    @policy.register
    def _(self, approved: Payment.Approved, processing_event: ProcessingEvent[UUID]) -> None:
        received = self._payments.get_received(approved.originator_id)
        if received is None or "bazaar" not in (received.extensions or {}):
            return
        _, listing, claim = self._decide(VerifiedPayment.of(received, approved))
        if listing is not None:
            processing_event.collect_events(claim, listing)

    def delist(self, listing: UUID, owner: str) -> None:
        """The owner's command (console): the catalog drops the listing. Unknown and not-owned read alike."""
        try:
            found: DiscoveryListing = self.repository.get(listing)
        except AggregateNotFoundError:
            raise ListingOwnershipError(f"no listing {listing}") from None
        found.delist(owner)
        self.save(found)

    def confirm(self, listing: UUID, owner: str, proposal: dict[str, Any]) -> None:
        """The owner's command (console): the catalog shows `proposal` (what the owner was shown, which must still
        be the latest) as the merchant's declaration. Unknown and not-owned read alike."""
        try:
            found: DiscoveryListing = self.repository.get(listing)
        except AggregateNotFoundError:
            raise ListingOwnershipError(f"no listing {listing}") from None
        found.confirm(owner, proposal)
        self.save(found)

    # -- queries ------------------------------------------------------------------------------------------

    def get_listing(self, resource: str, method: str) -> DiscoveryListing | None:
        """The listing of `resource` and `method` (for an MCP tool, `POST <tool name>`), if any."""
        try:
            return self.repository.get(listing_id(resource, method))
        except AggregateNotFoundError:
            return None

    def get_claim(self, resource: str) -> ResourceClaim | None:
        """Whose the URL is, if anyone's yet."""
        try:
            claim: ResourceClaim = self.repository.get(claim_id(resource))
        except AggregateNotFoundError:
            return None
        return claim

    # -- steps --------------------------------------------------------------------------------------------

    def _decide(self, payment: VerifiedPayment) -> tuple[Change | None, DiscoveryListing | None,
                                                         ResourceClaim | None]:
        try:
            url, details, declared = self._validate(payment)
            claim = self._claim(url, payment.client_id)
            enabled = self._discovery_enabled(payment.client_id)
            listing = self.get_listing(url, details.key)
            offer = _offer(payment)
            stated = declared.as_dict() if declared is not None else None
            if listing is None:
                if not enabled:
                    return self._skip(payment, "discovery_disabled", "the merchant turned discovery off")
                listing = DiscoveryListing.register(url, details.key, payment.client_id, details.as_dict(),
                                                    offer, payment.payment_id, payment.verified_at, declared=stated)
                change = Change.REGISTERED
            else:
                change = listing.update(payment.client_id, details.as_dict(), offer, payment.payment_id,
                                        payment.verified_at, discovery_enabled=enabled, declared=stated)
        except DiscoveryInvalidError as invalid:
            return self._skip(payment, str(invalid.reason), invalid.message)
        except ListingOwnershipError as taken:
            return self._skip(payment, "not_owner", str(taken))
        self.counts[str(change)] += 1
        log.info("discovery listing %s: %s %s (payment %s)", change, details.key, url, payment.payment_id)
        return change, listing, claim

    def _validate(self, payment: VerifiedPayment) -> tuple[str, ListingDetails, ListingDetails | None]:
        """The listing's URL, the payment's proposal, and the merchant's declaration when the URL is a route of
        its proxy (whose settings are the merchant's word); DiscoveryInvalidError when the URL is not the
        merchant's to list."""
        bazaar = payment.extensions.get("bazaar")
        details = parse_info(bazaar, registered=payment.registered, production=self._production)
        url = (payment.resource or {}).get("url")
        if not url:
            raise DiscoveryInvalidError(Reason.MISSING_RESOURCE, "the payment payload names no resource.url")
        resource = parse_resource_url(url, production=self._production)
        declared = None
        route = self._gateways.find_gateway_route(resource.url, details.method)
        if route is not None:
            if route.owner != payment.client_id:
                raise DiscoveryInvalidError(Reason.NOT_OWNER, "the gateway URL is another merchant's service")
            resource = parse_resource_url(route.resource, production=self._production)
            params = route_params(route.resource)
            details = replace(details, path_params=params)
            if route.info is not None:
                declared = replace(parse_info({"info": route.info}, registered=True, production=self._production),
                                   path_params=params)
        else:
            resource, details = self._template(resource, details, bazaar)
            merchant = merchant_of(payment.client_id)
            check_owner(resource, self._domains.list_verified_domains(merchant) if merchant else (),
                        sandbox=self._sandbox)
        # provider.url follows the resource URL's rules: an invalid one skips the registration (docs/discovery.md).
        for link in (resource, provider_url(details, production=self._production),
                     provider_url(declared, production=self._production) if declared else None):
            if self._production and link is not None and not link.is_address:
                check_addresses(link.host, self._resolver.resolve(link.host))
        return resource.url, details, declared

    @staticmethod
    def _template(resource: ResourceUrl, details: ListingDetails, bazaar: Any) -> tuple[ResourceUrl, ListingDetails]:
        """One listing per route: the x402 SDK's `routeTemplate` in place of the paid path, when it has one."""
        template = bazaar.get("routeTemplate") if isinstance(bazaar, dict) else None
        if template is None:
            return resource, details
        resource, params = apply_route_template(resource, template)
        return resource, replace(details, path_params=params)

    def _claim(self, url: str, owner: str) -> ResourceClaim:
        """The URL's claim, taken by `owner` (made when the URL is new); ListingOwnershipError when another
        merchant's."""
        claim = self.get_claim(url)
        if claim is None:
            return ResourceClaim(resource=url, owner=owner)
        if not claim.take(owner):
            raise ListingOwnershipError(f"{url} is listed by another account")
        return claim

    def _discovery_enabled(self, client_id: str) -> bool:
        merchant = merchant_of(client_id)
        return merchant is None or self._discovery.get_discovery_enabled(merchant)

    def _skip(self, payment: VerifiedPayment, reason: str, message: str) -> tuple[None, None, None]:
        self.counts[f"skipped:{reason}"] += 1
        log.info("discovery registration skipped (%s): %s (payment %s)", reason, message, payment.payment_id)
        return None, None, None


def _offer(payment: VerifiedPayment) -> dict[str, Any]:
    resource = payment.resource or {}
    return {
        "scheme": SCHEME_EXACT, "network": payment.network, "asset": payment.asset, "amount": payment.amount,
        "pay_to": payment.pay_to, "max_timeout_seconds": payment.max_timeout_seconds,
        "description": str(resource.get("description") or ""), "mime_type": str(resource.get("mimeType") or ""),
    }
