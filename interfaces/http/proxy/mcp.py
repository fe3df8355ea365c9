"""The MCP gateway: an `mcp` service's gateway URL `{proxy_url}/{slug}` is the MCP server an agent configures.

The merchant's MCP server speaks the Streamable HTTP transport (https://modelcontextprotocol.io/specification/
2025-11-25/basic/transports) and knows nothing of payments. Every request passes through as the HTTP proxy passes
one (headers, `Mcp-Session-Id`, `MCP-Protocol-Version`, GET streams and DELETE of a session included), except a
`tools/call` of a priced tool, which speaks x402's MCP transport (mcp_payment.py): without a payment it is
answered with the payment-required tool result; with one, the payment is taken through the delivery command the
HTTP proxy uses (`Payments.deliver`): the call forwarded without the payment, its answer read whole and settled
only when the tool's result is not an error (mcp_answer.py), the settle answer attached to that result. The result
is found by its JSON-RPC id in a JSON answer or among the events of a `text/event-stream` answer, whose other events
(progress notifications) pass on with it. docs/mcp.md has the whole flow and its decisions (batches, errors,
codes).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from application.deliveries import (
    Declined,
    DeliveryResult,
    Duplicate,
    FailedCharged,
    FailedUncharged,
    Pending,
    Refused,
    Served,
)
from application.errors import UpstreamFailedError
from application.outcomes import SettleOutcome
from application.payments import Payments
from application.ports import FeePayers, Upstream, UpstreamAnswer
from application.proxy_services import ProxyServices
from domain.clients import Client
from domain.mcp_tools import ToolPrice, tool_via
from domain.proxy_service import ProxyService
from domain.x402 import Requirements
from interfaces.adapters.outbound import OutboundClient, OutboundError, OutboundResponse
from interfaces.http.proxy import jsonrpc, metrics
from interfaces.http.proxy.forwarding import (
    PAYMENT_HASH_HEADER,
    Origin,
    answer_body,
    request_headers,
    response_headers,
    upstream_headers,
)
from interfaces.http.proxy.jsonrpc import MessageError, checked, dumps, error, is_id, result
from interfaces.http.proxy.mcp_answer import ToolAnswer
from interfaces.http.proxy.mcp_live import LiveCall
from interfaces.http.proxy.mcp_payment import (
    RESPONSE_META,
    payment_of,
    payment_required_result,
    tool_payload,
    tool_requirements,
    without_payment,
)
from interfaces.http.proxy.payment import BadPaymentHeaderError, settle_response

log = logging.getLogger("paywarden.proxy")
StartResponse = Callable[..., Any]


@dataclass(frozen=True)
class PaidCall:
    """A priced `tools/call` as it goes through the gateway: its id, the tool, the tool's terms, the gateway URL."""

    rpc_id: str | int
    tool: ToolPrice
    terms: Requirements
    url: str


