"""`Payments.deliver` against fake ports and a fake upstream: the command a second transport (an MCP gateway)
uses as the proxy does, with its own judge of what answer is chargeable."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from application.deliveries import FailedCharged, FailedUncharged, Served, Verdict
from application.errors import UpstreamFailedError
from application.ports import UpstreamAnswer
from tests.unit.application import test_payments
from tests.unit.application.test_payments import CLIENT, payment

# test_payments' fixtures: the application on fake ports, with the result cache behind and caught up
chain, clock, payments = test_payments.chain, test_payments.clock, test_payments.payments

VIA = "mcp:service:tool"


class Tool:
    """An MCP server's `tools/call` answers, one per call: a JSON-RPC result, or an exception."""

    def __init__(self, *answers: dict | Exception) -> None:
        self.answers, self.keys = list(answers), []

    def __call__(self, payment_key: str) -> UpstreamAnswer:
        self.keys.append(payment_key)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return UpstreamAnswer(200, [("Content-Type", "application/json")], self._chunks(answer))

    @staticmethod
    def _chunks(result: dict) -> Iterator[bytes]:
        data = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
        yield data[:10]
        yield data[10:]


def tool_verdict(answer: UpstreamAnswer) -> Verdict:
    """A tool result with `isError: true` is a failure that must not be charged."""
    body = json.loads(b"".join(answer.body))
    return Verdict.FAILED if body["result"].get("isError") else Verdict.CHARGEABLE


def test_a_tool_error_is_not_charged_and_a_tool_result_is(payments, chain):
    payload, requirements = payment()
    tool = Tool({"isError": True, "content": []}, {"content": [{"type": "text", "text": "42"}]})
    failed = payments.deliver(CLIENT, payload, requirements, via=VIA, upstream=tool, judge=tool_verdict)
    assert isinstance(failed, FailedUncharged) and chain.sent == []
    served = payments.deliver(CLIENT, payload, requirements, via=VIA, upstream=tool, judge=tool_verdict)
    assert isinstance(served, Served) and served.settlement.success and len(chain.sent) == 1
    assert json.loads(b"".join(served.answer.body))["result"]["content"][0]["text"] == "42"  # read whole, once
    assert tool.keys == [served.key, served.key]


def test_a_tool_that_fails_after_the_charge_is_owed_and_served_on_the_retry(payments, chain):
    payload, requirements = payment()
    tool = Tool(UpstreamFailedError("upstream_timeout", "the tool did not answer"), {"content": []})
    owed = payments.deliver(CLIENT, payload, requirements, via=VIA, upstream=tool, settle_first=True,
                            judge=tool_verdict, whole=True)
    assert isinstance(owed, FailedCharged) and owed.settlement.success and owed.attempts_left == 2
    assert "payment was taken" in owed.message
    served = payments.deliver(CLIENT, payload, requirements, via=VIA, upstream=tool, settle_first=True,
                              judge=tool_verdict, whole=True)
    assert isinstance(served, Served) and len(chain.sent) == 1  # no new charge
    assert payments.get_payment(served.key).delivered


@pytest.mark.parametrize("limit_exceeded", [True, False])
def test_a_settle_after_answer_over_the_buffer_is_not_charged(payments, chain, monkeypatch, limit_exceeded):
    from application import deliveries

    payload, requirements = payment()

    def big(payment_key: str) -> UpstreamAnswer:
        return UpstreamAnswer(200, [], iter([b"x" * 600, b"x" * (600 if limit_exceeded else 300)]))

    monkeypatch.setattr(deliveries, "ANSWER_BUFFER_BYTES", 1000)
    result = payments.deliver(CLIENT, payload, requirements, via=VIA, upstream=big)
    if limit_exceeded:
        assert isinstance(result, FailedUncharged) and result.reason == "upstream_answer_too_large"
        assert chain.sent == []
    else:
        assert isinstance(result, Served) and len(chain.sent) == 1


def test_a_transport_fault_after_the_charge_still_says_the_payment_was_taken(payments, chain):
    payload, requirements = payment()
    owed = payments.deliver(CLIENT, payload, requirements, via=VIA, upstream=Tool(RuntimeError("a bug")),
                            settle_first=True)
    assert isinstance(owed, FailedCharged) and owed.reason == "proxy_error" and owed.settlement.success
    assert "payment was taken" in owed.message and len(chain.sent) == 1
