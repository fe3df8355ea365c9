"""The Merchant and OwnerLogin rules the console and the CLI share: keys, capabilities, domains, logins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from domain.domains import DomainRefusedError, normalize_domain
from domain.login import OwnerLogin, check_email
from domain.merchant import (
    Merchant,
    MerchantConflictError,
    MerchantError,
    UnknownObjectError,
    capability_id,
    is_mint_address,
)
from domain.networks import DEVNET

KEY = "pw_test_" + "a" * 40


def test_a_key_revoked_twice_is_a_conflict_that_names_it():
    merchant = Merchant.register("acme")
    prefix = merchant.issue_key(KEY, label="web shop", service="api")
    merchant.revoke_key(prefix)
    with pytest.raises(MerchantConflictError, match="already revoked"):
        merchant.revoke_key(prefix)
    with pytest.raises(UnknownObjectError):
        merchant.revoke_key("pw_test_zzzzzzzz")
    assert [type(e).__name__ for e in merchant.collect_events()][-2:] == ["KeyIssued", "KeyRevoked"]


def test_a_key_label_must_be_short_and_printable():
    with pytest.raises(MerchantError) as refused:
        Merchant.register("acme").issue_key(KEY, label="x\n" * 60)
    assert refused.value.field == "label"


@pytest.mark.parametrize("asset, ok", [
    (DEVNET.usdc_mint, True), ("not-a-mint", False), ("0" * 44, False), ("", False),
    (DEVNET.usdc_mint + "1", False), ("1" * 32, True),
])
def test_a_capability_asset_must_be_a_base58_mint_address(asset, ok):
    assert is_mint_address(asset) is ok


def test_a_capability_is_enabled_once_and_disabled_by_its_id():
    merchant = Merchant.register("acme")
    cap = merchant.enable_capability(DEVNET.caip2, "exact", DEVNET.usdc_mint)
    assert cap == capability_id(DEVNET.caip2, "exact", DEVNET.usdc_mint) and len(cap) == 12
    assert merchant.enable_capability(DEVNET.caip2, "exact", DEVNET.usdc_mint) == cap
    with pytest.raises(MerchantError) as bad:
        merchant.enable_capability(DEVNET.caip2, "exact", "nope")
    assert bad.value.field == "asset"
    merchant.disable_capability(cap)
    assert merchant.capabilities == set()
    with pytest.raises(UnknownObjectError):
        merchant.disable_capability(cap)


@pytest.mark.parametrize("raw, expected", [
    ("API.Example.com.", "api.example.com"), ("bücher.example", "xn--bcher-kva.example"),
    (" shop.example.co.uk ", "shop.example.co.uk"),
])
def test_domain_names_are_normalized(raw, expected):
    assert normalize_domain(raw) == expected


@pytest.mark.parametrize("raw, why", [
    ("127.0.0.1", "IP address"), ("[::1]", "IP address"), ("::1", "IP address"), ("localhost", "single-label"),
    ("exa mple.com", "not a valid"), ("-bad.example.com", "not a valid"), ("", "1 to 253"),
    ("a." * 130 + "com", "1 to 253"), ("example.123", "numeric"),
])
def test_ip_literals_single_labels_and_malformed_names_are_refused(raw, why):
    with pytest.raises(DomainRefusedError, match=why):
        normalize_domain(raw)


def test_a_domain_is_added_once_verified_and_removed():
    merchant = Merchant.register("acme")
    merchant.add_domain("api.example.com", "tok")
    with pytest.raises(MerchantConflictError):
        merchant.add_domain("api.example.com", "tok2")
    merchant.add_domain("shop.example.com", "tok3")
    assert not merchant.is_verified("api.example.com")
    merchant.verify_domain("api.example.com", "dns")
    assert merchant.is_verified("api.example.com")
    assert merchant.verified_domains() == {"api.example.com"}  # shop.example.com is not verified yet
    merchant.remove_domain("api.example.com")
    assert not merchant.has_domain("api.example.com") and merchant.verified_domains() == set()
    with pytest.raises(UnknownObjectError):
        merchant.verify_domain("api.example.com", "dns")


def test_a_password_link_works_once_and_not_after_it_expires():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    login = OwnerLogin(email="owner@example.com", merchant_id=Merchant.create_id("acme"))
    login.issue_invite("hash-1", now + timedelta(days=7))
    with pytest.raises(MerchantConflictError):
        login.redeem_invite("hash-2", now, "argon")
    login.redeem_invite("hash-1", now, "argon")
    assert login.password_hash == "argon"
    with pytest.raises(MerchantConflictError):
        login.redeem_invite("hash-1", now, "argon2")
    login.issue_invite("hash-3", now + timedelta(days=7))
    with pytest.raises(MerchantConflictError):
        login.redeem_invite("hash-3", now + timedelta(days=8), "late")


@pytest.mark.parametrize("email", ["nope", "a@b", "two@@example.com", "sp ace@example.com"])
def test_a_login_needs_an_email_address(email):
    with pytest.raises(MerchantError):
        check_email(email)


def test_a_listing_is_delisted_by_its_owner_only_and_takes_no_update_after():
    from uuid import uuid4

    from domain.clients import ANONYMOUS_ID
    from domain.listing import Change, DiscoveryListing, ListingOwnershipError

    now, owner = datetime(2026, 1, 1, tzinfo=UTC), "merchant:" + str(Merchant.create_id("acme"))
    listing = DiscoveryListing.register("https://api.example.com/x", "GET", owner, {}, {"scheme": "exact",
                                        "network": "n", "asset": "a"}, uuid4(), now)
    with pytest.raises(ListingOwnershipError):
        listing.delist("merchant:someone-else")
    listing.delist(owner)
    assert listing.update(owner, {"title": "new"}, {"scheme": "exact", "network": "n", "asset": "a"}, uuid4(),
                          now, discovery_enabled=True) is Change.DELISTED
    assert type(listing.collect_events()[-1]).__name__ == "Delisted"
    anonymous = DiscoveryListing.register("https://x.example/y", "GET", ANONYMOUS_ID, {}, {}, uuid4(), now)
    with pytest.raises(ListingOwnershipError):
        anonymous.delist(ANONYMOUS_ID)