class McpGateway:
    def __init__(self, proxies: ProxyServices, payments: Payments, fee_payers: FeePayers, outbound: OutboundClient,
                 *, client_of: Callable[[ProxyService], Client], base_url_of: Callable[[Any], str],
                 body_of: Callable[[Any, ProxyService], bytes], refuse: Callable[..., Exception],
                 log_answer: Callable[..., None], trusted_proxies: tuple[str, ...] = ()) -> None:
        """The proxy's own pieces are passed in (ProxyApp): the payment's client, the public address, the bounded
        body reader, its refusal (`Reply`) and its request log."""
        self._proxies, self._payments, self._fee_payers, self._outbound = proxies, payments, fee_payers, outbound
        self._client_of, self._base_url_of, self._body_of = client_of, base_url_of, body_of
        self._refuse, self._log, self._trusted = refuse, log_answer, trusted_proxies

    def handle(self, x: Any, rest: str, start_response: StartResponse) -> Iterable[bytes]:
        if rest.strip("/"):
            raise self._refuse(404, {"error": "no_route", "message": "an MCP service answers at its gateway URL"})
        x.path = ""
        if x.method in ("GET", "DELETE"):  # the server's stream of its own messages, the end of a session
            return self._pass(x, self._forward(x, None), start_response)
        if x.method != "POST":
            raise self._refuse(405, {"error": "method_not_allowed", "message": "an MCP endpoint takes POST, GET "
                                     "and DELETE"}, [("Allow", "POST, GET, DELETE")])
        body = self._body_of(x, x.service)
        try:
            message = json.loads(body)
        except ValueError:
            return self._answer(x, start_response, error(None, jsonrpc.PARSE_ERROR, "the body is not JSON"), 400)
        try:
            if isinstance(message, list):
                return self._batch(x, message, start_response)
            tool = self._priced(x.service, checked(message))
        except MessageError as bad:
            return self._answer(x, start_response, error(bad.rpc_id, bad.code, str(bad)), 400)
        if tool is None:
            return self._pass(x, self._forward(x, _free(message, body)), start_response)
        return self._paid(x, message, tool, start_response)

    # -- what passes free ---------------------------------------------------------------------------------

    def _priced(self, service: ProxyService, message: dict[str, Any]) -> ToolPrice | None:
        if message.get("method") != "tools/call":
            return None
        tool = self._proxies.tool_price(service, (message.get("params") or {}).get("name"))
        if tool is not None and not is_id(message.get("id")):
            raise MessageError(None, jsonrpc.INVALID_REQUEST, "a tools/call is a request: it has an id")
        return tool

    def _batch(self, x: Any, messages: list[Any], start_response: StartResponse) -> Iterable[bytes]:
        """A batch (MCP revisions before 2025-06-18 allow them) passes whole, unless it holds a priced call: then
        nothing of it is forwarded, and each of its requests gets an error saying to send the call alone."""
        if not messages:
            raise MessageError(None, jsonrpc.INVALID_REQUEST, "an empty batch")
        checked_messages = [checked(m) for m in messages]
        if not any(self._priced(x.service, m) for m in checked_messages):
            return self._pass(x, self._forward(x, dumps([_stripped(m) for m in checked_messages])), start_response)
        refused = [error(m["id"], jsonrpc.INVALID_REQUEST, "a call of a priced tool is sent alone, not in a batch; "
                         "nothing of this batch was forwarded") for m in checked_messages
                   if "method" in m and is_id(m.get("id"))]
        return self._answer(x, start_response, refused, 200, outcome="batch_refused")

    # -- a priced call ------------------------------------------------------------------------------------

    def _paid(self, x: Any, message: dict[str, Any], tool: ToolPrice, start_response: StartResponse
              ) -> Iterable[bytes]:
        """Taken through the delivery command the HTTP proxy uses: admitted, forwarded without the payment, its
        answer read whole and judged (mcp_answer.py), settled only for a tool result that is not an error."""
        rpc_id, service = message["id"], x.service
        terms = tool_requirements(tool, self._fee_payers.addresses(tool.network)[0])
        call = PaidCall(rpc_id, tool, terms, f"{self._base_url_of(x)}/{x.slug}")
        payment = payment_of(message.get("params") or {})
        if payment is None:
            return self._required(x, start_response, call, "Payment required")
        try:
            payload = tool_payload(payment, tool, call.url)
        except BadPaymentHeaderError as bad:
            return self._required(x, start_response, call, str(bad))
        judge, live = ToolAnswer(rpc_id), LiveCall(rpc_id)
        upstream = live.tapped(self._upstream(x, dumps(without_payment(message))))
        kind, first = live.start(lambda: self._payments.deliver(
            self._client_of(service), payload, terms, via=tool_via(str(service.id), tool.name), upstream=upstream,
            judge=judge))
        if kind == "result":
            x.payment_hash = first.key
            return self._result(x, call, judge, first, start_response)
        headers = [(k, v) for k, v in response_headers(first.headers, cookies=service.pass_cookies)
                   if k.lower() != "content-length"]
        start_response(_status(first.status), headers)
        return self._live(x, call, judge, live, first.status)

    def _live(self, x: Any, call: PaidCall, judge: ToolAnswer, live: LiveCall, status: int) -> Iterator[bytes]:
        """An event stream's events as they come, then the call's response once the delivery is decided."""
        outcome = "error"
        try:
            for kind, value in live.rest():
                if kind == "event":
                    yield value
                elif kind == "raised":
                    log.error("a paid call's delivery failed", exc_info=value)
                    yield _event(error(call.rpc_id, jsonrpc.INTERNAL_ERROR, "unexpected error; call again with the "
                                       "same payment"))
                else:
                    x.payment_hash = value.key
                    match value:
                        case Served(settlement=paid):
                            outcome = "served"
                            yield judge.response_event(lambda r: _with_response(r, paid))
                        case Declined():
                            outcome = "declined"
                            yield judge.response_event(None)
                        case _:
                            answer, _, outcome = self._refusal(x, call, value)
                            yield _event(answer)
        finally:
            self._log(x, status, outcome)

    def _result(self, x: Any, call: PaidCall, judge: ToolAnswer, result: DeliveryResult,
                start_response: StartResponse) -> Iterable[bytes]:
        """The delivery's result in MCP's words (docs/mcp.md, "The x402 MCP transport"): nothing is decided here."""
        match result:
            case Served(answer=answer, settlement=paid):
                return self._send_answer(x, answer, judge.rendered(lambda r: _with_response(r, paid)),
                                         start_response, "served")
            case Declined(answer=answer):
                return self._send_answer(x, answer, judge.raw, start_response, "declined")
        message, status, outcome = self._refusal(x, call, result)
        return self._answer(x, start_response, message, status, outcome)

    def _refusal(self, x: Any, call: PaidCall, result: DeliveryResult) -> tuple[dict[str, Any], int, str]:
        """A result that is not the server's answer, as the JSON-RPC message answering the call, its HTTP status
        when it is the whole answer, and the log's outcome."""
        match result:
            case Pending(settlement=settlement):
                return error(call.rpc_id, jsonrpc.SETTLEMENT_PENDING, "the payment is on its way; call again with "
                             "the same payment", {"error": "settlement_pending", "transaction": settlement.transaction,
                                                  "retryAfterSeconds": 2, RESPONSE_META: _receipt(settlement)}), \
                    200, "pending"
            case Duplicate(message=message):
                return error(call.rpc_id, jsonrpc.DUPLICATE_REQUEST, message, {
                    "error": "duplicate_request", "retryAfterSeconds": 1}), 200, "duplicate"
            case Refused(reason=reason, settlement=settlement):
                return jsonrpc.result(call.rpc_id, payment_required_result(
                    call.tool, call.terms, call.url, reason or "invalid_payment",
                    None if settlement is None else _receipt(settlement))), 200, "payment_required"
            case FailedUncharged(reason=reason, message=message, status=status):
                metrics.upstream_error(x, reason if status is None else f"status_{status}")
                return error(call.rpc_id, jsonrpc.UPSTREAM_FAILED, message, {
                    "error": reason, **({"status": status} if status else {})}), 502, "upstream_failed"
            case FailedCharged(reason=reason, status=status, settlement=settlement, attempts_left=left):
                metrics.upstream_error(x, reason if status is None else f"status_{status}")
                told = (f"the MCP server failed after the payment was taken (transaction {settlement.transaction}): "
                        + (f"call the tool again with the same payment to get its result, without a new charge "
                           f"({left} attempt{'s' if left != 1 else ''} left)" if left else
                           "its delivery was attempted as often as it may be; ask the merchant"))
                return error(call.rpc_id, jsonrpc.UPSTREAM_FAILED, told, {
                    "error": reason, **({"status": status} if status else {}), "transaction": settlement.transaction,
                    "attemptsLeft": left, RESPONSE_META: _receipt(settlement)}), 502, "upstream_failed_charged"
        raise AssertionError(f"unknown delivery result {result!r}")

    def _required(self, x: Any, start_response: StartResponse, call: PaidCall, reason: str,
                  response: dict[str, Any] | None = None) -> list[bytes]:
        return self._answer(x, start_response, result(call.rpc_id, payment_required_result(
            call.tool, call.terms, call.url, reason, response)), 200, outcome="payment_required")

    def _send_answer(self, x: Any, answer: UpstreamAnswer, data: bytes, start_response: StartResponse,
                     outcome: str) -> list[bytes]:
        headers = [(k, v) for k, v in response_headers(answer.headers, cookies=x.service.pass_cookies)
                   if k.lower() != "content-length"]
        start_response(_status(answer.status), [*headers, ("Content-Length", str(len(data)))])
        self._log(x, answer.status, outcome)
        return [data]

    def _upstream(self, x: Any, body: bytes) -> Upstream:
        """The `Upstream` the delivery forwards a paid call through."""

        def forward(payment_key: str) -> UpstreamAnswer:
            try:
                response = self._send(x, "POST", body, payment_key)
            except OutboundError as failed:
                raise UpstreamFailedError(failed.reason, "the MCP server did not answer") from None
            return UpstreamAnswer(response.status, response.headers, answer_body(x, response, "the MCP server's"),
                                  response.close)

        return forward

    # -- the wire -----------------------------------------------------------------------------------------

    def _forward(self, x: Any, body: bytes | None) -> OutboundResponse:
        try:
            return self._send(x, x.method, body, "")
        except OutboundError as failed:
            raise self._refuse(502, {"error": failed.reason, "message": "the MCP server did not answer"},
                               outcome="upstream_failed") from None

    def _send(self, x: Any, method: str, body: bytes | None, payment_hash: str) -> OutboundResponse:
        service = x.service
        query = str(x.environ.get("QUERY_STRING") or "")
        origin = Origin.of(x.environ, self._base_url_of(x), self._trusted)
        headers = [(k, v) for k, v in upstream_headers(request_headers(x.environ), payment_hash,
                                                       self._proxies.upstream_auth(service), origin,
                                                       cookies=service.pass_cookies)
                   if not (k == PAYMENT_HASH_HEADER and not v)
                   and not (payment_hash and k.lower() == "accept-encoding")]
        if payment_hash:  # the paid call's answer is read here: it comes uncompressed
            headers.append(("Accept-Encoding", "identity"))
        started = time.perf_counter()
        try:
            return self._outbound.request(method, service.base_url + (f"?{query}" if query else ""), headers, body)
        except OutboundError as failed:
            metrics.upstream_error(x, failed.reason)
            raise
        finally:
            metrics.upstream_latency(x, time.perf_counter() - started)

    def _pass(self, x: Any, upstream: OutboundResponse, start_response: StartResponse) -> Iterator[bytes]:
        start_response(_status(upstream.status), response_headers(upstream.headers, cookies=x.service.pass_cookies))
        self._log(x, upstream.status, "passed")
        return _stream(x, upstream)

    def _answer(self, x: Any, start_response: StartResponse, body: Any, status: int,
                outcome: str = "invalid_message") -> list[bytes]:
        data = dumps(body)
        start_response(_status(status), [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                                         ("Cache-Control", "no-store")])
        self._log(x, status, outcome)
        return [data]


