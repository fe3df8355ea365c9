"""What a key scoped to a proxy service may pay for: the terms of one of its routes, for a resource it routes, or of
one of an MCP service's priced tools, for that tool."""

from __future__ import annotations

import pytest

from domain.mcp_tools import ToolPrice
from domain.networks import DEVNET
from domain.proxy_service import Route
from domain.scopes import ServiceScope, resource_paths
from domain.x402 import PaymentPayload, Requirements

PAY_TO = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM"
WEATHER = Route("r1", "GET", "/weather/*", 10_000, DEVNET.caip2, DEVNET.usdc_mint, PAY_TO)
ORDERS = Route("r2", "POST", "/orders", 50_000, DEVNET.caip2, DEVNET.usdc_mint, PAY_TO)
SCOPE = ServiceScope("id", "weather", "v1", (WEATHER, ORDERS))


def terms(amount: int = 10_000, **changed: str) -> Requirements:
    fields = {"scheme": "exact", "network": DEVNET.caip2, "asset": DEVNET.usdc_mint, "pay_to": PAY_TO}
    fields.update(changed)
    return Requirements(amount=amount, **fields)


def payload(url: str | None = None, method: str | None = None) -> PaymentPayload:
    extensions = {"bazaar": {"info": {"input": {"type": "http", "method": method}}}} if method else {}
    return PaymentPayload("tx", resource={"url": url} if url else None, extensions=extensions)


def test_the_terms_of_a_route_are_allowed_without_a_resource():
    assert SCOPE.allows(payload(), terms())
    assert SCOPE.allows(payload(), terms(50_000))


@pytest.mark.parametrize("changed", [
    {"amount": 20_000}, {"pay_to": "11111111111111111111111111111111"},
    {"asset": "So11111111111111111111111111111111111111112"}, {"network": "solana:other"}, {"scheme": "upto"},
])
def test_any_other_term_is_refused(changed):
    amount = changed.pop("amount", 10_000)
    assert not SCOPE.allows(payload(), terms(amount, **changed))


@pytest.mark.parametrize("url", [
    "https://api.weather.test/v1/weather/today",  # the merchant's own URL, under the base URL's path suffix
    "https://proxy.paywarden.test/weather/weather/today",  # the gateway URL, under /{slug}
    "http://127.0.0.1:8000/weather/today",  # what a server behind a reverse proxy sees: the host is not compared
    "https://api.weather.test/v1/WEATHER/a%20b",  # matched as the x402 SDK matches: case-insensitive, decoded
])
def test_a_resource_must_be_one_the_route_matches(url):
    assert SCOPE.allows(payload(url), terms())


@pytest.mark.parametrize("url", [
    "https://api.weather.test/v1/admin",
    "https://api.weather.test/v1/orders",  # routed, but at another price
    "https://api.weather.test/v1/weather%2F..%2Fadmin",  # an encoded slash stays inside one segment
])
def test_a_resource_no_route_of_those_terms_matches_is_refused(url):
    assert not SCOPE.allows(payload(url), terms())


def test_the_method_counts_when_the_payload_names_it():
    url = "https://api.weather.test/v1/orders"
    assert SCOPE.allows(payload(url, "POST"), terms(50_000))
    assert SCOPE.allows(payload(url), terms(50_000))
    assert not SCOPE.allows(payload(url, "GET"), terms(50_000))


def test_supported_paths_select_the_matching_routes():
    assert SCOPE.routes_for(None) == [WEATHER, ORDERS]
    assert SCOPE.routes_for("weather/x") == [WEATHER]
    assert SCOPE.routes_for("/nothing") == []
    assert SCOPE.networks([DEVNET.caip2, "solana:other"]) == [DEVNET.caip2]


def test_resource_paths_are_relative_to_the_service():
    assert resource_paths(None, "weather", "v1") is None
    assert resource_paths({"url": "https://h/v1/a"}, "weather", "v1") == ["/v1/a", "/a"]
    assert resource_paths({"url": "https://h/weather/a/"}, "weather", "") == ["/weather/a", "/a"]

    assert resource_paths({"url": "https://h/v1/a"}, "weather", "/v1") == ["/v1/a", "/a"]  # as a service keeps it


WEATHER_TOOL = ToolPrice("get_weather", 10_000, DEVNET.caip2, DEVNET.usdc_mint, PAY_TO)
QUOTE_TOOL = ToolPrice("quote", 30_000, DEVNET.caip2, DEVNET.usdc_mint, PAY_TO)
TOOLS = ServiceScope("id", "weather", "/mcp", (), (WEATHER_TOOL, QUOTE_TOOL), "mcp")


def calling(url: str | None = None, tool: str | None = None) -> PaymentPayload:
    extensions = {"bazaar": {"info": {"input": {"type": "mcp", "toolName": tool}}}} if tool else {}
    return PaymentPayload("tx", resource={"url": url} if url else None, extensions=extensions)


@pytest.mark.parametrize(("url", "tool"), [
    (None, None),  # the terms decide
    ("https://proxy.paywarden.test/weather#get_weather", None),  # the gateway URL, the tool as its fragment
    ("https://weather.test/mcp#get_weather", "get_weather"),  # the merchant's own endpoint
    ("http://127.0.0.1:9000/mcp/#get_weather", None),  # the host is not compared
    ("mcp://tool/get_weather", None),  # the x402 SDK's default resource of a tool
    ("https://weather.test/mcp", "get_weather"),  # the endpoint naming no tool; the extension names it
    (None, "get_weather"),
])
def test_a_priced_tools_terms_are_allowed_for_that_tool(url, tool):
    assert TOOLS.allows(calling(url, tool), terms())


@pytest.mark.parametrize(("url", "tool", "amount"), [
    ("https://proxy.paywarden.test/weather#quote", None, 10_000),  # another tool's price
    ("https://proxy.paywarden.test/weather#echo", None, 10_000),  # an unpriced tool
    ("mcp://tool/echo", None, 10_000),
    ("mcp://tool/", None, 10_000),
    (None, "echo", 10_000),
    ("https://weather.test/mcp#get_weather", "quote", 10_000),  # the extension names another tool
    ("https://proxy.paywarden.test/quotes#get_weather", None, 10_000),  # another service's gateway URL
    ("https://weather.test/mcp/admin#get_weather", None, 10_000),  # not the endpoint
    ("https://proxy.paywarden.test/weather#get_weather", None, 20_000),  # another price
])
def test_anything_else_is_refused_to_a_key_scoped_to_an_mcp_service(url, tool, amount):
    assert not TOOLS.allows(calling(url, tool), terms(amount))


def test_supported_answers_the_tools_at_the_services_endpoint():
    assert TOOLS.terms_for(None) == [WEATHER_TOOL, QUOTE_TOOL] == TOOLS.terms_for("/")
    assert TOOLS.terms_for("/weather") == []
    assert TOOLS.networks([DEVNET.caip2, "solana:other"]) == [DEVNET.caip2]
    assert SCOPE.terms_for("weather/x") == [WEATHER] and TOOLS.priced == "priced tools" and SCOPE.priced == "routes"
