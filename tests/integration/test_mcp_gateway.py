"""The MCP gateway on the wire: Streamable HTTP passed through (session, GET, DELETE), malformed messages and
batches answered as JSON-RPC errors with the right ids, a priced call without and with a payment when the MCP
server fails, a tool error, and the paid call's answer with its settle answer; the proxy app in process over the
sandbox chain, an `mcp` SDK server behind it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from domain.networks import DEVNET
from interfaces.http.proxy.factory import create_app as create_proxy_app
from interfaces.runtime.workers import catch_up_all
from interfaces.wiring import proxy_collaborators
from tests.conftest import USDC, Gateway, make_gateway
from tests.faults import free_port
from tests.mcp_servers import Upstream, serving
from tests.wsgi_thread import WsgiThread

PRICE = USDC // 100
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Stack:
    gateway: Gateway
    upstream: Upstream
    url: str
    rpc_url: str

    def post(self, body: Any, session: str | None = None, raw: bytes | None = None) -> requests.Response:
        headers = {**HEADERS, **({"Mcp-Session-Id": session} if session else {})}
        if raw is not None:
            return requests.post(self.url, data=raw, headers=headers, timeout=30)
        return requests.post(self.url, json=body, headers=headers, timeout=30)

    def balance(self) -> int:
        return self.gateway.sandbox.token_balance(str(self.gateway.pay_to.pubkey()), DEVNET.usdc_mint)

    def payment(self, required: dict[str, Any]) -> dict[str, Any]:
        """The official SDK client's payload for a payment-required tool result."""
        from x402 import x402ClientSync
        from x402.mechanisms.svm.exact import ExactSvmScheme
        from x402.mechanisms.svm.signers import KeypairSigner
        from x402.schemas import parse_payment_required

        client = x402ClientSync()
        client.register("solana:*", ExactSvmScheme(KeypairSigner(self.gateway.payer), rpc_url=self.rpc_url))
        payload = client.create_payment_payload(parse_payment_required(required))
        return payload.model_dump(by_alias=True, exclude_none=True)


def call(rpc_id: Any, name: str, arguments: dict[str, Any] | None = None, payment: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if payment is not None:
        params["_meta"] = {"x402/payment": payment, "progressToken": "p1"}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


def session_of(stack: Stack) -> str:
    started = stack.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
    assert started.status_code == 200, started.text
    session = started.headers["Mcp-Session-Id"]
    assert stack.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session).status_code == 202
    return session


@pytest.fixture
def stack(request: pytest.FixtureRequest, tmp_path: Any, sandbox: Any) -> Iterator[Stack]:
    """JSON answers from the MCP server, or `text/event-stream` ones with `parametrize("stack", ["sse"],
    indirect=True)`."""
    from interfaces.sandbox.localnet import LocalnetThread

    with LocalnetThread(sandbox, slot_ms=None) as localnet:
        gateway = make_gateway(tmp_path, sandbox, devnet_rpc_url=localnet.url, confirmation_budget_seconds=0.5)
        try:
            yield from _stack(gateway, localnet.url, json_response=getattr(request, "param", "json") == "json")
        finally:
            gateway.container.close()


def _stack(gateway: Gateway, rpc_url: str, *, json_response: bool) -> Iterator[Stack]:
    container = gateway.container
    container.merchants.preverify_sandbox_domain("acme")
    upstream = Upstream(json_response=json_response)
    with serving(upstream.app, upstream.port), WsgiThread(create_proxy_app(proxy_collaborators(container))) as proxy:
        service = container.proxies.create_service("acme", "Tools", "localhost", path_suffix="/mcp",
                                                   port=upstream.port, kind="mcp")
        for name in ("get_weather", "get_forecast", "broken"):
            container.proxies.price_tool("acme", str(service.id), name=name, price=PRICE,
                                         pay_to=str(gateway.pay_to.pubkey()))
        yield Stack(gateway, upstream, f"{proxy.url}/{service.slug}", rpc_url)


def test_malformed_messages_are_json_rpc_errors_with_their_own_ids(stack):
    not_json = stack.post(None, raw=b"{nope")
    assert not_json.status_code == 400 and not_json.json() == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "the body is not JSON"}}
    for body, rpc_id in (({"id": 7, "method": "ping"}, 7), ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
                         ({"jsonrpc": "2.0", "id": "a", "method": "ping", "params": [1]}, "a"), ([], None),
                         ("text", None), ({"jsonrpc": "2.0", "method": "tools/call",
                                           "params": {"name": "get_weather"}}, None)):
        refused = stack.post(body)
        assert refused.status_code == 400 and refused.json()["id"] == rpc_id, (body, refused.text)
        assert refused.json()["error"]["code"] == -32600
    assert stack.upstream.calls == {}