def _receipt(settlement: SettleOutcome) -> dict[str, Any]:
    return settle_response(settlement.success, settlement.transaction, settlement.network, settlement.payer,
                           None if settlement.success else settlement.error_reason)


def _stream(x: Any, upstream: OutboundResponse) -> Iterator[bytes]:
    sent = 0
    try:
        yield b""  # the headers go out now, not with the first event (a GET stream may send none for a while)
        for chunk in upstream.stream():
            sent += len(chunk)
            yield chunk
    except OutboundError as broken:
        metrics.upstream_error(x, broken.reason)
    finally:
        upstream.close()
        metrics.bytes_streamed(x, "response", sent)


def _stripped(message: dict[str, Any]) -> dict[str, Any]:
    """A free call forwarded without any x402 payment it carries (a signed transaction is the client's, not the
    MCP server's to see)."""
    return without_payment(message) if message.get("method") == "tools/call" else message


def _free(message: dict[str, Any], body: bytes) -> bytes:
    stripped = _stripped(message)
    return body if stripped == message else dumps(stripped)


def _with_response(answer: dict[str, Any], outcome: SettleOutcome) -> dict[str, Any]:
    """The tool's result with the settle answer in its `_meta["x402/payment-response"]` (an error's `data`, for a
    call whose payment was settled before it was forwarded)."""
    response = _receipt(outcome)
    if isinstance(answer.get("error"), dict):
        failed = answer["error"]
        return {**answer, "error": {**failed, "data": {**(failed.get("data") if isinstance(
            failed.get("data"), dict) else {}), RESPONSE_META: response}}}
    value = dict(answer.get("result") or {})
    value["_meta"] = {**(value.get("_meta") or {}), RESPONSE_META: response}
    return {**answer, "result": value}


def _event(message: dict[str, Any]) -> bytes:
    return b"data: " + dumps(message) + b"\n\n"


def _status(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"
