"""An `mcp` proxy service: its kind, chosen at creation, and its tool prices, events of the service."""

from __future__ import annotations

import pytest

from application.proxy_services import ProxyServices
from domain.mcp_tools import ToolPrice, tool_via
from domain.proxy_service import ProxyService, ProxyServiceConflictError, ProxyServiceError
from tests.unit.application.test_proxy_services import PAY_TO, Directory, services

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture
def app() -> ProxyServices:
    directory = Directory()
    directory.verify("a", "tools.example.com")
    return services(directory)


def test_an_mcp_service_prices_tools_by_name_and_a_replay_of_its_events_keeps_them(app):
    service = app.create_service("a", "Tools", kind="mcp")
    assert service.kind == "mcp" and service.tools == {}
    priced = app.price_tool("a", str(service.id), name="get_weather", price=10_000, pay_to=PAY_TO,
                            description="Weather for a city", input_schema=SCHEMA)
    app.price_tool("a", str(service.id), name="forecast.v2", price=20_000, pay_to=PAY_TO)
    app.price_tool("a", str(service.id), name="get_weather", price=15_000, pay_to=PAY_TO, input_schema=SCHEMA)
    app.unprice_tool("a", str(service.id), "forecast.v2")
    replayed = app.get_service("a", str(service.id))  # from the event store
    assert replayed.kind == "mcp" and list(replayed.tools) == ["get_weather"]
    assert replayed.tools["get_weather"].price == 15_000 and replayed.tools["get_weather"].input_schema == SCHEMA
    assert priced.network and priced.asset  # the merchant's only enabled network and its USDC
    assert app.tool_price(replayed, "get_weather") == replayed.tools["get_weather"]
    assert app.tool_price(replayed, "forecast.v2") is None and app.tool_price(replayed, 7) is None
    assert tool_via("s", "get_weather") == "mcp:s:get_weather"


def test_an_http_service_is_the_default_and_takes_no_tool_prices_nor_an_mcp_one_routes(app):
    http = app.create_service("a", "Plain")
    assert http.kind == "http"
    with pytest.raises(ProxyServiceConflictError):
        app.price_tool("a", str(http.id), name="t", price=1, pay_to=PAY_TO)
    assert app.tool_price(http, "t") is None
    mcp = app.create_service("a", "Tools", kind="mcp")
    with pytest.raises(ProxyServiceConflictError):
        app.add_route("a", str(mcp.id), method="POST", path="/mcp", price=1, pay_to=PAY_TO)
    with pytest.raises(ProxyServiceError) as bad:
        app.create_service("a", "Odd", kind="grpc")
    assert bad.value.field == "kind"


@pytest.mark.parametrize(("fields", "field"), [
    ({"name": "has space"}, "tool"), ({"name": "x" * 129}, "tool"), ({"name": ""}, "tool"),
    ({"price": 0}, "price"), ({"price": True}, "price"), ({"pay_to": "nope"}, "payTo"),
    ({"max_timeout_seconds": 0}, "maxTimeoutSeconds"), ({"description": "\x00"}, "description"),
    ({"input_schema": ["not", "an", "object"]}, "inputSchema"),
    ({"input_schema": {"x": "y" * 9000}}, "inputSchema"),
])
def test_a_tool_price_is_refused_field_by_field(fields, field):
    good = {"name": "get_weather", "price": 1, "network": "n", "asset": "a", "pay_to": PAY_TO}
    with pytest.raises(ProxyServiceError) as bad:
        ToolPrice.checked(**{**good, **fields})
    assert bad.value.field == field


def test_a_service_with_priced_tools_is_not_deleted_and_its_kind_is_not_changed_later(app):
    service = app.create_service("a", "Tools", kind="mcp")
    app.price_tool("a", str(service.id), name="t", price=1, pay_to=PAY_TO)
    with pytest.raises(ProxyServiceConflictError):
        app.delete_service("a", str(service.id))
    loaded: ProxyService = app.get_service("a", str(service.id))
    with pytest.raises(ProxyServiceConflictError):
        loaded.choose_kind("http")
    app.unprice_tool("a", str(service.id), "t")
    app.delete_service("a", str(service.id))


def test_a_price_takes_the_tool_as_its_mcp_server_lists_it(app):
    """The one rule the CLI, the console's pages and its JSON API ask: the server must list the tool, and its
    description (first 500 characters) and input schema are the price's unless given."""
    service = app.create_service("a", "Tools", kind="mcp")
    listed = [{"name": "get_weather", "description": "Weather " + "x" * 600, "inputSchema": SCHEMA},
              {"name": "echo", "inputSchema": "not an object"}]
    weather = app.price_tool("a", str(service.id), name="get_weather", price=1, pay_to=PAY_TO, listed=listed)
    assert weather.description == ("Weather " + "x" * 600)[:500] and weather.input_schema == SCHEMA
    own = app.price_tool("a", str(service.id), name="get_weather", price=1, pay_to=PAY_TO, listed=listed,
                         description="Mine")
    assert own.description == "Mine" and own.input_schema == SCHEMA
    echo = app.price_tool("a", str(service.id), name="echo", price=1, pay_to=PAY_TO, listed=listed)
    assert (echo.description, echo.input_schema) == ("", None)
    with pytest.raises(ProxyServiceError, match="lists no tool nope") as refused:
        app.price_tool("a", str(service.id), name="nope", price=1, pay_to=PAY_TO, listed=listed)
    assert refused.value.field == "tool" and "nope" not in app.get_service("a", str(service.id)).tools
    assert app.price_tool("a", str(service.id), name="nope", price=1, pay_to=PAY_TO).name == "nope"  # not asked
