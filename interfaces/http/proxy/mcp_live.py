"""A paid call's event stream passed on as it arrives, while the delivery command reads it whole.

`Payments.deliver` charges only an answer known whole, so it reads the MCP server's answer to its end before it
judges and settles. When that answer is a `text/event-stream`, the events other than the call's response (progress
and log notifications, the server's own requests) need not wait: the delivery runs on a thread of its own (a
greenlet under gunicorn's gevent workers), the stream's headers and each complete event that does not answer the
call are handed to the WSGI side as they are read, and the call's response follows once the delivery is decided.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from application.deliveries import DeliveryResult
from application.ports import Upstream, UpstreamAnswer
from interfaces.http.proxy import jsonrpc

MAX_EVENT_BYTES = 4 * 1024 * 1024


class LiveCall:
    """One paid call's delivery on its own thread, and what it hands over: ("stream", the answer's status and
    headers), ("event", raw bytes) for each event passed on at once, then ("result", the delivery's result) or
    ("raised", the exception)."""

    def __init__(self, rpc_id: str | int) -> None:
        self._rpc_id = rpc_id
        self._handed: queue.Queue[tuple[str, Any]] = queue.Queue()

    def tapped(self, upstream: Upstream) -> Upstream:
        """`upstream`, whose event-stream answers are also handed over event by event as the delivery reads them."""

        def forward(payment_key: str) -> UpstreamAnswer:
            answer = upstream(payment_key)
            kind = next((v for k, v in answer.headers if k.lower() == "content-type"), "")
            if answer.status >= 400 or kind.split(";")[0].strip().lower() != "text/event-stream":
                return answer
            self._handed.put(("stream", answer))
            return replace(answer, body=self._tee(answer.body))

        return forward

    def start(self, deliver: Callable[[], DeliveryResult]) -> tuple[str, Any]:
        """Run the delivery; the first thing it hands over: ("stream", answer) or ("result", result)."""

        def run() -> None:
            try:
                self._handed.put(("result", deliver()))
            except BaseException as failed:  # handed to the request's own thread, which raises or reports it
                self._handed.put(("raised", failed))

        threading.Thread(target=run, name="paid-mcp-call", daemon=True).start()
        first = self._handed.get()
        if first[0] == "raised":
            raise first[1]
        return first

    def rest(self) -> Iterator[tuple[str, Any]]:
        """What follows the stream's start: events, then the result (or the exception)."""
        while True:
            kind, value = self._handed.get()
            yield kind, value
            if kind in ("result", "raised"):
                return

    def _tee(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        splitter: jsonrpc.EventSplitter | None = jsonrpc.EventSplitter(MAX_EVENT_BYTES)
        for chunk in chunks:
            yield chunk
            try:
                complete = splitter.feed(chunk) if splitter is not None else []
            except ValueError:  # an event too large to hold: the rest goes with the response
                splitter, complete = None, []
            for event in complete:
                if not jsonrpc.answers(event.message(), self._rpc_id):
                    self._handed.put(("event", event.raw))
