"""The console's services and routes API (docs/proxy.md) over a real gateway on the sandbox chain."""

from __future__ import annotations

import pytest
from solders.keypair import Keypair

from tests.integration.console_helpers import ApiClient, console_client, two_merchants

PAY_TO = str(Keypair().pubkey())


@pytest.fixture
def gateway(tmp_path, sandbox):
    yield from two_merchants(tmp_path, sandbox)


@pytest.fixture
def console(gateway):
    gateway.container.merchants.preverify_sandbox_domain("acme")  # acme is the sandbox merchant: localhost is its
    return console_client(gateway.container)


def logged_in(console, email):
    client = ApiClient(console)
    assert client.login(email).status_code == 200
    return client


def test_a_merchant_creates_lists_edits_and_deletes_a_service_with_its_routes(console):
    acme, beta = logged_in(console, "owner@acme.test"), logged_in(console, "owner@beta.test")
    created = acme.request("POST", "/services", json={"name": "Local", "domain": "localhost", "port": 9999,
                                                     "upstreamAuth": {"header": "X-Api-Key", "value": "s3cret-up"}})
    assert created.status_code == 201
    service = created.json
    assert {k: service[k] for k in ("name", "type", "baseUrl", "active")} == {
        "name": "Local", "type": "Proxy", "baseUrl": "http://localhost:9999", "active": True}
    assert service["slug"] == "local" and service["gatewayUrl"].endswith("/local")  # made from the name
    assert "s3cret-up" not in created.text and service["upstreamAuth"] == {"header": "X-Api-Key", "set": True}
    sid = service["id"]
    assert [s["id"] for s in acme.request("GET", "/services").json["services"]] == [sid]
    assert beta.request("GET", f"/services/{sid}").status_code == 404  # another merchant's is unknown
    assert beta.request("GET", "/services").json["services"] == []

    route = acme.request("POST", f"/services/{sid}/routes", json={"method": "GET", "path": "/weather/*",
                                                                  "price": "10000", "payTo": PAY_TO})
    assert route.status_code == 201 and route.json["price"] == "10000"
    assert acme.request("GET", f"/services/{sid}/routes").json["routes"][0]["id"] == route.json["id"]

    blocked = acme.request("DELETE", f"/services/{sid}")
    assert blocked.status_code == 409
    off = acme.request("PATCH", f"/services/{sid}", json={"active": False, "name": "Local 2"})
    assert off.status_code == 200 and off.json["active"] is False and off.json["name"] == "Local 2"
    assert acme.request("DELETE", f"/services/{sid}/routes/{route.json['id']}").status_code == 204
    assert acme.request("DELETE", f"/services/{sid}").status_code == 204
    assert acme.request("GET", f"/services/{sid}").status_code == 404


def test_bad_service_and_route_input_is_400_with_its_field(console):
    acme = logged_in(console, "owner@acme.test")
    unverified = acme.request("POST", "/services", json={"name": "W", "domain": "weather.com"})
    assert unverified.status_code == 400 and unverified.json["field"] == "domain"
    sid = acme.request("POST", "/services", json={"name": "L", "domain": "localhost", "port": 9000}).json["id"]
    bad_price = acme.request("POST", f"/services/{sid}/routes", json={"path": "/x", "price": "0", "payTo": PAY_TO})
    assert bad_price.status_code == 400 and bad_price.json["field"] == "price"
    bad_path = acme.request("POST", f"/services/{sid}/routes", json={"path": "x", "price": "5", "payTo": PAY_TO})
    assert bad_path.status_code == 400 and bad_path.json["field"] == "path"


def test_an_mcp_service_is_created_with_its_kind_and_takes_no_routes(console):
    acme = logged_in(console, "owner@acme.test")
    created = acme.request("POST", "/services", json={"name": "Tools", "kind": "mcp", "domain": "localhost",
                                                     "port": 9001, "pathSuffix": "/mcp"})
    assert created.status_code == 201 and created.json["kind"] == "mcp" and created.json["tools"] == 0
    route = acme.request("POST", f"/services/{created.json['id']}/routes", json={"path": "/x", "price": "5",
                                                                                "payTo": PAY_TO})
    assert route.status_code == 409
    odd = acme.request("POST", "/services", json={"name": "X", "kind": "grpc", "domain": "localhost", "port": 9002})
    assert odd.status_code == 400 and odd.json["field"] == "kind"
    plain = acme.request("POST", "/services", json={"name": "Y", "domain": "localhost", "port": 9003})
    assert plain.json["kind"] == "http"


def test_the_console_api_names_a_service_by_its_slug_as_well_as_its_id(console):
    acme, beta = logged_in(console, "owner@acme.test"), logged_in(console, "owner@beta.test")
    service = acme.request("POST", "/services", json={"name": "Quotes", "domain": "localhost", "port": 9999}).json
    slug = service["slug"]
    assert acme.request("GET", f"/services/{slug}").json["id"] == service["id"]
    route = acme.request("POST", f"/services/{slug}/routes", json={"method": "GET", "path": "/quotes/*",
                                                                   "price": "10000", "payTo": PAY_TO})
    assert route.status_code == 201
    assert [r["id"] for r in acme.request("GET", f"/services/{service['id']}/routes").json["routes"]] == [
        route.json["id"]]
    assert acme.request("PATCH", f"/services/{slug}", json={"name": "My Quotes"}).json["name"] == "My Quotes"
    assert beta.request("GET", f"/services/{slug}").status_code == 404  # another merchant's slug: unknown
    assert acme.request("DELETE", f"/services/{slug}/routes/{route.json['id']}").status_code == 204
    assert acme.request("DELETE", f"/services/{slug}").status_code == 204
    assert acme.request("GET", "/services").json["services"] == []
