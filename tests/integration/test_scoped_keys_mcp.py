"""Keys scoped to an MCP service: a merchant whose own paid MCP server settles through Paywarden (x402's
`create_payment_wrapper_sync` with `HTTPFacilitatorClientSync`) scopes its key to that service, and the key verifies
and settles the terms of the service's priced tools only (a tool's resource is `{gateway}#tool`); `/supported`
answers a scoped key the kinds of its service's priced tools; the service_scopes read model rebuilt from the events
equals the live one. On the embedded default and on PostgreSQL with Redis, over a real sandbox chain.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from solders.keypair import Keypair

from domain.networks import DEVNET, KeyEnv
from interfaces.cli.main import main
from tests.conftest import STORES, USDC, Gateway, payment_key

PRICE, FORECAST_PRICE = USDC // 100, USDC // 50
PROXY = "https://proxy.paywarden.test"


def mcp_service(gateway: Gateway, name: str = "Weather tools", port: int = 8080) -> Any:
    """A sandbox MCP service (`http://localhost:<port>/mcp`) pricing get_weather (PRICE) and get_forecast."""
    proxies = gateway.container.proxies
    gateway.container.merchants.preverify_sandbox_domain("acme")  # acme is the sandbox merchant here
    service = proxies.create_service("acme", name, "localhost", path_suffix="/mcp", port=port, kind="mcp")
    pay_to = str(gateway.pay_to.pubkey())
    proxies.price_tool("acme", str(service.id), name="get_weather", price=PRICE, pay_to=pay_to)
    proxies.price_tool("acme", str(service.id), name="get_forecast", price=FORECAST_PRICE, pay_to=pay_to)
    return service


def scoped_key(gateway: Gateway, service_ref: str) -> tuple[str, dict[str, str]]:
    api_key, _ = gateway.container.merchants.create_key("acme", KeyEnv.TEST, service=service_ref)
    return api_key, {"Authorization": f"Bearer {api_key}"}


def calling(body: dict, url: str | None = None, tool: str | None = None) -> dict:
    """`body` for a resource `url` and, with `tool`, the Bazaar MCP extension naming it."""
    if url is not None:
        body["paymentPayload"]["resource"] = {"url": url}
    if tool is not None:
        body["paymentPayload"]["extensions"] = {"bazaar": {"info": {"input": {
            "type": "mcp", "toolName": tool, "transport": "streamable-http"}}}}
    return body


@STORES
def test_a_key_scoped_to_an_mcp_service_pays_for_its_priced_tools_only(gateway):
    service = mcp_service(gateway)
    other = mcp_service(gateway, "Other tools", port=8081)  # the same tools at the same prices, another service
    _, headers = scoped_key(gateway, service.slug)

    allowed = {
        "no resource": gateway.body(),
        "the gateway's resource": calling(gateway.body(), f"{PROXY}/{service.slug}#get_weather"),
        "the merchant's own URL": calling(gateway.body(), "http://localhost:8080/mcp#get_weather", "get_weather"),
        "the SDK's default resource": calling(gateway.body(), "mcp://tool/get_weather"),
        "the endpoint, the tool by the extension": calling(gateway.body(), "http://localhost:8080/mcp",
                                                           "get_weather"),
        "the other priced tool": calling(gateway.body(amount=FORECAST_PRICE), f"{PROXY}/{service.slug}#get_forecast"),
    }
    for case, body in allowed.items():
        answer = gateway.post("/verify", body, headers)
        assert answer.status_code == 200 and answer.json["isValid"] is True, (case, answer.json)

    stranger = Keypair()
    gateway.sandbox.mint_usdc(str(stranger.pubkey()), 0)
    refused = {
        "another service's tool": calling(gateway.body(), f"{PROXY}/{other.slug}#get_weather"),
        "an unpriced tool": calling(gateway.body(), f"{PROXY}/{service.slug}#echo"),
        "an unpriced tool by the extension": calling(gateway.body(), None, "echo"),
        "an unpriced tool, the SDK's resource": calling(gateway.body(), "mcp://tool/echo"),
        "another tool's price": calling(gateway.body(amount=FORECAST_PRICE), f"{PROXY}/{service.slug}#get_weather"),
        "another price": gateway.body(amount=3 * PRICE),
        "another payTo": gateway.body(gateway.transaction(pay_to=stranger.pubkey()), payTo=str(stranger.pubkey())),
        "a path of the service": calling(gateway.body(), "http://localhost:8080/mcp/admin#get_weather"),
    }
    for case, body in refused.items():
        answer = gateway.post("/verify", body, headers)
        assert answer.status_code == 400, case
        assert answer.json["isValid"] is False and answer.json["invalidReason"] == "invalid_payment_requirements"
        assert f"scoped to the service {service.slug}, and none of its priced tools" in answer.json[
            "invalidMessage"], case
    # the merchant's unscoped key may pay those terms: the refusal is the scope's
    assert gateway.post("/verify", refused["another price"], gateway.headers).json["isValid"] is True

    # A settle outside the scope records nothing and moves nothing; one of a priced tool is paid.
    api_key = headers["Authorization"].split()[1]
    before = gateway.sandbox.token_balance(str(gateway.pay_to.pubkey()), DEVNET.usdc_mint)
    body = refused["an unpriced tool"]
    answer = gateway.post("/settle", body, headers)
    assert answer.status_code == 400 and answer.json["errorReason"] == "invalid_payment_requirements"
    assert gateway.container.payments.get_payment(payment_key(gateway.container, api_key, body)) is None
    settled = gateway.post("/settle", calling(gateway.body(), f"{PROXY}/{service.slug}#get_weather"), headers)
    assert settled.status_code == 200 and settled.json["success"] is True
    assert gateway.sandbox.token_balance(str(gateway.pay_to.pubkey()), DEVNET.usdc_mint) == before + PRICE

    # unpriced, the tool is no longer the key's to pay
    gateway.container.proxies.unprice_tool("acme", str(service.id), "get_forecast")
    answer = gateway.post("/verify", allowed["the other priced tool"], headers)
    assert answer.status_code == 400 and answer.json["invalidReason"] == "invalid_payment_requirements"


@STORES
def test_the_merchants_own_paid_mcp_server_settles_with_a_key_scoped_to_its_service(gateway):
    """x402's MCP payment wrapper, its facilitator Paywarden through the SDK's HTTP client with the scoped key."""
    from x402 import x402ResourceServerSync
    from x402.extensions.bazaar import DeclareMcpDiscoveryConfig, declare_mcp_discovery_extension
    from x402.http import HTTPFacilitatorClientSync
    from x402.http.facilitator_client_base import CreateHeadersAuthProvider, FacilitatorConfig
    from x402.mcp import ResourceInfo, SyncPaymentWrapperConfig, create_payment_wrapper_sync
    from x402.mechanisms.svm.exact import ExactSvmServerScheme
    from x402.schemas import ResourceConfig

    service = mcp_service(gateway)
    api_key, _ = scoped_key(gateway, str(service.id))
    auth = {"Authorization": f"Bearer {api_key}"}
    answers: list[tuple[str, int, dict[str, Any]]] = []

    def on_response(response: httpx.Response) -> None:
        answers.append((response.request.url.path, response.status_code, json.loads(response.read())))

    http = httpx.Client(transport=httpx.WSGITransport(app=gateway.client.app), base_url="http://paywarden",
                        event_hooks={"response": [on_response]})
    facilitator = HTTPFacilitatorClientSync(FacilitatorConfig(url="http://paywarden", http_client=http,
                                                              auth_provider=CreateHeadersAuthProvider(
                                                                  lambda: {"verify": auth, "settle": auth,
                                                                           "supported": auth})))
    server = x402ResourceServerSync(facilitator)
    server.register("solana:*", ExactSvmServerScheme())
    server.initialize()  # the scoped key's /supported answers the kinds of the service's priced tools
    pay_to = str(gateway.pay_to.pubkey())

    def paid_tool(tool: str, price: int) -> tuple[Any, list[dict[str, Any]]]:
        accepts = server.build_payment_requirements(ResourceConfig(scheme="exact", pay_to=pay_to,
                                                                   price=f"${price / 1_000_000}",
                                                                   network=DEVNET.caip2))
        url = f"http://localhost:8080/mcp#{tool}"
        extensions = declare_mcp_discovery_extension(DeclareMcpDiscoveryConfig(
            tool_name=tool, description="Current conditions", input_schema={"type": "object"},
            transport="streamable-http"))
        wrapper = create_payment_wrapper_sync(server, SyncPaymentWrapperConfig(
            accepts=accepts, resource=ResourceInfo(url=url, description="Current conditions"),
            extensions=extensions))
        handler = wrapper(lambda args, _: {"content": [{"type": "text", "text": f"{args['city']}: sunny"}]})
        accepted = json.loads(accepts[0].model_dump_json(by_alias=True, exclude_none=True))
        payment = {"x402Version": 2, "payload": {"transaction": gateway.transaction(price)}, "accepted": accepted,
                   "resource": {"url": url}, "extensions": extensions}
        return handler({"city": "Lisbon"}, {"_meta": {"x402/payment": payment}, "toolName": tool}), accepts

    before = gateway.sandbox.token_balance(pay_to, DEVNET.usdc_mint)
    paid, _ = paid_tool("get_weather", PRICE)
    assert paid.is_error is False and paid.content[0]["text"] == "Lisbon: sunny", paid
    response = paid.meta["x402/payment-response"]
    assert response["success"] is True and gateway.sandbox.transaction(response["transaction"]) is not None
    assert gateway.sandbox.token_balance(pay_to, DEVNET.usdc_mint) == before + PRICE

    assert [(path, status) for path, status, _ in answers] == [("/supported", 200), ("/verify", 200),
                                                               ("/settle", 200)]

    # a tool the service does not price: the facilitator refuses the scoped key (the SDK's wrapper answers its own
    # error result), nothing is settled
    refused, _ = paid_tool("premium_quote", PRICE)
    assert refused.is_error is True and "x402/payment-response" not in (refused.meta or {})
    [(path, status, answer)] = answers[3:]
    assert (path, status, answer["invalidReason"]) == ("/verify", 400, "invalid_payment_requirements")
    assert f"scoped to the service {service.slug}" in answer["invalidMessage"]
    assert gateway.sandbox.token_balance(pay_to, DEVNET.usdc_mint) == before + PRICE


def with_an_empty_mcp_service(gateway: Any) -> tuple[Any, Any, dict[str, str], dict[str, str]]:
    """The weather mcp service, one with no priced tool, and a key scoped to each."""
    service = mcp_service(gateway)
    empty = gateway.container.proxies.create_service("acme", "No tools", "localhost", port=8082, kind="mcp")
    _, weather_key = scoped_key(gateway, str(service.id))
    _, empty_key = scoped_key(gateway, str(empty.id))
    return service, empty, weather_key, empty_key


def supported(gateway: Any, headers: dict[str, str], **params: str) -> dict[str, Any]:
    answer = gateway.client.simulate_get("/supported", params=params, headers=headers)
    assert answer.status_code == 200, answer.json
    return answer.json


@STORES
def test_supported_answers_a_scoped_key_the_kinds_of_its_mcp_services_priced_tools(gateway):
    service, empty, weather_key, empty_key = with_an_empty_mcp_service(gateway)

    def kinds(headers: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
        return [(k["network"], k["extra"]) for k in supported(gateway, headers)["kinds"]]

    fee_payer = {"feePayer": gateway.fee_payer}
    assert kinds(weather_key) == [(DEVNET.caip2, fee_payer)]
    assert kinds(empty_key) == []  # no priced tool yet: nothing to pay for
    gateway.container.proxies.price_tool("acme", str(empty.id), name="ping", price=PRICE,
                                         pay_to=str(gateway.pay_to.pubkey()))
    assert kinds(empty_key) == [(DEVNET.caip2, fee_payer)]


@STORES
def test_supported_for_an_mcp_service_answers_the_kinds_of_its_priced_tools(gateway):
    """`GET /supported?service=<slug>` of an mcp service: its priced tools' kinds, as an HTTP service's routes'."""
    service, empty, weather_key, empty_key = with_an_empty_mcp_service(gateway)

    def kinds(headers: dict[str, str], **params: str) -> list[tuple[str, dict[str, Any]]]:
        answer = supported(gateway, headers, **params)
        assert answer["signers"] == {"solana:*": [gateway.fee_payer]}
        return [(k["x402Version"], k["scheme"], k["network"], k["extra"]) for k in answer["kinds"]]

    expected = [(2, "exact", DEVNET.caip2, {"feePayer": gateway.fee_payer})]
    for headers in (gateway.headers, weather_key):  # the merchant's key, and the key scoped to the service
        assert kinds(headers, service=service.slug) == expected
        assert kinds(headers, service=service.slug.upper(), path="/") == expected  # the tools are at its endpoint
    for params, headers in (({"service": empty.slug}, gateway.headers),  # no priced tool
                            ({"service": service.slug, "path": "/weather"}, gateway.headers),  # not the endpoint
                            ({"service": service.slug}, empty_key)):  # another service than the key's
        refused = gateway.client.simulate_get("/supported", params=params, headers=headers)
        assert refused.status_code == 400 and refused.json["error"] == "unknown_service", params
    gateway.container.proxies.price_tool("acme", str(empty.id), name="ping", price=PRICE,
                                         pay_to=str(gateway.pay_to.pubkey()))
    assert kinds(gateway.headers, service=empty.slug) == expected
    gateway.container.proxies.unprice_tool("acme", str(empty.id), "ping")
    refused = gateway.client.simulate_get("/supported", params={"service": empty.slug}, headers=gateway.headers)
    assert refused.status_code == 400 and refused.json["error"] == "unknown_service"


