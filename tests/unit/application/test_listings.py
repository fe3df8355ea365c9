"""The Listings application with fakes for its ports: what an approved payment lists, what it skips, and that
each approved payment is processed once (tracking recorded with the listing events)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from eventsourcing.persistence import IntegrityError, Tracking

from application.listings import Listings, VerifiedPayment
from domain.clients import ANONYMOUS_ID
from domain.listing import Change, listing_id
from domain.payment import Payment

MERCHANT_ID = "6f1c1d1e-0000-4000-8000-000000000001"
MERCHANT = f"merchant:{MERCHANT_ID}"
URL = "https://api.weather.example.com/forecast"
INFO = {"title": "Weather", "description": "Forecasts.", "tags": ["weather"], "provider": {"name": "Acme"}}


class FakeResolver:
    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers, self.asked = answers, []

    def resolve(self, hostname: str) -> list[str]:
        self.asked.append(hostname)
        return self.answers.get(hostname, [])


class FakeDiscovery:
    def __init__(self) -> None:
        self.disabled: set[str] = set()

    def get_discovery_enabled(self, merchant_id: str) -> bool:
        return merchant_id not in self.disabled


class FakePayments:
    def __init__(self) -> None:
        self.received: dict = {}

    def get_received(self, payment_id):
        return self.received.get(payment_id)


@pytest.fixture
def ports():
    return FakePayments(), FakeDiscovery(), FakeResolver({"api.weather.example.com": ["93.184.216.34"],
                                                           "intranet.example.com": ["10.0.0.8"]})


def listings(ports, production: bool = False) -> Listings:
    payments, discovery, resolver = ports
    return Listings(payments=payments, discovery=discovery, resolver=resolver, production=production)


def payment(client_id: str = MERCHANT, url: str = URL, info: dict | None = None, **extensions) -> VerifiedPayment:
    return VerifiedPayment(uuid4(), client_id, {"bazaar": {"info": INFO if info is None else info}, **extensions},
                           {"url": url, "description": "Forecast"}, "solana:devnet", "MINT", 10_000, "WALLET",
                           datetime.now(UTC))


def test_an_approved_payment_with_bazaar_registers_then_updates_its_listing(ports):
    app = listings(ports)
    assert app.register_from_payment(payment()) is Change.REGISTERED
    assert app.register_from_payment(payment(info={**INFO, "title": "Weather Pro"})) is Change.UPDATED
    listing = app.get_listing(URL, "GET")
    assert listing.details["title"] == "Weather Pro" and listing.version == 2
    assert app.counts == {"registered": 1, "updated": 1}


def test_the_anonymous_identity_lists_without_title_tags_or_provider(ports):
    app = listings(ports)
    app.register_from_payment(payment(ANONYMOUS_ID))
    details = app.get_listing(URL, "GET").details
    assert (details["title"], details["tags"], details["provider"]) == (None, [], None)


def test_a_merchant_with_discovery_off_registers_nothing_and_freezes_what_it_has(ports):
    app = listings(ports)
    app.register_from_payment(payment())
    ports[1].disabled.add(MERCHANT_ID)
    assert app.register_from_payment(payment(info={**INFO, "title": "Changed"})) is Change.DISABLED
    assert app.register_from_payment(payment(url="https://api.weather.example.com/other")) is None
    assert app.get_listing(URL, "GET").details["title"] == "Weather"
    assert app.get_listing("https://api.weather.example.com/other", "GET") is None
    assert app.counts["skipped:discovery_disabled"] == 1


def test_in_production_the_hostname_is_resolved_and_a_private_answer_is_skipped(ports):
    app = listings(ports, production=True)
    assert app.register_from_payment(payment(url="https://intranet.example.com/x")) is None
    assert app.register_from_payment(payment(url="https://unknown.example.com/x")) is None
    assert app.register_from_payment(payment()) is Change.REGISTERED
    assert ports[2].asked == ["intranet.example.com", "unknown.example.com", "api.weather.example.com"]
    assert app.counts["skipped:private_address"] == app.counts["skipped:unresolvable"] == 1


def test_outside_production_nothing_is_resolved(ports):
    app = listings(ports)
    assert app.register_from_payment(payment(url="http://localhost:8080/x")) is Change.REGISTERED
    assert ports[2].asked == []


def test_invalid_registrations_are_skipped_and_counted_never_raised(ports):
    app = listings(ports)
    assert app.register_from_payment(payment(url="ftp://files.example.com/x")) is None
    assert app.register_from_payment(payment(info={"method": "TRACE"})) is None
    no_resource = VerifiedPayment(uuid4(), MERCHANT, {"bazaar": {}}, None, "n", "a", 1, "p", datetime.now())
    assert app.register_from_payment(no_resource) is None
    assert app.counts == {"skipped:invalid_url": 1, "skipped:invalid_method": 1, "skipped:missing_resource": 1}


def test_another_account_cannot_overwrite_a_listing(ports):
    app = listings(ports)
    app.register_from_payment(payment())
    assert app.register_from_payment(payment("merchant:someone-else", info={"title": "Mine now"})) is None
    assert app.get_listing(URL, "GET").owner == MERCHANT and app.counts["skipped:not_owner"] == 1


def approved_events(payments: FakePayments, extensions: dict):
    """The Approved event of a payment (its Received kept by the fake store), as the Payments log carries it."""
    received = Payment(idempotency_key=uuid4().hex, client_id=MERCHANT, network="solana:devnet", asset="MINT",
                       amount=10_000, pay_to="WALLET", terms_digest="d", client_signature="s",
                       extensions=extensions, resource={"url": URL})
    received.approve("PAYER", "FEE", "HASH")
    created, approved = received.collect_events()
    payments.received[received.id] = created
    return approved


def test_the_policy_processes_each_approved_payment_once_with_its_tracking(ports):
    app = listings(ports)
    approved = approved_events(ports[0], {"bazaar": {"info": INFO}})
    app.process_event(approved, Tracking("Payments", 1))
    with pytest.raises(IntegrityError):
        app.process_event(approved, Tracking("Payments", 1))
    assert app.recorder.max_tracking_id("Payments") == 1
    assert [type(e).__name__ for e in app.repository.event_store.get(listing_id(URL, "GET"))] == ["Registered"]


def test_payments_without_bazaar_are_tracked_and_list_nothing(ports):
    app = listings(ports)
    app.process_event(approved_events(ports[0], {"usage": {"model": "m"}}), Tracking("Payments", 7))
    assert app.recorder.max_tracking_id("Payments") == 7 and app.get_listing(URL, "GET") is None
