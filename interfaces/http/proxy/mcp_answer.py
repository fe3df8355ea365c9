"""A paid `tools/call`'s answer as the MCP server gave it, read whole, and what it is worth: the judge the MCP
gateway passes to `Payments.deliver` (application/deliveries.py), and the answer re-sent with the settle answer.

The call's response is found by its JSON-RPC id: the answer is JSON (the response alone, or in an array) or a
`text/event-stream` whose other events (progress and log notifications, the server's own requests) are kept in
their order. Only a tool result that is not an error is chargeable: a JSON-RPC error or a result with
`isError: true` is the server's own refusal (declined: passed on, never charged), as is an answer holding no
response to the call; an HTTP 5xx is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from application.deliveries import Verdict
from application.ports import UpstreamAnswer
from interfaces.http.proxy import jsonrpc
from interfaces.http.proxy.jsonrpc import Event

Shape = Callable[[dict[str, Any]], dict[str, Any]]


class ToolAnswer:
    """The judge of one call's answer (`Delivery.judge`), which keeps what it read for the answer re-sent."""

    def __init__(self, rpc_id: str | int) -> None:
        self.rpc_id = rpc_id
        self.kind, self.raw = "", b""
        self.events: list[Event] = []
        self.message: Any = None
        self.response: dict[str, Any] | None = None

    def __call__(self, answer: UpstreamAnswer) -> Verdict:
        if answer.status >= 500:
            return Verdict.FAILED
        self._read(answer)
        if answer.status >= 400 or self.response is None:
            return Verdict.DECLINED
        value = self.response.get("result")
        if "error" in self.response or not isinstance(value, dict) or value.get("isError") is True:
            return Verdict.DECLINED
        return Verdict.CHARGEABLE

    def rendered(self, shape: Shape) -> bytes:
        """The answer with the call's response replaced by `shape(response)`, every other byte as it came."""
        if self.kind == "text/event-stream":
            return b"".join(event.with_data(jsonrpc.dumps(shape(found))) if jsonrpc.answers(
                found := event.message(), self.rpc_id) else event.raw for event in self.events)
        if isinstance(self.message, list):
            return jsonrpc.dumps([shape(m) if jsonrpc.answers(m, self.rpc_id) else m for m in self.message])
        return jsonrpc.dumps(shape(self.message) if jsonrpc.answers(self.message, self.rpc_id) else self.message)

    def response_event(self, shape: Shape | None) -> bytes:
        """The event stream's event(s) holding the call's response, re-sent (`shape`d, or as they came), for a
        stream whose other events were passed on already (mcp_live.py)."""
        return b"".join((event.with_data(jsonrpc.dumps(shape(found))) if shape else event.raw)
                        for event in self.events if jsonrpc.answers(found := event.message(), self.rpc_id))

    def _read(self, answer: UpstreamAnswer) -> None:
        self.raw = data = b"".join(answer.body)  # whole: the delivery read it before judging
        self.kind = (_header(answer, "Content-Type") or "").split(";")[0].strip().lower()
        if self.kind == "text/event-stream":
            self.events = list(jsonrpc.events([data], len(data) + 1))
            self.response = next((m for e in self.events if jsonrpc.answers(m := e.message(), self.rpc_id)), None)
        elif self.kind == "application/json":
            try:
                self.message = json.loads(data)
            except ValueError:
                return
            messages = self.message if isinstance(self.message, list) else [self.message]
            self.response = next((m for m in messages if jsonrpc.answers(m, self.rpc_id)), None)


def _header(answer: UpstreamAnswer, name: str) -> str | None:
    return next((v for k, v in answer.headers if k.lower() == name.lower()), None)