@STORES
def test_the_service_scopes_rebuilt_from_the_events_equal_the_live_ones(gateway, monkeypatch, capsys):
    service = mcp_service(gateway)
    proxies = gateway.container.proxies
    proxies.price_tool("acme", str(service.id), name="get_weather", price=2 * PRICE,
                       pay_to=str(gateway.pay_to.pubkey()))  # priced again: replaced in its place
    proxies.price_tool("acme", str(service.id), name="echo", price=PRICE, pay_to=str(gateway.pay_to.pubkey()))
    proxies.unprice_tool("acme", str(service.id), "echo")
    scope = gateway.container.service_scopes.get_scope(str(service.id))
    assert scope.kind == "mcp" and [(t.name, t.price) for t in scope.tools] == [
        ("get_weather", 2 * PRICE), ("get_forecast", FORECAST_PRICE)]

    config = gateway.container.config
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(config.data_dir))
    if config.database_url:
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", config.database_url)
        monkeypatch.setenv("PAYWARDEN_REDIS_URL", config.redis_url)
    assert main(["audit", "rebuild", "--check", "--json"]) == 0
    rows = {row["read_model"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["service_scopes"]["equal"] is True and rows["service_scopes"]["differences"] == []
    assert rows["service_scopes"]["events"] >= 7  # created, kind, 4 prices, 1 unpriced

    with gateway.container.service_scopes.datastore.transaction(commit=True) as c:  # a tool's price changed by hand
        c.execute(gateway.container.service_scopes.sql("UPDATE service_scopes_tools SET tool = ? WHERE name = ?"),
                  (json.dumps({**scope.tools[1].as_dict(), "price": 1}), "get_forecast"))
    assert main(["audit", "rebuild", "--check"]) == 1
    assert "service_scopes_tools: row" in capsys.readouterr().out
