"""The console's JSON API for an MCP service's tool prices (docs/mcp.md): listed with the MCP server's own tools,
priced (the server's description and input schema copied) and made free, with the routes API's validation, error
codes, session, CSRF and ownership rules; over a real gateway on the sandbox chain and a real MCP server."""

from __future__ import annotations

import pytest
from solders.keypair import Keypair

from tests.faults import free_port
from tests.integration.console_helpers import ApiClient, console_client, two_merchants
from tests.mcp_servers import Upstream, serving

PAY_TO = str(Keypair().pubkey())


@pytest.fixture
def gateway(tmp_path, sandbox):
    for gateway in two_merchants(tmp_path, sandbox):
        gateway.container.merchants.preverify_sandbox_domain("acme")  # acme is the sandbox merchant: localhost
        yield gateway


@pytest.fixture
def clients(gateway):
    console = console_client(gateway.container)
    acme, beta = ApiClient(console), ApiClient(console)
    assert acme.login("owner@acme.test").status_code == 200 and beta.login("owner@beta.test").status_code == 200
    return acme, beta


def test_a_merchant_lists_prices_and_frees_an_mcp_servers_tools(gateway, clients):
    acme, beta = clients
    upstream = Upstream(json_response=True)
    with serving(upstream.app, upstream.port):
        service = acme.request("POST", "/services", json={"name": "Tools", "kind": "mcp", "domain": "localhost",
                                                         "port": upstream.port, "pathSuffix": "/mcp"}).json
        sid = service["id"]
        assert acme.request("GET", f"/services/{sid}/tools").json == {"tools": []}
        listed = acme.request("GET", f"/services/{sid}/tools?upstream=true").json
        assert listed["tools"] == [] and {t["name"]: t["priced"] for t in listed["upstream"]} == {
            "get_weather": False, "get_forecast": False, "broken": False, "echo": False}
        assert next(t for t in listed["upstream"] if t["name"] == "echo")["description"] == "Says it back"

        priced = acme.request("PUT", f"/services/{sid}/tools/get_weather", json={"priceUsdc": "0.01",
                                                                                  "payTo": PAY_TO})
        assert priced.status_code == 201, priced.json
        assert {k: priced.json[k] for k in ("name", "price", "priceUsdc", "payTo", "maxTimeoutSeconds",
                                            "description")} == {
            "name": "get_weather", "price": "10000", "priceUsdc": "0.01", "payTo": PAY_TO, "maxTimeoutSeconds": 60,
            "description": "The weather in a city, now"}  # the server's description and input schema
        assert priced.json["inputSchema"]["properties"]["city"]["type"] == "string"
        # priced again: the price replaced (200), a description of the merchant's own
        again = acme.request("PUT", f"/services/{service['slug']}/tools/get_weather", json={
            "price": "20000", "payTo": PAY_TO, "description": "Weather now", "maxTimeoutSeconds": 30})
        assert again.status_code == 200 and (again.json["price"], again.json["description"]) == ("20000",
                                                                                              "Weather now")
        assert again.json["maxTimeoutSeconds"] == 30 and "inputSchema" in again.json
        tool = gateway.container.proxies.get_service("acme", sid).tools["get_weather"]
        assert (tool.price, tool.description, tool.max_timeout_seconds) == (20_000, "Weather now", 30)
        assert [t["name"] for t in acme.request("GET", f"/services/{sid}/tools").json["tools"]] == ["get_weather"]
        listed = acme.request("GET", f"/services/{sid}/tools?upstream=true").json
        assert {t["name"] for t in listed["upstream"] if t["priced"]} == {"get_weather"}
        assert acme.request("GET", f"/services/{sid}").json["tools"] == 1

        # a tool the server does not list: refused beside its field, nothing priced
        unlisted = acme.request("PUT", f"/services/{sid}/tools/nope", json={"price": "5", "payTo": PAY_TO})
        assert unlisted.status_code == 400 and unlisted.json["error"] == "invalid_request"
        assert unlisted.json["field"] == "tool" and "lists no tool nope" in unlisted.json["message"]

        assert acme.request("DELETE", f"/services/{sid}").status_code == 409  # priced tools: unprice them first
        assert acme.request("DELETE", f"/services/{sid}/tools/get_weather").status_code == 204
        gone = acme.request("DELETE", f"/services/{sid}/tools/get_weather")
        assert gone.status_code == 404 and gone.json["error"] == "not_found"
        assert acme.request("GET", f"/services/{sid}/tools").json["tools"] == []

    # the server gone: the list says why beside the priced tools; "upstream": false prices without asking
    assert acme.request("PATCH", f"/services/{sid}", json={"port": free_port()}).status_code == 200
    offline = acme.request("GET", f"/services/{sid}/tools?upstream=true")
    assert offline.status_code == 200 and offline.json["upstream"] is None
    assert "the MCP server did not answer" in offline.json["upstreamError"]
    refused = acme.request("PUT", f"/services/{sid}/tools/later", json={"price": "5", "payTo": PAY_TO})
    assert refused.status_code == 400 and "the MCP server did not answer" in refused.json["message"]
    later = acme.request("PUT", f"/services/{sid}/tools/later", json={
        "price": "5", "payTo": PAY_TO, "upstream": False, "inputSchema": {"type": "object"}})
    assert later.status_code == 201 and later.json["inputSchema"] == {"type": "object"}
    assert "description" not in later.json

    # another merchant's service is as unknown as no service at all
    for method, path, body in (("GET", f"/services/{sid}/tools", None),
                               ("PUT", f"/services/{sid}/tools/later", {"price": "5", "payTo": PAY_TO,
                                                                        "upstream": False}),
                               ("DELETE", f"/services/{sid}/tools/later", None),
                               ("GET", "/services/nowhere/tools", None)):
        answer = beta.request(method, path, json=body)
        assert answer.status_code == 404 and answer.json["error"] == "not_found", (method, path)
    assert "later" in gateway.container.proxies.get_service("acme", sid).tools