def test_a_session_passes_through_and_a_priced_call_is_refused_in_a_batch(stack):
    session = session_of(stack)
    listed = stack.post({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}, session)
    assert {t["name"] for t in listed.json()["result"]["tools"]} == {"get_weather", "get_forecast", "broken", "echo"}
    free = stack.post(call(2, "echo", {"text": "hi"}), session)
    assert free.json()["result"]["content"][0]["text"] == "hi"
    batch = stack.post([call(3, "echo", {"text": "a"}), call("w", "get_weather", {"city": "Oslo"}),
                        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}], session)
    assert batch.status_code == 200 and [e["id"] for e in batch.json()] == [3, "w"]
    assert {e["error"]["code"] for e in batch.json()} == {-32600}
    assert stack.upstream.calls == {"echo": 1}  # nothing of the batch was forwarded
    # the server's own stream (GET) passes through, open as long as the server keeps it; its headers come at once,
    # before the server's first event (this one sends nothing for 15 s): a 5 s read timeout would fail otherwise
    with requests.get(stack.url, headers={"Accept": "text/event-stream", "Mcp-Session-Id": session,
                                          "MCP-Protocol-Version": "2025-11-25"}, stream=True, timeout=5) as stream:
        assert (stream.status_code, stream.headers["Content-Type"].split(";")[0]) == (200, "text/event-stream")
    ended = requests.delete(stack.url, headers={"Mcp-Session-Id": session}, timeout=30)
    assert ended.status_code == 200
    gone = stack.post({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, session)
    assert gone.status_code == 404  # the server's own answer to an ended session, passed on


def test_a_priced_call_pays_once_and_a_tool_error_or_a_failed_server_is_not_charged(stack):
    session = session_of(stack)
    unpaid = stack.post(call(5, "get_weather", {"city": "Oslo"}), session).json()
    assert unpaid["id"] == 5 and unpaid["result"]["isError"] is True
    required = unpaid["result"]["structuredContent"]
    assert required["accepts"][0]["amount"] == str(PRICE) and required["resource"]["url"] == f"{stack.url}#get_weather"
    assert stack.upstream.calls == {}
    before = stack.balance()
    paid_with = stack.payment(required)
    paid = stack.post(call(6, "get_weather", {"city": "Oslo"}, paid_with), session).json()
    assert paid["id"] == 6 and paid["result"]["content"][0]["text"] == "sunny in Oslo"
    assert paid["result"]["_meta"]["x402/payment-response"]["success"] is True
    assert stack.balance() == before + PRICE
    container = stack.gateway.container
    # the payments list, CSV and charts name the service and the tool (the resource URL's fragment)
    catch_up_all(container, ["payment_list", "payment_volume"])  # what the projection worker does
    page = container.payment_list.get_page(state="CONFIRMED")
    (service, resource), = container.payment_volume.get_services([r.payment_id for r in page.items]).values()
    slug = stack.url.rsplit("/", 1)[1]
    assert service.endswith(f"/{slug}") and resource == f"{stack.url}#get_weather"
    # and the catalog lists the tool: type mcp, the gateway URL (no fragment) its resource, found by its name
    catch_up_all(container)
    listed = stack.gateway.client.simulate_get("/discovery/search", params={"query": "get_weather", "type": "mcp"})
    [item] = listed.json["resources"]
    assert (item["type"], item["resource"]) == ("mcp", stack.url)
    assert item["accepts"][0]["outputSchema"]["input"]["toolName"] == "get_weather"
    # the same payment at another MCP service of the merchant (same price, same payTo): refused, never forwarded
    container = stack.gateway.container
    other = container.proxies.create_service("acme", "Tools 2", "localhost", path_suffix="/mcp",
                                             port=stack.upstream.port, kind="mcp")
    container.proxies.price_tool("acme", str(other.id), name="get_weather", price=PRICE,
                                 pay_to=str(stack.gateway.pay_to.pubkey()))
    elsewhere = requests.post(stack.url.rsplit("/", 1)[0] + "/" + other.slug, headers=HEADERS, timeout=30,
                              json=call(9, "get_weather", {"city": "Oslo"}, paid_with)).json()
    assert elsewhere["result"]["structuredContent"]["error"] == "duplicate_settlement"
    assert stack.upstream.calls["get_weather"] == 1
    container.proxies.unprice_tool("acme", str(other.id), "get_weather")
    container.proxies.delete_service("acme", str(other.id))
    # a tool error: passed on, not charged
    broken_required = stack.post(call(7, "broken"), session).json()["result"]["structuredContent"]
    failed = stack.post(call(8, "broken", payment=stack.payment(broken_required)), session).json()
    assert failed["result"]["isError"] is True and "x402/payment-response" not in (failed["result"].get("_meta") or {})
    assert stack.balance() == before + PRICE and stack.upstream.calls["broken"] == 1
    # the server gone: a JSON-RPC error with the call's id, nothing charged
    stack.gateway.container.proxies.change_base_url("acme", _service_id(stack), "localhost", "", "/mcp",
                                                    free_port())
    moved = _service_url(stack)
    down = requests.post(moved, json=call("x", "get_weather", {"city": "Oslo"}, stack.payment(required)),
                         headers=HEADERS, timeout=30)
    assert down.status_code == 502 and down.json()["id"] == "x" and down.json()["error"]["code"] == -32001
    assert "no payment was taken" in down.json()["error"]["message"]
    assert stack.balance() == before + PRICE


def _service_id(stack: Stack) -> str:
    return str(stack.gateway.container.proxies.list_services("acme")[0].id)


def _service_url(stack: Stack) -> str:
    service = stack.gateway.container.proxies.list_services("acme")[0]
    return stack.url.rsplit("/", 1)[0] + "/" + service.slug


def test_a_pending_call_is_not_asked_to_pay_again_and_a_failure_after_the_charge_is_owed(stack):
    from tests.integration.test_proxy import HeldConfirmations

    session = session_of(stack)
    proxies, sid = stack.gateway.container.proxies, _service_id(stack)
    live_port = proxies.get_service("acme", sid).base.port
    chains = stack.gateway.container.chains.by_network
    chain = chains[DEVNET.caip2] = HeldConfirmations(chains[DEVNET.caip2])
    before = stack.balance()
    payment = stack.payment(stack.post(call(1, "get_weather", {"city": "Rome"}), session)
                            .json()["result"]["structuredContent"])
    pending = stack.post(call("p", "get_weather", {"city": "Rome"}, payment), session).json()
    assert pending["id"] == "p" and pending["error"]["code"] == -32003  # never a fresh payment request
    assert pending["error"]["data"]["error"] == "settlement_pending"
    chain.held = False
    proxies.change_base_url("acme", sid, "localhost", "", "/mcp", free_port())  # the server is gone
    owed = requests.post(_service_url(stack), json=call("o", "get_weather", {"city": "Rome"}, payment),
                         headers={**HEADERS, "Mcp-Session-Id": session}, timeout=30)
    assert owed.status_code == 502 and owed.json()["id"] == "o" and owed.json()["error"]["code"] == -32001
    data = owed.json()["error"]["data"]
    assert data["x402/payment-response"]["success"] is True and data["attemptsLeft"] == 2
    assert "call the tool again with the same payment" in owed.json()["error"]["message"]
    proxies.change_base_url("acme", sid, "localhost", "", "/mcp", live_port)  # the server is back
    served = stack.post(call("s", "get_weather", {"city": "Rome"}, payment), session).json()
    assert served["result"]["content"][0]["text"] == "sunny in Rome"
    assert served["result"]["_meta"]["x402/payment-response"]["transaction"] == data["transaction"]
    again = stack.post(call("a", "get_weather", {"city": "Rome"}, payment), session).json()
    assert again["result"]["isError"] is True and again["result"]["structuredContent"]["error"] == \
        "duplicate_settlement"
    assert stack.balance() == before + PRICE  # one transfer
    assert stack.upstream.calls["get_weather"] == 2  # the answer held back by the pending settle, the delivery


@pytest.mark.parametrize("stack", ["sse"], indirect=True)
def test_a_paid_calls_progress_passes_on_as_it_happens_and_its_result_follows_with_the_settle_answer(stack):
    session = session_of(stack)
    required = stack.post(call(1, "get_forecast", {"city": "Bern"}), session)
    assert required.headers["Content-Type"] == "application/json"  # answered by the gateway itself
    payment = stack.payment(required.json()["result"]["structuredContent"])
    before, seen = stack.balance(), []
    with requests.post(stack.url, json=call("f", "get_forecast", {"city": "Bern"}, payment), stream=True, timeout=30,
                       headers={**HEADERS, "Mcp-Session-Id": session}) as answer:
        assert answer.headers["Content-Type"].startswith("text/event-stream")
        for line in answer.iter_lines(chunk_size=1):  # the test server sends no chunked framing: read as it comes
            if line.startswith(b"data: "):
                seen.append((time.monotonic(), json.loads(line[6:])))
    (progressed, progress), (answered, response) = seen
    assert progress["method"] == "notifications/progress" and progress["params"]["message"] == "asking tomorrow"
    assert answered - progressed > 1.0  # passed on while the tool still ran, not with its result
    assert response["id"] == "f" and response["result"]["content"][0]["text"] == "rain in Bern tomorrow"
    assert response["result"]["_meta"]["x402/payment-response"]["success"] is True
    assert stack.balance() == before + PRICE
