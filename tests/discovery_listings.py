"""A fixed set of discovery listings, recorded straight into a Listings event store (as the follower would from
approved payments), and what searching them must answer: shared by the store tests and the SDK test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid5

from application.listings import Listings, VerifiedPayment
from domain.clients import ANONYMOUS_ID
from domain.listing import listing_id
from domain.networks import DEVNET, MAINNET

OWNER = "merchant:00000000-0000-0000-0000-000000000001"
WALLET_A, WALLET_B = "A" * 32 + "walletA1", "B" * 32 + "walletB2"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _schema(*names: str) -> dict[str, Any]:
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}}


# name: (url, owner, info, network, payTo, minutes after T0)
LISTINGS: dict[str, tuple[str, str, dict[str, Any], str, str, int]] = {
    "forecast": ("https://api.weather.example.com/v1/forecast", OWNER, {
        "title": "Weather forecast", "tags": ["weather", "forecast"], "description": "Seven-day forecast for any city.",
        "provider": {"name": "Acme Weather"}, "input": {"schema": _schema("city_name")}}, DEVNET.caip2, WALLET_A, 1),
    "tiles": ("https://tiles.maps.example.com/tiles", OWNER, {
        "title": "Map tiles", "tags": ["maps"], "description": "Vector tiles of the world, with weather radar.",
        "provider": {"name": "Cartography Ltd"}}, MAINNET.caip2, WALLET_B, 2),
    "headlines": ("https://api.news.example.com/headlines", OWNER, {
        "title": "Headlines", "tags": ["news", "weather"], "description": "Breaking news as it happens.",
        "type": "websocket", "provider": {"name": "Daily"}}, DEVNET.caip2, WALLET_B, 3),
    "conditions": ("https://api.example.com/weather", OWNER, {
        "title": "Weather", "tags": ["climate"], "description": "Current conditions."}, DEVNET.caip2, WALLET_A, 4),
    "translate": ("https://api.translate.example.com/translate", OWNER, {
        "title": "Translate", "tags": ["language", "ai"], "description": "Translate text between 40 languages.",
        "provider": {"name": "Polyglot"}, "input": {"schema": _schema("text", "target_lang")},
        "output": {"type": "application/json", "schema": _schema("translated_text")}}, MAINNET.caip2, WALLET_A, 5),
    "quote": ("http://anon.example.localhost/quote", ANONYMOUS_ID, {
        "title": "Quotes", "tags": ["finance"], "description": "Stock quotes with weather-independent prices."},
        DEVNET.caip2, WALLET_B, 6),
    "gone": ("https://gone.example.com/weather", OWNER, {
        "title": "Gone", "tags": ["weather"], "description": "Delisted weather."}, DEVNET.caip2, WALLET_A, 7),
}
# The forecast is paid again on mainnet after the others: it then accepts both networks and is the most recent.
AGAIN = ("forecast", MAINNET.caip2, 8)

# What each query answers (the whole ranking, every store): the query equal to a tag or the whole title first,
# then every word in the title or tags, then the rest; each group most recently updated first.
SEARCHES: dict[str, list[str]] = {
    "weather": ["forecast", "conditions", "headlines", "quote", "tiles"],
    "Weather  Forecast": ["forecast"],
    "forecast city": ["forecast"],
    "city_name": ["forecast"],
    "translated text": ["translate"],
    "acme": ["forecast"],
    "maps": ["tiles"],
    "language": ["translate"],
    "news weather": ["headlines"],
    "example": ["forecast", "quote", "translate", "conditions", "headlines", "tiles"],
    "xyzzy nonsense": [],
    "finance": [],  # an anonymous listing's tags (and title) are not served, so they are not searched either
    "quotes": ["quote"],  # its description is
}


def url(name: str) -> str:
    return LISTINGS[name][0]


class Trusting:
    """Ports for which the owner has verified every `example.com` domain, and discovery is on."""

    def list_verified_domains(self, merchant_id: str) -> tuple[str, ...]:
        return ("example.com",)

    def get_discovery_enabled(self, merchant_id: str) -> bool:
        return True

    def resolve(self, hostname: str) -> list[str]:
        return ["93.184.216.34"]

    def get_received(self, payment_id: UUID) -> None:
        return None


def trusting_follower(listings: Listings) -> Listings:
    """A sandbox follower of `listings`' store whose owner verified `example.com`."""
    return Listings(dict(listings.env), payments=Trusting(), discovery=Trusting(), resolver=Trusting(),
                    domains=Trusting(), sandbox=True)


def pay_again(listings: Listings, n: int, name: str, info: dict[str, Any], minutes: int) -> None:
    """The owner of listing `name` is paid again with new words in its extension, and confirms them."""
    resource, owner, _, network, pay_to, _ = LISTINGS[name]
    trusting = trusting_follower(listings)
    try:
        trusting.register_from_payment(_paid(n, resource, owner, info, network, pay_to, minutes))
        listing = trusting.get_listing(resource, "GET")
        assert listing is not None
        trusting.confirm(listing.id, owner, listing.details)
    finally:
        trusting.close()


def seed(listings: Listings) -> None:
    """Record every listing (in `listings`' store, by a sandbox follower whose owner verified `example.com`), each
    confirmed by its owner as it is registered (the anonymous one cannot be), the second payment of the forecast,
    and the delisting of `gone`."""
    trusting = trusting_follower(listings)  # the sandbox: the anonymous one is on a loopback host
    try:
        for n, (resource, owner, info, network, pay_to, minutes) in enumerate(LISTINGS.values()):
            trusting.register_from_payment(_paid(n, resource, owner, info, network, pay_to, minutes))
            if owner != ANONYMOUS_ID:
                listing = trusting.get_listing(resource, "GET")
                assert listing is not None
                trusting.confirm(listing.id, owner, listing.details)
        name, network, minutes = AGAIN
        resource, owner, info, _, pay_to, _ = LISTINGS[name]
        trusting.register_from_payment(_paid(99, resource, owner, info, network, pay_to, minutes))
        trusting.delist(listing_id(url("gone"), "GET"), OWNER)
    finally:
        trusting.close()


def _paid(n: int, resource: str, owner: str, info: dict[str, Any], network: str, pay_to: str,
          minutes: int) -> VerifiedPayment:
    asset = DEVNET.usdc_mint if network == DEVNET.caip2 else MAINNET.usdc_mint
    return VerifiedPayment(uuid5(UUID(int=0), f"payment {n}"), owner, {"bazaar": {"info": info}},
                           {"url": resource}, network, asset, 10_000, pay_to, T0 + timedelta(minutes=minutes))
