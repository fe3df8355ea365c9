"""The console's pages for an MCP service: created with its kind, its page lists the tools its MCP server offers
(`tools/list` through the proxy's outbound rules) to price, a price refused beside its field, a tool priced with
the server's description and input schema, then made free; a server out of reach is said on the page."""

from __future__ import annotations

import re

import pytest
from solders.keypair import Keypair

from tests.faults import free_port
from tests.integration.console_helpers import console_client, two_merchants
from tests.integration.test_console_pages import log_in, post
from tests.mcp_servers import Upstream, serving


@pytest.fixture
def gateway(tmp_path, sandbox):
    for gateway in two_merchants(tmp_path, sandbox):
        gateway.container.merchants.preverify_sandbox_domain("acme")
        yield gateway


def test_a_merchant_prices_an_mcp_servers_tool_from_the_pages(gateway):
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    get = lambda path: client.simulate_get(path, cookies={"pw_console_session": cookie})  # noqa: E731
    upstream = Upstream(json_response=False)
    with serving(upstream.app, upstream.port):
        assert '<option value="mcp"' in get("/services").text
        created = post(client, "/services", {"csrf_token": csrf, "name": "Weather tools", "kind": "mcp",
                                             "domain": "localhost", "port": str(upstream.port),
                                             "path_suffix": "/mcp"}, cookie)
        assert created.status_code == 303
        page_path = created.headers["Location"].split("?")[0]
        service_id = page_path.rsplit("/", 1)[1]
        page = get(page_path).text
        assert "Price a tool" in page and "Add a route" not in page
        assert {"get_weather", "get_forecast", "broken", "echo"} <= set(re.findall(r'<option value="([a-z_]+)"', page))
        assert "No priced tools yet" in page

        pay_to = str(Keypair().pubkey())
        refused = post(client, f"/services/{service_id}/tools", {"csrf_token": csrf, "tool": "get_weather",
                                                                 "price": "0.0000001", "pay_to": pay_to}, cookie)
        assert refused.status_code == 400 and 'id="e-price"' in refused.text
        unlisted = post(client, f"/services/{service_id}/tools", {"csrf_token": csrf, "tool": "nope",
                                                                  "price": "0.01", "pay_to": pay_to}, cookie)
        assert unlisted.status_code == 400 and "the MCP server lists no tool nope" in unlisted.text
        priced = post(client, f"/services/{service_id}/tools", {"csrf_token": csrf, "tool": "get_weather",
                                                                "price": "0.01", "pay_to": pay_to}, cookie)
        assert priced.status_code == 303
        page = get(page_path).text
        assert re.search(r'data-tool="get_weather"><td class="mono">get_weather</td><td class="price">0.01 USDC', page)
        assert "get_weather (priced)" in page
        tool = gateway.container.proxies.get_service("acme", service_id).tools["get_weather"]
        assert tool.price == 10_000 and tool.description == "The weather in a city, now"
        assert tool.input_schema["properties"]["city"]["type"] == "string"
        assert "2 route" not in get("/services").text and "1 tool(s)" in get("/services").text

        blocked = post(client, f"/services/{service_id}/delete", {"csrf_token": csrf}, cookie)
        assert blocked.status_code == 409 and "unprice them first" in blocked.text
        freed = post(client, f"/services/{service_id}/tools/get_weather/unprice", {"csrf_token": csrf}, cookie)
        assert freed.status_code == 303 and "No priced tools yet" in get(page_path).text

    moved = post(client, page_path, {"csrf_token": csrf, "name": "Weather tools", "domain": "localhost",
                                      "port": str(free_port()), "path_suffix": "/mcp"}, cookie)
    assert moved.status_code == 303
    assert "Could not list the MCP server's tools: the MCP server did not answer" in get(page_path).text
