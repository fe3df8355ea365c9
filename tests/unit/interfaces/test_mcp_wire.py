"""The MCP gateway's wire pieces alone: Server-Sent Events split as they arrive, JSON-RPC envelopes, the paid
call's answer judged and re-sent, the payment taken out of a forwarded call."""

from __future__ import annotations

import json

import pytest

from application.deliveries import Verdict
from application.ports import UpstreamAnswer
from interfaces.http.proxy import jsonrpc
from interfaces.http.proxy.jsonrpc import MessageError
from interfaces.http.proxy.mcp_answer import ToolAnswer
from interfaces.http.proxy.mcp_payment import without_payment

SSE = [("Content-Type", "text/event-stream")]
JSON = [("Content-Type", "application/json")]


def sse(*messages: object, event_id: str = "") -> bytes:
    return b"".join((f"id: {event_id}{i}\r\n" if event_id else "").encode() + b"data: " + json.dumps(m).encode()
                    + b"\r\n\r\n" for i, m in enumerate(messages))


def test_events_are_split_as_they_arrive_whatever_the_line_ends_and_a_cut_stream_ends_with_its_rest():
    chunks = [b": a comment\n\nevent: message\nid: 4\nda", b"ta: {\"a\":\n", b"data: 1}\n\n", b"data: x\r\r",
              b"data: 2\r\n\r\ndata: cut"]
    events = list(jsonrpc.events(chunks, 1024))
    assert [e.data for e in events[:4]] == ["", '{"a":\n1}', "x", "2"]
    assert events[1].message() == {"a": 1} and events[2].message() is None
    assert events[1].with_data(b"{}") == b"event: message\nid: 4\ndata: {}\n\n"
    assert events[-1].raw == b"data: cut" and events[-1].fields == ()
    assert b"".join(e.raw for e in events) == b"".join(chunks)  # passed on byte for byte
    with pytest.raises(ValueError):
        list(jsonrpc.events([b"data: " + b"x" * 2000], 1024))


@pytest.mark.parametrize(("message", "rpc_id"), [
    ({"jsonrpc": "1.0", "id": 3, "method": "ping"}, 3), ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None), ({"jsonrpc": "2.0", "id": "q", "method": ""}, "q"),
    ({"jsonrpc": "2.0", "id": 2}, 2), ({"jsonrpc": "2.0", "id": 2, "result": {}, "error": {}}, 2), ([1], None),
])
def test_a_malformed_envelope_is_refused_with_its_own_id_when_usable(message, rpc_id):
    with pytest.raises(MessageError) as refused:
        jsonrpc.checked(message)
    assert refused.value.rpc_id == rpc_id and refused.value.code == jsonrpc.INVALID_REQUEST


def test_requests_notifications_and_responses_pass_the_envelope_check():
    for message in ({"jsonrpc": "2.0", "id": 0, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"},
                    {"jsonrpc": "2.0", "id": "a", "result": {}}, {"jsonrpc": "2.0", "id": None, "error": {}}):
        assert jsonrpc.checked(message) is message
    assert jsonrpc.answers({"jsonrpc": "2.0", "id": 1, "result": {}}, 1)
    assert not jsonrpc.answers({"jsonrpc": "2.0", "id": "1", "result": {}}, 1)  # "1" is not 1
    assert not jsonrpc.answers({"jsonrpc": "2.0", "id": 1, "method": "x"}, 1)


def judged(body: bytes, headers=SSE, status: int = 200) -> tuple[ToolAnswer, Verdict]:
    judge = ToolAnswer(7)
    return judge, judge(UpstreamAnswer(status, headers, (body,)))


def test_only_a_tool_result_that_is_not_an_error_is_chargeable():
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    ok = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "sunny"}]}}
    assert judged(sse(progress, ok))[1] is Verdict.CHARGEABLE
    assert judged(json.dumps(ok).encode(), JSON)[1] is Verdict.CHARGEABLE
    assert judged(json.dumps([ok]).encode(), JSON)[1] is Verdict.CHARGEABLE
    for declined in ({**ok, "result": {"content": [], "isError": True}}, {"jsonrpc": "2.0", "id": 7, "error": {}},
                     {**ok, "id": 8}, {**ok, "id": "7"}):
        assert judged(sse(progress, declined))[1] is Verdict.DECLINED, declined
    assert judged(b"not json", JSON)[1] is Verdict.DECLINED
    assert judged(json.dumps(ok).encode(), [("Content-Type", "text/plain")])[1] is Verdict.DECLINED
    assert judged(json.dumps(ok).encode(), JSON, 404)[1] is Verdict.DECLINED
    assert judged(json.dumps(ok).encode(), JSON, 502)[1] is Verdict.FAILED


def test_the_answer_is_re_sent_with_only_the_calls_response_changed():
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    ok = {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}
    judge, _ = judged(sse(progress, ok, event_id="e"))
    sent = judge.rendered(lambda r: {**r, "result": {"paid": True}})
    assert sent.startswith(b'id: e0\r\ndata: {"jsonrpc": "2.0", "method": "notifications/progress"')  # as it came
    assert sent.endswith(b'id: e1\ndata: {"jsonrpc":"2.0","id":7,"result":{"paid":true}}\n\n')
    judge, _ = judged(json.dumps([progress, ok]).encode(), JSON)
    assert json.loads(judge.rendered(lambda r: {**r, "result": 1})) == [progress, {**ok, "result": 1}]


def test_a_forwarded_call_loses_its_payment_and_keeps_the_rest_of_its_meta():
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "_meta": {"x402/payment": {"x": 1}, "progressToken": "p"}}}
    assert without_payment(call)["params"] == {"name": "t", "_meta": {"progressToken": "p"}}
    only = {**call, "params": {"name": "t", "_meta": {"x402/payment": {}}}}
    assert without_payment(only)["params"] == {"name": "t"}
    assert call["params"]["_meta"]["x402/payment"] == {"x": 1}  # the client's message is not changed
