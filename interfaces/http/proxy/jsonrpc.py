"""JSON-RPC 2.0 messages and Server-Sent Events as MCP's Streamable HTTP transport carries them.

What the MCP gateway (mcp.py) needs and no more: check a message's envelope (so a malformed one is answered with
its own id, or `null` when it has none usable), build errors and results, and split a `text/event-stream` body
into events as they arrive, so the answer to one request can be found by its id among the notifications around
it and the other events passed on byte for byte (https://html.spec.whatwg.org/multipage/server-sent-events.html).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

PARSE_ERROR, INVALID_REQUEST, INTERNAL_ERROR = -32700, -32600, -32603
# Paywarden's own codes, in JSON-RPC's range for implementation-defined server errors (docs/mcp.md)
UPSTREAM_FAILED, DUPLICATE_REQUEST, SETTLEMENT_PENDING = -32001, -32002, -32003
EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class MessageError(ValueError):
    """A message the gateway answers itself: `id` is the message's own when it carries a usable one."""

    def __init__(self, rpc_id: Any, code: int, message: str) -> None:
        super().__init__(message)
        self.rpc_id, self.code = rpc_id, code


def is_id(value: Any) -> bool:
    """A request id as MCP allows it: a string or an integer (never null, never a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def checked(message: Any) -> dict[str, Any]:
    """A request, notification or response with a valid JSON-RPC 2.0 envelope; `MessageError` otherwise."""
    if not isinstance(message, dict):
        raise MessageError(None, INVALID_REQUEST, "a JSON-RPC message is an object")
    rpc_id = message.get("id")
    usable = rpc_id if is_id(rpc_id) else None
    if message.get("jsonrpc") != "2.0":
        raise MessageError(usable, INVALID_REQUEST, 'a JSON-RPC message has "jsonrpc": "2.0"')
    if "id" in message and usable is None and "method" in message:
        raise MessageError(None, INVALID_REQUEST, "a request id is a string or an integer")
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            raise MessageError(usable, INVALID_REQUEST, "a method is a non-empty string")
        if "params" in message and not isinstance(message["params"], dict):
            raise MessageError(usable, INVALID_REQUEST, "params is an object")
    elif usable is None and message.get("id") is not None or ("result" in message) == ("error" in message):
        raise MessageError(usable, INVALID_REQUEST, "a response has an id and exactly one of result and error")
    return message


def error(rpc_id: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": rpc_id, "error": body}


def result(rpc_id: Any, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": value}


def answers(message: Any, rpc_id: Any) -> bool:
    """Whether `message` is the response (result or error) to the request `rpc_id`."""
    return (isinstance(message, dict) and "method" not in message and message.get("id") == rpc_id
            and type(message.get("id")) is type(rpc_id) and ("result" in message or "error" in message))


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event: its raw bytes (terminator included), and its fields as parsed."""

    raw: bytes
    fields: tuple[tuple[str, str], ...]

    @property
    def data(self) -> str:
        return "\n".join(value for name, value in self.fields if name == "data")

    def message(self) -> Any:
        """The event's data as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.data)
        except ValueError:
            return None

    def with_data(self, data: bytes) -> bytes:
        """The same event (its `id`, `event` and `retry` fields kept) carrying `data` instead."""
        kept = "".join(f"{name}: {value}\n" for name, value in self.fields if name in ("id", "event", "retry"))
        return kept.encode() + b"data: " + data + b"\n\n"


def parse_event(raw: bytes) -> Event:
    fields = []
    for line in re.split(r"\r\n|\n|\r", raw.decode("utf-8", "replace")):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields.append((name, value[1:] if value.startswith(" ") else value))
    return Event(raw, tuple(fields))


class EventSplitter:
    """Bytes in, complete events out, as a stream arrives; `limit` bounds one event."""

    def __init__(self, limit: int) -> None:
        self._buffer, self._limit = b"", limit

    def feed(self, chunk: bytes) -> list[Event]:
        self._buffer += chunk
        complete = []
        while (end := EVENT_END.search(self._buffer)) is not None:
            complete.append(parse_event(self._buffer[:end.end()]))
            self._buffer = self._buffer[end.end():]
        if len(self._buffer) > self._limit:
            raise ValueError(f"an event of the upstream's stream is over {self._limit} bytes")
        return complete

    @property
    def rest(self) -> bytes:
        """What follows the last complete event (a stream cut short)."""
        return self._buffer


def events(chunks: Iterable[bytes], limit: int) -> Iterator[Event]:
    """The events of a `text/event-stream` body as they complete; an event over `limit` bytes is an error, and
    what follows the last complete event (a stream cut short) is yielded as a last, partial event."""
    splitter = EventSplitter(limit)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    if splitter.rest:
        yield Event(splitter.rest, ())
