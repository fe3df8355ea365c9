"""Agents pay per tool call: an MCP server that knows nothing of payments behind `paywarden up`'s proxy, paid by
the official `x402.mcp` client over the `mcp` SDK's Streamable HTTP client session, with the SVM `exact` scheme.

The server is built with the `mcp` SDK (2.x), once answering JSON and once `text/event-stream`; the merchant
registers it with the CLI (`service create --kind mcp`, `tool list --upstream`, `tool price`).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from solana.rpc.api import Client

from tests.e2e.test_stack import PRICE, payer_keypair, usdc_balance
from tests.faults import free_port
from tests.mcp_servers import OwnPaidServer, SessionAdapter, Upstream, run, serving

pytestmark = pytest.mark.slow


def cli(stack, *argv: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    env["PAYWARDEN_DATA_DIR"] = str(stack.data_dir)
    done = subprocess.run([stack.process.args[0], *argv], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(params=["json", "sse"])
def gateway(request, stack) -> Iterator[tuple[str, Upstream, str]]:
    """An MCP service of the sandbox merchant in front of a fresh MCP server; `get_weather`, `get_forecast` and
    `broken` priced at PRICE (the demo route's price and payTo, so one payment could open either door)."""
    upstream = Upstream(json_response=request.param == "json")
    with serving(upstream.app, upstream.port):
        service = cli(stack, "service", "create", "--merchant", "sandbox", "--name", f"Weather {request.param}",
                      "--domain", "localhost", "--port", str(upstream.port), "--path-suffix", "/mcp", "--kind", "mcp")
        assert service["kind"] == "mcp"
        listed = cli(stack, "tool", "list", "--merchant", "sandbox", "--service", service["id"], "--upstream")
        assert {t["name"] for t in listed} == {"get_weather", "get_forecast", "broken", "echo"}
        assert not any(t["priced"] for t in listed)
        for name in ("get_weather", "get_forecast", "broken"):
            priced = cli(stack, "tool", "price", name, "--merchant", "sandbox", "--service", service["id"],
                         "--price", str(PRICE), "--pay-to", stack["pay_to"])
        assert priced["inputSchema"]["type"] == "object" and priced["description"] == "A tool that always fails"
        yield service["gatewayUrl"], upstream, request.param


def listed_tools(stack, query: str, resource: str, first_limit: int) -> list[Any]:
    """The SDK's Bazaar client's `type=mcp` search for `query`, asked until it lists `resource` (the projection
    worker lists a tool a moment after its payment is verified). The catalog caches each normalised query's answer
    for 60 s, so each ask is a query of its own: its `limit` goes up from `first_limit` (each test its own range)."""
    from x402.extensions.bazaar import SearchDiscoveryResourcesParams, with_bazaar
    from x402.http import HTTPFacilitatorClientSync
    from x402.http.facilitator_client_base import FacilitatorConfig

    bazaar = with_bazaar(HTTPFacilitatorClientSync(FacilitatorConfig(url=stack["base_url"]))).extensions.bazaar
    for limit in range(first_limit, first_limit + 30):
        found = bazaar.search(SearchDiscoveryResourcesParams(query=query, type="mcp", limit=limit)).resources
        if any(r.resource == resource for r in found):
            return [r for r in found if r.resource == resource]
        time.sleep(1)
    return []


def paying_client(stack, session: Any, progress: list[Any] | None = None) -> Any:
    from x402 import x402ClientSync
    from x402.mcp import x402MCPClient
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    payments = x402ClientSync()
    payments.register("solana:*", ExactSvmScheme(KeypairSigner(payer_keypair(stack)), rpc_url=stack["rpc_url"]))

    async def on_progress(*seen: Any) -> None:
        if progress is not None:
            progress.append(seen)

    return x402MCPClient(SessionAdapter(session, on_progress), payments, auto_payment=True)


async def in_session(url: str, story: Any) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await story(session)


def test_an_agent_pays_a_tool_call_and_gets_its_result_with_the_payment_response(stack, gateway):
    from x402.mcp import PaymentRequiredError
    from x402.mcp.utils import attach_payment_to_meta

    url, upstream, mode = gateway
    rpc = Client(stack["rpc_url"])
    before = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"])
    progress: list[Any] = []

    async def story(session: Any) -> dict[str, Any]:
        seen: dict[str, Any] = {"tools": [t.name for t in (await session.list_tools()).tools]}
        # unpaid: the payment-required tool result, as the SDK reads it
        unpaid = paying_client(stack, session)
        unpaid._auto_payment = False
        with pytest.raises(PaymentRequiredError) as required:
            await unpaid.call_tool("get_weather", {"city": "Lisbon"})
        seen["required"] = required.value.payment_required
        # a free tool passes through unpaid
        seen["free"] = await paying_client(stack, session).call_tool("echo", {"text": "hello"})
        # paid: the result and the settle answer
        client = paying_client(stack, session, progress)
        payloads: list[Any] = []
        client.on_after_payment(lambda context: payloads.append(context.payment_payload))
        seen["paid"] = await client.call_tool("get_weather", {"city": "Lisbon"})
        # the same payment again: refused without reaching the server
        seen["replay"] = await client.call_tool_with_payment("get_weather", {"city": "Lisbon"}, payloads[0])
        # the same payment on another priced tool: refused as well
        seen["other_tool"] = await client.call_tool_with_payment("get_forecast", {"city": "Lisbon"}, payloads[0])
        seen["payload"] = attach_payment_to_meta({}, payloads[0])["_meta"]["x402/payment"]
        return seen

    seen = run(in_session(url, story))
    assert set(seen["tools"]) == {"get_weather", "get_forecast", "broken", "echo"}
    accepts = seen["required"].accepts[0]
    assert (accepts.amount, accepts.pay_to, accepts.network) == (str(PRICE), stack["pay_to"], stack["network"])
    assert seen["required"].resource.url == f"{url}#get_weather"  # the gateway URL, the tool as its fragment
    bazaar = seen["required"].extensions["bazaar"]["info"]["input"]
    assert (bazaar["type"], bazaar["toolName"], bazaar["transport"]) == ("mcp", "get_weather", "streamable-http")
    assert bazaar["inputSchema"]["properties"]["city"]["type"] == "string"
    assert seen["free"].payment_made is False and seen["free"].content[0]["text"] == "hello"
    paid = seen["paid"]
    assert paid.is_error is False and paid.content[0]["text"] == "sunny in Lisbon"
    assert paid.payment_response.success is True and paid.payment_response.transaction
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + PRICE
    assert upstream.calls["get_weather"] == 1 and "get_forecast" not in upstream.calls
    for refused in (seen["replay"], seen["other_tool"]):
        assert refused.is_error is True and refused.payment_response is None
        assert "duplicate_settlement" in refused.content[0]["text"]
    if mode == "sse":  # the progress notification around the result passed on, and before it
        assert progress and progress[0][2] == "looking at the sky"
    # the same payment at the HTTP proxy's demo route (same price, same payTo): refused too
    signature = base64.b64encode(json.dumps(seen["payload"]).encode()).decode()
    replay = requests.get(stack["demo_proxy_url"], headers={"PAYMENT-SIGNATURE": signature}, timeout=30)
    assert replay.status_code == 402
    assert json.loads(base64.b64decode(replay.headers["PAYMENT-REQUIRED"]))["error"] == "duplicate_settlement"
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + PRICE
    # the paid tool is in the catalog: type mcp, the gateway URL its resource, found by its name
    listed = listed_tools(stack, "get_weather", url, first_limit=1 if mode == "json" else 31)
    assert listed and listed[0].type == "mcp"
    assert listed[0].accepts[0]["outputSchema"]["input"]["toolName"] == "get_weather"


def test_a_tool_error_is_not_charged(stack, gateway):
    url, upstream, _ = gateway
    rpc = Client(stack["rpc_url"])
    before = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"])

    async def story(session: Any) -> Any:
        return await paying_client(stack, session).call_tool("broken", {})

    failed = run(in_session(url, story))
    assert failed.payment_made is True and failed.is_error is True and failed.payment_response is None
    assert "broken" in failed.content[0]["text"]  # the server's own error result, passed on
    assert upstream.calls["broken"] == 1
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before


def quote_paid(stack: Any, own: OwnPaidServer) -> Any:
    """An agent pays the merchant's own server's `premium_quote` through x402's MCP client: the quote, a successful
    payment response, and the price in the merchant's wallet."""
    rpc = Client(stack["rpc_url"])
    before = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"])

    async def story(session: Any) -> Any:
        return await paying_client(stack, session).call_tool("premium_quote", {"symbol": "ACME"})

    with serving(own.app, own.port):
        paid = run(in_session(own.url, story))
    assert paid.is_error is False and paid.content[0]["text"] == "ACME: 42.00", paid.content
    assert paid.payment_response.success is True
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + PRICE
    return paid


def test_a_merchants_own_paid_mcp_server_settles_with_paywarden_as_its_facilitator(stack):
    """No proxy: the merchant runs x402's MCP payment wrapper itself, with Paywarden's facilitator API; its tool is
    listed in the catalog from the payment."""
    own = OwnPaidServer(stack["base_url"], stack["api_key"], stack["network"], stack["pay_to"], PRICE)
    paid = quote_paid(stack, own)
    assert paid.payment_response.transaction
    # its Bazaar MCP extension is listed as the gateway's tools are
    [listed] = listed_tools(stack, "premium quote", own.url, first_limit=61)
    assert (listed.type, listed.resource) == ("mcp", own.url)
    assert listed.accepts[0]["outputSchema"]["input"]["toolName"] == "premium_quote"


def test_the_merchants_own_paid_mcp_server_settles_with_a_key_scoped_to_its_mcp_service(stack):
    """The same server registered as an mcp service with its tool priced, its facilitator key scoped to that
    service (`key create --service`): the key's /supported lists the tool's kind and the payment settles."""
    port = free_port()
    service = cli(stack, "service", "create", "--merchant", "sandbox", "--name", "Own quotes", "--domain",
                  "localhost", "--port", str(port), "--path-suffix", "/mcp", "--kind", "mcp")
    cli(stack, "tool", "price", "premium_quote", "--merchant", "sandbox", "--service", service["id"], "--price",
        str(PRICE), "--pay-to", stack["pay_to"], "--no-upstream")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    env["PAYWARDEN_DATA_DIR"] = str(stack.data_dir)
    created = subprocess.run([stack.process.args[0], "key", "create", "--merchant", "sandbox", "--env", "test",
                              "--service", service["slug"]], env=env, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    scoped_key = created.stdout.strip().splitlines()[-1]
    own = OwnPaidServer(stack["base_url"], scoped_key, stack["network"], stack["pay_to"], PRICE, port=port)
    quote_paid(stack, own)
