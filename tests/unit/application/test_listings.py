"""The Listings application with fakes for its ports: what an approved payment lists, what it skips, and that
each approved payment is processed once (tracking recorded with the listing events)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from eventsourcing.persistence import IntegrityError, Tracking

from application.listings import Listings, VerifiedPayment
from application.ports import GatewayRoute
from domain.clients import ANONYMOUS_ID
from domain.listing import Change, ListingOwnershipError, listing_id
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


class FakeDomains:
    """Each merchant's verified domains (MERCHANT has example.com)."""

    def __init__(self) -> None:
        self.verified: dict[str, tuple[str, ...]] = {MERCHANT_ID: ("example.com",)}

    def list_verified_domains(self, merchant_id: str) -> tuple[str, ...]:
        return self.verified.get(merchant_id, ())


class FakePayments:
    def __init__(self) -> None:
        self.received: dict = {}

    def get_received(self, payment_id):
        return self.received.get(payment_id)


@pytest.fixture
def ports():
    return FakePayments(), FakeDiscovery(), FakeResolver({"api.weather.example.com": ["93.184.216.34"],
                                                           "intranet.example.com": ["10.0.0.8"]})


def listings(ports, production: bool = False, sandbox: bool = False, domains: FakeDomains | None = None,
             gateways=None) -> Listings:
    payments, discovery, resolver = ports
    return Listings(payments=payments, discovery=discovery, resolver=resolver, production=production,
                    domains=domains or FakeDomains(), sandbox=sandbox, gateways=gateways)


def confirmed(app: Listings, url: str = URL, method: str = "GET", owner: str = MERCHANT) -> None:
    listing = app.get_listing(url, method)
    app.confirm(listing.id, owner, listing.details)


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
    app = listings(ports, sandbox=True)
    app.register_from_payment(payment(ANONYMOUS_ID, url="http://localhost:8080/forecast"))
    details = app.get_listing("http://localhost:8080/forecast", "GET").details
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
    app = listings(ports, sandbox=True)
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
    assert app.counts == {"registered": 1, "skipped:not_owner": 1}


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


# -- whose a listing is (docs/discovery.md) --------------------------------------------------------------------

OTHER_ID = "6f1c1d1e-0000-4000-8000-000000000002"
OTHER = f"merchant:{OTHER_ID}"


def test_a_payer_cannot_list_a_url_off_the_merchants_verified_domains(ports):
    app = listings(ports, sandbox=True)
    assert app.register_from_payment(payment(url="https://victim-shop.example.net/api")) is None
    assert app.register_from_payment(payment(url="https://example.com.evil.net/api")) is None
    assert app.counts == {"skipped:not_owner": 2}
    assert app.register_from_payment(payment(url="https://shop.example.com/api")) is Change.REGISTERED  # a subdomain


def test_the_sandbox_lists_loopback_urls_for_anyone_and_production_none(ports):
    assert listings(ports, sandbox=True).register_from_payment(
        payment(OTHER, url="http://127.0.0.1:8405/quotes")) is Change.REGISTERED
    assert listings(ports).register_from_payment(payment(OTHER, url="http://localhost:8405/quotes")) is None
    app = listings(ports, production=True, sandbox=False)
    assert app.register_from_payment(payment(url="http://localhost:8405/quotes")) is None


def test_a_url_claimed_by_one_merchant_is_not_taken_by_another_with_the_same_domain_or_another_method(ports):
    domains = FakeDomains()
    domains.verified[OTHER_ID] = ("example.com",)
    app = listings(ports, domains=domains)
    assert app.register_from_payment(payment()) is Change.REGISTERED
    assert app.register_from_payment(payment(OTHER, info={**INFO, "title": "Mine now"})) is None
    assert app.register_from_payment(payment(OTHER, info={**INFO, "method": "POST"})) is None
    assert app.get_listing(URL, "POST") is None and app.counts["skipped:not_owner"] == 2


def test_a_registered_merchant_takes_over_the_anonymous_identitys_claim(ports):
    app = listings(ports, sandbox=True)
    local = "http://localhost:8080/forecast"
    assert app.register_from_payment(payment(ANONYMOUS_ID, url=local)) is Change.REGISTERED
    assert app.register_from_payment(payment(url=local, info={**INFO, "method": "POST"})) is Change.REGISTERED
    assert app.register_from_payment(payment(url=local)) is Change.UPDATED
    assert app.register_from_payment(payment(ANONYMOUS_ID, url=local)) is None  # never the reverse


