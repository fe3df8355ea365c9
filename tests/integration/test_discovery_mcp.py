"""MCP tools in the catalog: a verified payment carrying the x402 SDK's Bazaar MCP extension, exactly as
`declare_mcp_discovery_extension` builds it, lists the tool (type `mcp`, one listing per tool of an MCP server);
the SDK's Bazaar client finds it with `type=mcp`, and the search by its name and description. SQLite and
PostgreSQL, the real API (the SDK's client over a WSGI transport)."""

from __future__ import annotations

import httpx
import pytest
from x402.extensions.bazaar import (
    DeclareMcpDiscoveryConfig,
    ListDiscoveryResourcesParams,
    SearchDiscoveryResourcesParams,
    declare_mcp_discovery_extension,
    with_bazaar,
)
from x402.http import HTTPFacilitatorClientSync
from x402.http.facilitator_client_base import FacilitatorConfig

from interfaces.http.facilitator.app import create_app
from interfaces.wiring import api_collaborators
from tests.conftest import STORES
from tests.integration.test_discovery import Discovery, owning_example_com, with_clock

SERVER = "https://mcp.example.com/mcp"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture
def discovery(tmp_path, sandbox, store) -> Discovery:
    gateway = owning_example_com(tmp_path, sandbox, **store)
    yield with_clock(gateway)
    gateway.container.close()


def pay_tool(discovery: Discovery, name: str, description: str, schema: dict, url: str = SERVER) -> None:
    body = discovery.body(url)
    body["paymentPayload"]["resource"] = {"url": url, "description": f"MCP tool {name}"}
    body["paymentPayload"]["extensions"] = declare_mcp_discovery_extension(DeclareMcpDiscoveryConfig(
        tool_name=name, description=description, input_schema=schema, transport="streamable-http",
        example={"city": "Oslo"}))
    answer = discovery.pay(body=body)
    assert answer.status_code == 200 and answer.json["isValid"] is True, answer.text


@STORES
def test_an_mcp_tool_paid_with_the_sdks_extension_is_listed_filtered_by_type_and_found_by_name(discovery):
    pay_tool(discovery, "get_weather", "Current conditions for a city", WEATHER)
    pay_tool(discovery, "get_tide_tables", "Tides of a harbour", {"type": "object", "properties": {
        "harbour": {"type": "string"}}})
    discovery.pay("https://api.weather.example.com/forecast")  # an HTTP listing beside them
    discovery.project()
    client = httpx.Client(transport=httpx.WSGITransport(app=create_app(api_collaborators(
        discovery.gateway.container))), base_url="http://paywarden.test")
    bazaar = with_bazaar(HTTPFacilitatorClientSync(FacilitatorConfig(url="http://paywarden.test",
                                                                     http_client=client))).extensions.bazaar
    tools = bazaar.list_resources(ListDiscoveryResourcesParams(type="mcp"))
    assert tools.pagination.total == 2 and {t.resource for t in tools.items} == {SERVER}
    assert {t.type for t in tools.items} == {"mcp"}
    [weather] = [t for t in tools.items if t.accepts[0]["outputSchema"]["input"]["toolName"] == "get_weather"]
    assert weather.accepts[0]["outputSchema"]["input"] == {
        "type": "mcp", "method": "POST", "toolName": "get_weather", "description": "Current conditions for a city",
        "transport": "streamable-http", "inputSchema": WEATHER}  # `example` is not a served field
    assert [t.resource for t in bazaar.list_resources(ListDiscoveryResourcesParams(type="http")).items] == [
        "https://api.weather.example.com/forecast"]
    # Found by its name (whole, or its words) and by its description; `type=mcp` keeps the HTTP listing out.
    for query in ("get_weather", "get weather", "conditions city"):
        found = bazaar.search(SearchDiscoveryResourcesParams(query=query, type="mcp")).resources
        assert [r.accepts[0]["outputSchema"]["input"]["toolName"] for r in found] == ["get_weather"], query
    assert bazaar.search(SearchDiscoveryResourcesParams(query="harbour")).resources[0].type == "mcp"
    # The served item holds only documented fields.
    [item] = [i for i in discovery.catalog(type="mcp")["items"] if "tide" in str(i)]
    assert set(item) == {"resource", "type", "method", "x402Version", "accepts", "lastUpdated", "metadata"}
    assert item["metadata"] == {"description": "Tides of a harbour", "tags": []}  # the SDK's extension has no title


@STORES
def test_a_bad_mcp_extension_lists_nothing(discovery):
    for name, schema in (("bad name!", WEATHER), ("x" * 129, WEATHER), ("ok", {"type": "object",
                                                                               "description": "x" * 5000})):
        pay_tool(discovery, name, "Bad", schema)
    discovery.project()
    assert discovery.catalog(type="mcp")["items"] == []
    assert discovery.listings.counts["skipped:invalid_field"] == 2
    assert discovery.listings.counts["skipped:schema_too_large"] == 1


# -- one listing per route, through the proxy's gateway URLs --------------------------------------------------


@STORES
def test_a_wildcard_route_is_one_listing_with_the_routes_declaration_and_its_path_parameter(discovery):
    """`/quotes/*` paid at `/quotes/today` and `/quotes/tomorrow` (as the proxy records a payment: the route's own
    resource URL and extension, the merchant as the client) lists once, under the route's template."""
    from interfaces.http.proxy.payment import bazaar_extension

    container = discovery.gateway.container
    service = container.proxies.create_service("acme", "Quotes", domain="example.com", subdomain="quotes")
    route = container.proxies.add_route("acme", str(service.id), method="GET", path="/quotes/*", price=10_000,
                                        pay_to=str(discovery.gateway.pay_to.pubkey()),
                                        bazaar={"title": "Daily quotes", "tags": ["finance"]})
    gateway = f"http://127.0.0.1:8405/{service.slug}"
    for day in ("today", "tomorrow"):
        body = discovery.body(f"{gateway}/quotes/{day}")
        body["paymentPayload"]["extensions"] = {"bazaar": bazaar_extension(route)}
        assert discovery.pay(body=body).json["isValid"] is True
    # A payer's own words for the same gateway are the route's all the same.
    body = discovery.body(f"{gateway}/quotes/monday", {"title": "Forged"})
    assert discovery.pay(body=body).json["isValid"] is True
    discovery.project(confirm=False)  # nothing to confirm: the route's settings are the merchant's declaration
    [item] = discovery.catalog()["items"]
    assert item["resource"] == f"{gateway}/quotes/:var1"
    assert item["metadata"]["title"] == "Daily quotes" and item["metadata"]["tags"] == ["finance"]
    assert item["accepts"][0]["outputSchema"]["input"]["pathParams"] == {"var1": "string"}
