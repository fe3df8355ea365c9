"""`JsonRpc.transactions` (interfaces/audit/chain.py): getTransaction of many signatures in JSON-RPC batches of
`BATCH_CALLS`, answers in the signatures' order, one call at a time from an endpoint that does not answer batches."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

import interfaces.audit.chain as chain
from interfaces.audit.chain import JsonRpc, RpcUnavailable


def endpoint(answer: Any) -> tuple[JsonRpc, list[Any]]:
    """A JsonRpc over a fake endpoint; `answer(body)` is what it sends back; the bodies it got are listed."""
    seen: list[Any] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        return httpx.Response(200, json=answer(body))

    rpc = JsonRpc("http://rpc.test")
    rpc._client = httpx.Client(transport=httpx.MockTransport(handle))
    return rpc, seen


def landed(call: dict[str, Any]) -> dict[str, Any]:
    signature = call["params"][0]
    return {"jsonrpc": "2.0", "id": call["id"], "result": None if signature == "gone" else {"sig": signature}}


def test_signatures_are_looked_up_in_batches_and_answered_in_their_order(monkeypatch):
    monkeypatch.setattr(chain, "BATCH_CALLS", 2)
    rpc, seen = endpoint(lambda body: list(reversed([landed(call) for call in body])))  # any order, by id
    assert rpc.transactions(["a", "gone", "c"]) == [{"sig": "a"}, None, {"sig": "c"}]
    assert [[call["params"][0] for call in body] for body in seen] == [["a", "gone"], ["c"]]
    assert all(call["method"] == "getTransaction" for body in seen for call in body)


def test_an_endpoint_without_batches_is_asked_one_call_at_a_time():
    def answer(body: Any) -> Any:
        if isinstance(body, list):
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "batch requests disabled"}}
        return landed(body)

    rpc, seen = endpoint(answer)
    assert rpc.transactions(["a", "b"]) == [{"sig": "a"}, {"sig": "b"}]
    assert [isinstance(body, list) for body in seen] == [True, False, False]


def test_an_error_in_a_batch_is_the_endpoint_unavailable():
    rpc, _ = endpoint(lambda body: [{"jsonrpc": "2.0", "id": call["id"], "error": {"code": -32005, "message": "busy"}}
                                    for call in body])
    with pytest.raises(RpcUnavailable, match="busy"):
        rpc.transactions(["a"])