def test_bad_tool_prices_are_refused_with_the_routes_apis_codes(gateway, clients):
    acme, _ = clients
    sid = acme.request("POST", "/services", json={"name": "Tools", "kind": "mcp", "domain": "localhost",
                                                 "port": free_port()}).json["id"]
    offline = {"payTo": PAY_TO, "upstream": False}
    cases = {
        "priceUsdc": {**offline, "price": "5", "priceUsdc": "1"},  # the price given twice
        "payTo": {"price": "5", "upstream": False},
        "maxTimeoutSeconds": {**offline, "price": "5", "maxTimeoutSeconds": 0},
        "inputSchema": {**offline, "price": "5", "inputSchema": {"description": "x" * 9000}},
        "network": {**offline, "price": "5", "network": "solana:nowhere"},
    }
    cases["priceUsdc "] = {**offline, "priceUsdc": "0.0000001"}  # more than 6 decimals
    for field, body in cases.items():
        answer = acme.request("PUT", f"/services/{sid}/tools/get_weather", json=body)
        assert answer.status_code == 400, (field, answer.json)
        assert answer.json["error"] == "invalid_request" and answer.json["field"] == field.strip(), answer.json
    bad_name = acme.request("PUT", f"/services/{sid}/tools/bad name!", json={**offline, "price": "5"})
    assert bad_name.status_code == 400 and bad_name.json["field"] == "tool"
    bad_pay_to = acme.request("PUT", f"/services/{sid}/tools/t", json={"price": "5", "payTo": "x" * 40,
                                                                       "upstream": False})
    assert bad_pay_to.status_code == 400 and bad_pay_to.json["field"] == "payTo"
    assert acme.request("GET", f"/services/{sid}/tools").json["tools"] == []

    # an http service takes routes, not tools
    http = acme.request("POST", "/services", json={"name": "API", "domain": "localhost", "port": 9101}).json["id"]
    conflict = acme.request("PUT", f"/services/{http}/tools/t", json={**offline, "price": "5"})
    assert conflict.status_code == 409 and conflict.json["error"] == "conflict"
    listed = acme.request("GET", f"/services/{http}/tools?upstream=true").json
    assert listed["tools"] == [] and listed["upstream"] is None and "http service" in listed["upstreamError"]


def test_the_tools_api_needs_a_session_and_its_csrf_token(gateway, clients):
    acme, _ = clients
    sid = acme.request("POST", "/services", json={"name": "Tools", "kind": "mcp", "domain": "localhost",
                                                 "port": free_port()}).json["id"]
    body = {"price": "5", "payTo": PAY_TO, "upstream": False}
    for method in ("PUT", "DELETE"):
        refused = acme.request(method, f"/services/{sid}/tools/t", json=body if method == "PUT" else None,
                               csrf=False)
        assert refused.status_code == 403 and refused.json["error"] == "csrf_refused", method
        cross = acme.request(method, f"/services/{sid}/tools/t", json=body if method == "PUT" else None,
                             headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403, method
    stranger = ApiClient(acme.client)
    for method in ("GET", "PUT", "DELETE"):
        answer = stranger.request(method, f"/services/{sid}/tools" + ("/t" if method != "GET" else ""),
                                  json=body if method == "PUT" else None)
        assert answer.status_code in (401, 403), method  # no session: no token either
    assert stranger.request("GET", f"/services/{sid}/tools").json["error"] == "unauthenticated"
    assert gateway.container.proxies.get_service("acme", sid).tools == {}
    assert acme.request("PUT", f"/services/{sid}/tools/t", json=body).status_code == 201