def test_what_a_payer_proposes_is_shown_only_once_the_merchant_confirms_it_and_later_payers_change_nothing(ports):
    app = listings(ports)
    app.register_from_payment(payment())
    assert app.get_listing(URL, "GET").declared is None
    confirmed(app)
    assert app.get_listing(URL, "GET").declared["title"] == "Weather"
    forged = {**INFO, "title": "Sandbox Official Payments Portal", "provider": {"name": "Sandbox Inc (verified)"}}
    assert app.register_from_payment(payment(info=forged)) is Change.UPDATED  # the proposal is recorded...
    listing = app.get_listing(URL, "GET")
    assert listing.details["title"] == forged["title"] and listing.declared["title"] == "Weather"  # ...not shown
    with pytest.raises(ListingOwnershipError):
        app.confirm(listing.id, OTHER, listing.details)  # only the owner confirms
    with pytest.raises(ListingOwnershipError):
        app.confirm(listing.id, MERCHANT, {**listing.details, "title": "stale"})  # what it was shown, still latest


class FakeGateways:
    def __init__(self, routes: dict[str, GatewayRoute]) -> None:
        self.routes = routes

    def find_gateway_route(self, url: str, method: str) -> GatewayRoute | None:
        return next((r for prefix, r in self.routes.items() if url.startswith(prefix)), None)


def test_a_gateway_route_lists_once_per_route_with_the_routes_own_declaration(ports):
    gateway = "https://proxy.paywarden.example/quotes-shop"
    route = GatewayRoute(owner=MERCHANT, resource=f"{gateway}/quotes/:var1",
                         info={"title": "Quotes", "tags": ["finance"], "method": "GET"})
    app = listings(ports, gateways=FakeGateways({f"{gateway}/quotes/": route}))
    assert app.register_from_payment(payment(url=f"{gateway}/quotes/today", info={"title": "forged"})) \
        is Change.REGISTERED
    assert app.register_from_payment(payment(url=f"{gateway}/quotes/tomorrow", info={"title": "forged"})) \
        is Change.UNCHANGED
    listing = app.get_listing(f"{gateway}/quotes/:var1", "GET")
    assert listing.declared["title"] == "Quotes" and listing.declared["path_params"] == ["var1"]
    assert app.get_listing(f"{gateway}/quotes/today", "GET") is None
    # Another merchant's payment naming that gateway URL lists nothing.
    assert app.register_from_payment(payment(OTHER, url=f"{gateway}/quotes/today")) is None


def test_the_sdks_route_template_makes_one_listing_per_route_when_the_paid_path_is_an_instance_of_it(ports):
    app = listings(ports)
    base = "https://api.weather.example.com"
    for city in ("paris", "oslo"):
        paid = payment(url=f"{base}/weather/{city}")
        paid.extensions["bazaar"]["routeTemplate"] = "/weather/:city"
        assert app.register_from_payment(paid) is not None
    assert app.get_listing(f"{base}/weather/:city", "GET").details["path_params"] == ["city"]
    assert app.counts == {"registered": 1, "unchanged": 1}
    for template in ("/elsewhere/:city", "/weather/:city/more", "/weather/..", "weather/:city", 5):
        paid = payment(url=f"{base}/weather/rome")
        paid.extensions["bazaar"] = {"info": INFO, "routeTemplate": template}
        assert app.register_from_payment(paid) is None, template
    assert app.counts["skipped:invalid_route_template"] == 5


def test_each_tool_of_an_mcp_server_is_its_own_listing_under_one_claim(ports):
    from x402.extensions.bazaar import DeclareMcpDiscoveryConfig, declare_mcp_discovery_extension

    app = listings(ports)
    server = "https://mcp.example.com/mcp"
    for tool in ("get_weather", "get_tides"):
        extension = declare_mcp_discovery_extension(DeclareMcpDiscoveryConfig(
            tool_name=tool, description=f"The {tool}", input_schema={"type": "object"}))
        paid = VerifiedPayment(uuid4(), MERCHANT, extension, {"url": server}, "solana:devnet", "MINT", 10_000,
                               "WALLET", datetime.now(UTC))
        assert app.register_from_payment(paid) is Change.REGISTERED
    listing = app.get_listing(server, "POST get_tides")
    assert listing.details["type"] == "mcp" and listing.details["tool"]["name"] == "get_tides"
    assert app.get_listing(server, "POST") is None
