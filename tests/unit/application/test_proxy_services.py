"""ProxyServices with fakes for the merchant directory: base URLs, slugs, routes, upstream auth, deletion."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from cryptography.fernet import Fernet
from solders.keypair import Keypair

from application.proxy_services import ProxyServices, ServiceNotFoundError, SlugTakenError
from domain.networks import DEVNET, MAINNET, SCHEME_EXACT
from domain.proxy_service import ProxyService, ProxyServiceConflictError, ProxyServiceError
from domain.slugs import candidates, core_name
from interfaces.adapters.secret_box import SecretBox
from interfaces.adapters.secrets import BoxedSecrets

PAY_TO = str(Keypair().pubkey())


@dataclass
class FakeMerchant:
    domains: dict = field(default_factory=dict)
    capabilities: set = field(default_factory=lambda: {(DEVNET.caip2, SCHEME_EXACT, DEVNET.usdc_mint)})


class Directory:
    def __init__(self) -> None:
        self.merchants: dict[str, FakeMerchant] = {}

    def get_merchant(self, name: str) -> FakeMerchant:
        return self.merchants.setdefault(name, FakeMerchant())

    def verify(self, merchant: str, *domains: str) -> None:
        for domain in domains:
            self.get_merchant(merchant).domains[domain] = {"token": "t", "verified": True}


@pytest.fixture
def directory():
    return Directory()


def services(directory, sandbox=False):
    box = SecretBox([Fernet.generate_key().decode()])
    return ProxyServices(merchants=directory, secrets=BoxedSecrets(box), sandbox=sandbox)


def test_core_names_and_slug_candidates_follow_the_public_suffix_list():
    assert core_name("api.weather.co.uk") == "weather"
    assert core_name("my-shop.github.io") == "my-shop"
    first = candidates("api.weather.co.uk")
    assert [next(first) for _ in range(4)] == ["weather", "api-weather-co-uk", "api-weather-co-uk-2",
                                               "api-weather-co-uk-3"]


def test_the_three_slug_collisions_core_name_whole_host_then_counter(directory):
    directory.verify("a", "weather.co.uk")
    directory.verify("b", "weather.co.uk")
    app = services(directory)
    # Names that make no slug (no Latin letter or digit): the base URL's host gives it.
    first = app.create_service("a", "☂", "weather.co.uk", subdomain="api")
    second = app.create_service("b", "☁", "weather.co.uk", subdomain="api")
    third = app.create_service("a", "☀", "weather.co.uk", subdomain="api")
    assert [first.slug, second.slug, third.slug] == ["weather", "api-weather-co-uk", "api-weather-co-uk-2"]
    assert app.get_by_slug("api-weather-co-uk").id == second.id


def test_the_base_url_is_https_on_a_verified_domain_auto_selected_when_it_is_the_only_one(directory):
    directory.verify("a", "weather.com")
    app = services(directory)
    service = app.create_service("a", "Weather", subdomain="api", path_suffix="v1/")
    assert service.base_url == "https://api.weather.com/v1"
    with pytest.raises(ProxyServiceError) as unverified:
        app.create_service("a", "Other", "other.com")
    assert unverified.value.field == "domain"


def test_no_verified_domain_no_service(directory):
    with pytest.raises(ProxyServiceError, match="verify a domain"):
        services(directory).create_service("a", "Weather")


def test_localhost_is_for_sandbox_mode_only(directory):
    directory.verify("a", "localhost")  # the sandbox merchant's, as `up` pre-verifies it
    with pytest.raises(ProxyServiceError):
        services(directory).create_service("a", "Local", "localhost", port=8080)
    local = services(directory, sandbox=True).create_service("a", "Local", "localhost", port=8080)
    assert local.base_url == "http://localhost:8080" and local.slug == "local"


def test_only_the_sandbox_merchant_may_proxy_localhost_and_never_to_paywardens_own_ports(directory):
    directory.verify("sandbox", "localhost")
    app = ProxyServices(merchants=directory, sandbox=True, own_ports=frozenset({8402, 18402}))
    with pytest.raises(ProxyServiceError, match="not a verified domain"):
        app.create_service("other", "Metrics", "localhost", port=9100)  # any other merchant of the sandbox
    for port in (8402, 18402):  # the API (its /metrics), on its default port or the one it runs on
        with pytest.raises(ProxyServiceError, match="own listeners"):
            app.create_service("sandbox", "Metrics", "localhost", port=port)
    assert app.create_service("sandbox", "Demo", "localhost", port=8406).base_url == "http://localhost:8406"


@pytest.mark.parametrize("suffix", ["/../admin", "/a?b=1", "/a#b", "/a b"])
def test_path_suffixes_that_escape_or_carry_a_query_are_refused(directory, suffix):
    directory.verify("a", "weather.com")
    with pytest.raises(ProxyServiceError):
        services(directory).create_service("a", "W", path_suffix=suffix)


def test_a_base_url_edit_regenerates_a_slug_made_from_the_host_and_frees_the_old_one(directory):
    directory.verify("a", "weather.com", "climate.org")
    app = services(directory)
    service = app.create_service("a", "☂", "weather.com")
    moved = app.change_base_url("a", str(service.id), "climate.org")
    assert moved.slug == "climate"
    assert app.get_by_slug("weather") is None
    assert app.get_by_slug("climate").id == service.id
    other = app.create_service("a", "☁", "weather.com")
    assert other.slug == "weather"  # the released slug is claimed again


def test_a_slug_is_made_from_the_services_name_and_stays_through_renames_and_moves(directory):
    directory.verify("a", "weather.com", "climate.org")
    directory.verify("b", "weather.com")
    app = services(directory)
    quotes = app.create_service("a", "My Quotes", "weather.com")
    assert quotes.slug == "my-quotes"
    assert app.create_service("b", "My  Quotes!", "weather.com").slug == "my-quotes-2"
    assert app.create_service("a", "Café Prices", "weather.com").slug == "cafe-prices"
    app.rename("a", "my-quotes", "Quotes of the day")  # a rename keeps the gateway URL handed out
    assert app.get_service("a", str(quotes.id)).slug == "my-quotes"
    moved = app.change_base_url("a", "my-quotes", "climate.org")
    assert moved.slug == "quotes-of-the-day"  # a move takes the slug of its current name
    assert app.get_by_slug("my-quotes") is None


def test_a_custom_slug_is_claimed_once(directory):
    directory.verify("a", "weather.com")
    app = services(directory)
    app.create_service("a", "W", slug="forecast")
    with pytest.raises(SlugTakenError):
        app.create_service("a", "W2", slug="forecast")


def test_routes_take_network_and_asset_from_enabled_capabilities(directory):
    directory.verify("a", "weather.com")
    app = services(directory)
    service = app.create_service("a", "W")
    route = app.add_route("a", str(service.id), method="get", path="/today/*", price=1000, pay_to=PAY_TO)
    assert (route.network, route.asset, route.method) == (DEVNET.caip2, DEVNET.usdc_mint, "GET")
    with pytest.raises(ProxyServiceError) as not_enabled:
        app.add_route("a", str(service.id), method="GET", path="/x", price=1, pay_to=PAY_TO, network_id=MAINNET.caip2)
    assert not_enabled.value.field == "network"
    with pytest.raises(ProxyServiceError) as bad_pay_to:
        app.add_route("a", str(service.id), method="GET", path="/y", price=1, pay_to="nope")
    assert bad_pay_to.value.field == "payTo"


def test_delete_is_refused_while_routes_exist(directory):
    directory.verify("a", "weather.com")
    app = services(directory)
    service = app.create_service("a", "W")
    route = app.add_route("a", str(service.id), method="GET", path="/x", price=5, pay_to=PAY_TO)
    with pytest.raises(ProxyServiceConflictError):
        app.delete_service("a", str(service.id))
    app.remove_route("a", str(service.id), route.id)
    app.delete_service("a", str(service.id))
    assert app.get_by_slug("w") is None
    assert app.list_services("a") == []
    with pytest.raises(ServiceNotFoundError):
        app.get_service("a", str(service.id))


def test_another_merchants_service_is_not_found(directory):
    directory.verify("a", "weather.com")
    app = services(directory)
    service = app.create_service("a", "W")
    with pytest.raises(ServiceNotFoundError):
        app.rename("b", str(service.id), "mine")


def test_upstream_auth_is_stored_encrypted_and_opens_for_forwarding(directory):
    directory.verify("a", "weather.com")
    app = services(directory)
    service = app.create_service("a", "W", upstream_auth=("X-Api-Key", "sk_live_very_secret"))
    recorded = list(app.events.get(service.id))
    assert any(isinstance(e, ProxyService.UpstreamAuthSet) for e in recorded)
    assert all("sk_live_very_secret" not in repr(e.__dict__) for e in recorded)
    assert app.upstream_auth(app.get_by_slug("w")) == ("X-Api-Key", "sk_live_very_secret")
    with pytest.raises(ProxyServiceError):
        app.set_upstream_auth("a", str(service.id), "Host", "x")


def test_matching_uses_the_first_route_in_creation_order_and_normalised_paths(directory):
    directory.verify("a", "weather.com")
    app = services(directory)
    service = app.create_service("a", "W")
    premium = app.add_route("a", str(service.id), method="GET", path="/premium/*", price=9, pay_to=PAY_TO)
    app.add_route("a", str(service.id), method="*", path="/*", price=1, pay_to=PAY_TO)
    service = app.get_by_slug("w")
    assert app.match(service, "GET", "/%70remium/x").id == premium.id
    assert app.match(service, "POST", "/premium/x").price == 1


def test_a_retried_create_with_the_same_token_is_the_same_service(directory):
    directory.verify("a", "weather.com")
    app = services(directory)
    first = app.create_service("a", "W", token="req-1")
    again = app.create_service("a", "W", token="req-1")
    assert first.id == again.id and len(app.list_services("a")) == 1
    assert isinstance(again, ProxyService)


def test_the_console_asks_how_many_services_use_a_domain(directory):
    from domain.merchant import merchant_id

    directory.verify("a", "weather.com", "climate.org")
    app = services(directory)
    app.create_service("a", "W", "weather.com")
    doomed = app.create_service("a", "W2", "weather.com", subdomain="api")
    acme = str(merchant_id("a"))
    assert app.services_on_domain(acme, "weather.com") == 2
    assert app.services_on_domain(acme, "climate.org") == 0
    assert app.services_on_domain(str(merchant_id("b")), "weather.com") == 0
    app.delete_service("a", str(doomed.id))
    assert app.services_on_domain(acme, "weather.com") == 1
