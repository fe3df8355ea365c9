"""The discovery rules of docs/architecture.md#the-interface-contract, decided in the domain from values alone:
URL, hostname, addresses, sizes, method, tags, gating by account kind; and the DiscoveryListing aggregate's story."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from domain.clients import ANONYMOUS_ID
from domain.discovery import (
    MAX_INFO_BYTES,
    DiscoveryInvalidError,
    ListingDetails,
    Reason,
    check_addresses,
    parse_info,
    parse_resource_url,
    query_params,
)
from domain.listing import REFRESH_AFTER, Change, DiscoveryListing, ListingOwnershipError, listing_id

HOST_254 = ("a" * 63 + ".") * 3 + "b" * 58 + ".com"
HOST_253 = ("a" * 63 + ".") * 3 + "b" * 57 + ".com"
MERCHANT = "merchant:6f1c1d1e-0000-4000-8000-000000000001"
OTHER = "merchant:6f1c1d1e-0000-4000-8000-000000000002"


def refused(reason: Reason, call, *args, **kwargs) -> None:
    with pytest.raises(DiscoveryInvalidError) as caught:
        call(*args, **kwargs)
    assert caught.value.reason is reason, caught.value.message


# -- the resource URL --------------------------------------------------------------------------------------------


def test_the_hostname_lengths_are_counted_as_written():
    assert len(HOST_254) == 254 and len(HOST_253) == 253
    assert parse_resource_url(f"https://{HOST_253}/x", production=True).host == HOST_253
    refused(Reason.HOSTNAME_TOO_LONG, parse_resource_url, f"https://{HOST_254}/x", production=False)


@pytest.mark.parametrize("url", [
    "ftp://api.example.com/file", "ws://api.example.com/socket", "file:///etc/passwd", "javascript:alert(1)",
    "https://user:secret@api.example.com/", "https://api.example.com:99999/", "http://[::1/", "https:// spaced/",
    "", None, 42, "https://api.example.com/" + "x" * 2048,
])
def test_only_http_and_https_urls_without_credentials_are_listed(url):
    refused(Reason.INVALID_URL, parse_resource_url, url, production=False)


@pytest.mark.parametrize("url", [
    "https://under_score.example.com/", "https://-lead.example.com/", "https://trail-.example.com/",
    "https://" + "a" * 64 + ".example.com/", "https://a..b.com/", "https://127.1/", "https://10.0.0.0.1/",
    "https://exa%6dple.com/",
])
def test_a_hostname_must_be_rfc_1123(url):
    refused(Reason.INVALID_HOSTNAME, parse_resource_url, url, production=False)


def test_the_canonical_url_lowercases_scheme_and_host_and_drops_default_port_and_fragment():
    parsed = parse_resource_url("HTTPS://API.Example.COM:443/Forecast?City=Oslo#top", production=True)
    assert parsed.url == "https://api.example.com/Forecast?City=Oslo" and parsed.host == "api.example.com"
    assert parse_resource_url("http://api.example.com:8080", production=True).url == "http://api.example.com:8080/"
    assert parse_resource_url("http://[2606:4700::1111]/x", production=True).url == "http://[2606:4700::1111]/x"


@pytest.mark.parametrize("url", [
    "http://localhost:8080/x", "http://api.localhost/x", "http://printer.local/x", "http://db.internal/x",
    "http://intranet/x", "http://10.1.2.3/x", "http://192.168.1.10/x", "http://172.16.0.1/x", "http://127.0.0.1/x",
    "http://169.254.169.254/latest/meta-data", "http://0.0.0.0/x", "http://100.64.0.1/x", "http://224.0.0.1/x",
    "http://240.0.0.1/x", "http://[::1]/x", "http://[fe80::1]/x", "http://[fc00::1]/x", "http://[::]/x",
    "http://[::ffff:10.0.0.1]/x", "http://[ff02::1]/x",
])
def test_in_production_no_local_private_link_local_reserved_or_multicast_address(url):
    refused(Reason.PRIVATE_ADDRESS, parse_resource_url, url, production=True)
    assert parse_resource_url(url, production=False).url  # a developer's sandbox may list them


# An IPv6 address that leads to a private or reserved IPv4 one: 6to4, Teredo (client 10.0.0.1, or server
# 192.168.0.1), NAT64 (well-known and local-use prefixes), IPv4-mapped and IPv4-compatible.
EMBEDDING_PRIVATE = ["2002:a00:1::1", "2002:7f00:1::", "2001:0:4136:e378:8000:63bf:f5ff:fffe",
                     "2001:0:c0a8:1::1", "64:ff9b::a00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1",
                     "64:ff9b:1:a00:1::", "::ffff:127.0.0.1", "::10.0.0.1", "::169.254.169.254"]


@pytest.mark.parametrize("address", EMBEDDING_PRIVATE)
def test_in_production_an_ipv6_address_embedding_a_private_ipv4_is_refused_literal_or_resolved(address):
    refused(Reason.PRIVATE_ADDRESS, parse_resource_url, f"https://[{address}]/x", production=True)
    refused(Reason.PRIVATE_ADDRESS, check_addresses, "sneaky.example.com", ["93.184.216.34", address])


def test_a_6to4_address_of_a_public_ipv4_is_public():
    assert parse_resource_url("https://[2002:5db8:d822::1]/x", production=True).host == "2002:5db8:d822::1"
    check_addresses("six.example.com", ["2002:5db8:d822::1", "::ffff:93.184.216.34"])


@pytest.mark.parametrize("url, reason", [
    ("https://10.1.2.3/", Reason.PRIVATE_ADDRESS), ("http://localhost:8080/", Reason.PRIVATE_ADDRESS),
    ("https://[2002:a00:1::1]/", Reason.PRIVATE_ADDRESS), ("https://db.internal/", Reason.PRIVATE_ADDRESS),
])
def test_in_production_provider_url_follows_the_resource_url_rules(url, reason):
    info = {"info": {"provider": {"name": "Acme", "url": url}}}
    refused(reason, parse_info, info, registered=True, production=True)
    assert parse_info(info, registered=True, production=False).provider == {"name": "Acme", "url": url}
    assert parse_info(info, registered=False, production=True).provider is None  # not kept, so not checked


def test_in_production_a_hostname_must_resolve_to_public_addresses_only():
    check_addresses("api.example.com", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"])
    refused(Reason.PRIVATE_ADDRESS, check_addresses, "rebind.example.com", ["93.184.216.34", "10.0.0.7"])
    refused(Reason.PRIVATE_ADDRESS, check_addresses, "six.example.com", ["fe80::1%eth0"])
    refused(Reason.UNRESOLVABLE, check_addresses, "nowhere.example.com", [])


# -- the info ----------------------------------------------------------------------------------------------------


FULL_INFO = {
    "title": "Weather", "description": "Seven-day forecast.", "method": "post", "type": "http",
    "input": {"type": "application/json", "schema": {"type": "object", "properties": {"city": {"type": "string"},
                                                                                       "days": {"type": "integer"}}},
              "example": {"city": "Oslo"}},
    "output": {"type": "application/json", "schema": {"type": "object"}},
    "provider": {"name": "Acme", "description": "Forecasts", "url": "https://acme.example.com",
                 "contact": "ops@acme.example.com", "phone": "+1 555"},
    "tags": ["Weather", " FORECAST ", "weather"], "pricing": {"model": "per_request", "amount": 10000, "asset": "USDC"},
    "internal": {"cost": 3},
}


def test_a_registered_account_keeps_title_tags_and_provider_with_documented_fields_only():
    details = parse_info({"info": FULL_INFO}, registered=True)
    assert details == ListingDetails(
        type="http", method="POST", description="Seven-day forecast.", title="Weather", tags=("weather", "forecast"),
        input={"type": "application/json", "schema": FULL_INFO["input"]["schema"]},
        output={"type": "application/json", "schema": {"type": "object"}},
        provider={"name": "Acme", "description": "Forecasts", "url": "https://acme.example.com",
                  "contact": "ops@acme.example.com"},
        pricing={"model": "per_request", "amount": "10000", "asset": "USDC"},
    )
    assert query_params(details) == {"city": "string", "days": "integer"}


def test_the_anonymous_identity_has_title_tags_and_provider_filtered_silently():
    details = parse_info({"info": FULL_INFO}, registered=False)
    assert (details.title, details.tags, details.provider) == (None, (), None)
    assert details.description == "Seven-day forecast." and details.input and details.pricing


def test_all_sub_fields_are_optional():
    assert parse_info({}, registered=True) == ListingDetails()
    assert parse_info({"info": {}}, registered=False) == ListingDetails()


def test_info_must_be_under_8_kb_and_each_schema_at_most_4_kb():
    near = {"notes": "x" * (MAX_INFO_BYTES - 20)}
    assert len(str(near)) < MAX_INFO_BYTES and parse_info({"info": near}, registered=True)
    refused(Reason.INFO_TOO_LARGE, parse_info, {"info": {"notes": "x" * 9 * 1024}}, registered=True)
    refused(Reason.INFO_TOO_LARGE, parse_info, {"info": {"notes": "x" * MAX_INFO_BYTES}}, registered=True)
    schema_4k = {"description": "x" * (4096 - len('{"description":""}'))}
    assert parse_info({"info": {"output": {"schema": schema_4k}}}, registered=True).output == {"schema": schema_4k}
    refused(Reason.SCHEMA_TOO_LARGE, parse_info, {"info": {"input": {"schema": {"d": "x" * 5 * 1024}}}},
            registered=False)
    refused(Reason.SCHEMA_TOO_LARGE, parse_info, {"info": {"output": {"schema": {**schema_4k, "y": 1}}}},
            registered=True)


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "get"])
def test_the_seven_methods_are_accepted(method):
    assert parse_info({"info": {"method": method}}, registered=True).method == method.upper()


@pytest.mark.parametrize("info, reason", [
    ({"method": "TRACE"}, Reason.INVALID_METHOD),
    ({"method": "CONNECT"}, Reason.INVALID_METHOD),
    ({"type": "rest"}, Reason.INVALID_TYPE),
    ({"title": 7}, Reason.INVALID_FIELD),
    ({"tags": "weather"}, Reason.INVALID_FIELD),
    ({"tags": ["a,b"]}, Reason.INVALID_FIELD),
    ({"tags": [f"t{i}" for i in range(11)]}, Reason.INVALID_FIELD),
    ({"provider": {"url": "javascript:alert(1)"}}, Reason.INVALID_URL),
    ({"provider": {"url": "https://user:secret@acme.example.com/"}}, Reason.INVALID_URL),
    ({"provider": {"url": "https://under_score.example.com/"}}, Reason.INVALID_HOSTNAME),
    ({"input": {"schema": {"maximum": float("nan")}}}, Reason.INVALID_FIELD),
    ({"pricing": {"amount": float("inf")}}, Reason.INVALID_FIELD),
    ({"input": {"schema": "not an object"}}, Reason.INVALID_FIELD),
    ({"description": "x" * 2000}, Reason.INVALID_FIELD),
])
def test_malformed_info_is_refused(info, reason):
    refused(reason, parse_info, {"info": info}, registered=True)


def test_the_extension_and_its_info_must_be_objects():
    refused(Reason.INVALID_EXTENSION, parse_info, "yes", registered=True)
    refused(Reason.INVALID_EXTENSION, parse_info, {"info": ["title"]}, registered=True)


def test_websocket_and_grpc_types_are_declared_by_the_extension():
    assert parse_info({"info": {"type": "gRPC"}}, registered=False).type == "grpc"
    assert parse_info({"info": {"type": "websocket"}}, registered=False).type == "websocket"


# -- the aggregate -----------------------------------------------------------------------------------------------

T0 = datetime(2025, 5, 1, 12, tzinfo=UTC)
OFFER = {"scheme": "exact", "network": "solana:devnet", "asset": "USDC-MINT", "amount": 10000, "pay_to": "WALLET",
         "max_timeout_seconds": 60, "description": "", "mime_type": ""}


def listing(owner: str = MERCHANT) -> DiscoveryListing:
    details = ListingDetails(title="Weather", tags=("weather",)).as_dict()
    return DiscoveryListing.register("https://api.example.com/w", "GET", owner, details, OFFER, uuid4(), T0)


def names(aggregate: DiscoveryListing) -> list[str]:
    return [type(e).__name__ for e in aggregate.collect_events()]


def test_one_listing_per_url_and_method():
    assert listing().id == listing_id("https://api.example.com/w", "GET") != listing_id("https://api.example.com/w",
                                                                                        "POST")


def test_changed_metadata_is_an_update_and_unchanged_metadata_is_not_until_a_day_has_passed():
    aggregate = listing()
    same = ListingDetails(title="Weather", tags=("weather",)).as_dict()
    assert aggregate.update(MERCHANT, same, OFFER, uuid4(), T0 + timedelta(minutes=5),
                            discovery_enabled=True) is Change.UNCHANGED
    changed = ListingDetails(title="Weather Pro", tags=("weather",)).as_dict()
    assert aggregate.update(MERCHANT, changed, OFFER, uuid4(), T0 + timedelta(minutes=6),
                            discovery_enabled=True) is Change.UPDATED
    assert aggregate.update(MERCHANT, changed, OFFER, uuid4(), T0 + timedelta(minutes=6) + REFRESH_AFTER,
                            discovery_enabled=True) is Change.UPDATED
    assert names(aggregate) == ["Registered", "MetadataUpdated", "MetadataUpdated"]
    assert aggregate.verified_at == T0 + timedelta(minutes=6) + REFRESH_AFTER


def test_terms_on_another_network_are_added_and_on_the_same_network_replaced():
    aggregate = listing()
    details = aggregate.details
    mainnet = {**OFFER, "network": "solana:mainnet", "asset": "MAIN-USDC"}
    aggregate.update(MERCHANT, details, mainnet, uuid4(), T0, discovery_enabled=True)
    aggregate.update(MERCHANT, details, {**OFFER, "amount": 20000}, uuid4(), T0, discovery_enabled=True)
    assert [(o["network"], o["amount"]) for o in aggregate.offers] == [("solana:devnet", 20000),
                                                                       ("solana:mainnet", 10000)]


def test_a_listing_is_frozen_while_its_owner_has_discovery_off_and_resumes_when_on():
    aggregate = listing()
    changed = ListingDetails(title="Changed").as_dict()
    for _ in range(2):
        assert aggregate.update(MERCHANT, changed, OFFER, uuid4(), T0, discovery_enabled=False) is Change.DISABLED
    assert aggregate.details["title"] == "Weather" and not aggregate.enabled
    assert aggregate.update(MERCHANT, changed, OFFER, uuid4(), T0, discovery_enabled=True) is Change.UPDATED
    assert names(aggregate) == ["Registered", "Disabled", "Enabled", "MetadataUpdated"]


def test_only_the_owner_updates_a_listing_but_a_registered_account_may_take_over_an_anonymous_one():
    owned = listing(MERCHANT)
    with pytest.raises(ListingOwnershipError):
        owned.update(OTHER, owned.details, OFFER, uuid4(), T0, discovery_enabled=True)
    with pytest.raises(ListingOwnershipError):
        owned.update(ANONYMOUS_ID, owned.details, OFFER, uuid4(), T0, discovery_enabled=True)
    public = listing(ANONYMOUS_ID)
    assert public.update(MERCHANT, public.details, OFFER, uuid4(), T0, discovery_enabled=True) is Change.UPDATED
    assert public.owner == MERCHANT
