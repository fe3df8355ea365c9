"""The Merchants application's rules with fake ports: networks served, domains blocked and verified, logins."""

from __future__ import annotations

import pytest

from application.merchants import (
    DomainNotVerifiedError,
    Merchants,
    MerchantSettings,
)
from domain.domains import DomainRefusedError
from domain.merchant import MerchantConflictError, MerchantError
from domain.networks import DEVNET, MAINNET, KeyEnv


class FakeHasher:
    def hash(self, password: str) -> str:
        return "hashed:" + password


class FakeChallenges:
    def __init__(self) -> None:
        self.txt: dict[str, list[str]] = {}
        self.files: dict[str, str] = {}

    def txt_records(self, name: str) -> list[str]:
        return self.txt.get(name, [])

    def fetch(self, url: str) -> str | None:
        return self.files.get(url)


class Suffixes:
    def is_public_suffix(self, domain: str) -> bool:
        return domain in ("co.uk", "github.io")


class Usage:
    def __init__(self) -> None:
        self.used: set[str] = set()

    def services_on_domain(self, merchant_id: str, domain: str) -> int:
        return int(domain in self.used)


def merchants(production: bool = False, **settings) -> tuple[Merchants, FakeChallenges, Usage]:
    challenges, usage = FakeChallenges(), Usage()
    app = Merchants(settings=MerchantSettings(served_networks=frozenset({DEVNET.caip2}), production=production,
                                              own_domains=("paywarden.dev",), blocked_domains=("evil.example",),
                                              **settings),
                    hasher=FakeHasher(), challenges=challenges, suffixes=Suffixes(), usage=usage)
    app.register("acme")
    return app, challenges, usage


def test_a_live_key_is_refused_where_mainnet_is_not_served():
    app, _, _ = merchants()
    with pytest.raises(MerchantError, match="does not serve") as refused:
        app.create_key("acme", KeyEnv.LIVE)
    assert refused.value.field == "env"
    assert app.create_key("acme", KeyEnv.TEST)[0].startswith("pw_test_")


def test_an_unserved_network_warns_in_the_sandbox_and_is_refused_in_production():
    sandbox, _, _ = merchants()
    enabled = sandbox.enable_capability("acme", MAINNET.caip2)
    assert enabled.warnings and "does not serve mainnet" in enabled.warnings[0]
    production, _, _ = merchants(production=True)
    with pytest.raises(MerchantError, match="does not serve mainnet"):
        production.enable_capability("acme", MAINNET.caip2)
    assert production.enable_capability("acme", DEVNET.caip2).warnings == []


@pytest.mark.parametrize("domain, why", [
    ("co.uk", "public suffix"), ("github.io", "public suffix"), ("paywarden.dev", "service's own"),
    ("console.paywarden.dev", "service's own"), ("x.evil.example", "blocked by the operator"),
])
def test_public_suffixes_own_and_blocked_domains_are_refused(domain, why):
    app, _, _ = merchants()
    with pytest.raises(DomainRefusedError, match=why):
        app.add_domain("acme", domain)


def test_a_domain_is_verified_by_its_txt_record_or_its_https_file_and_says_what_it_saw():
    app, challenges, _ = merchants()
    found = app.add_domain("acme", "API.example.com")
    assert found.dns_name == "_paywarden-challenge.api.example.com"
    challenges.txt[found.dns_name] = ["something else"]
    with pytest.raises(DomainNotVerifiedError, match="'something else'"):
        app.verify_domain("acme", "api.example.com")
    challenges.txt[found.dns_name].append(found.dns_value)
    assert app.verify_domain("acme", "api.example.com") == "dns"
    other = app.add_domain("acme", "shop.example.com")
    challenges.files[other.http_url] = other.token + "\n"
    assert app.verify_domain("acme", "shop.example.com") == "http"
    assert app.get_merchant("acme").is_verified("shop.example.com")


def test_a_domain_a_proxy_service_uses_cannot_be_removed():
    app, _, usage = merchants()
    app.add_domain("acme", "api.example.com")
    usage.used.add("api.example.com")
    with pytest.raises(MerchantConflictError, match="proxy service"):
        app.remove_domain("acme", "api.example.com")
    usage.used.clear()
    app.remove_domain("acme", "api.example.com")
    assert not app.get_merchant("acme").has_domain("api.example.com")


def test_localhost_is_preverified_in_the_sandbox_only():
    app, _, _ = merchants()
    app.preverify_sandbox_domain("acme")
    assert app.get_merchant("acme").verified_domains() == {"localhost"}
    production, _, _ = merchants(production=True)
    with pytest.raises(MerchantError):
        production.preverify_sandbox_domain("acme")


def test_a_login_belongs_to_one_merchant_and_its_link_sets_the_password_once():
    app, _, _ = merchants()
    app.register("other")
    token = app.add_login("acme", "Owner@Example.com")
    with pytest.raises(MerchantConflictError):
        app.add_login("other", "owner@example.com")
    with pytest.raises(MerchantError) as short:
        app.set_password_with_token(token, "short")
    assert short.value.field == "password"
    assert app.set_password_with_token(token, "a long password") == "owner@example.com"
    with pytest.raises(MerchantConflictError):
        app.set_password_with_token(token, "another long one")
    with pytest.raises(MerchantConflictError):
        app.set_password_with_token("garbage", "another long one")
    assert app.add_login("other", "second@example.com", password="a long password") is None
