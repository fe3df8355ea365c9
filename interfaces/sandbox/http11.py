"""A lean HTTP/1.1 server for a WSGI app: every connection on one asyncio loop, in the thread that serves.

The localnet's clients (the API workers' pooled keep-alive JSON-RPC connections, solana-py, the SDKs, curl) send
small `Content-Length` requests on kept-alive connections. wsgiref's server took a thread per connection and parsed
each request's headers with the email package: 0.66 ms of CPU per `simulateTransaction`, 0.37 here
(docs/performance.md). Here a request is parsed with a few bytes operations, the app runs on the loop's thread,
and its answer (status line, headers, body) leaves in one write. Pipelined requests are answered in order.
Not supported (answered with an error, then the connection closed): chunked request bodies (501), heads over 64 KB
(431), bodies over `max_body` (413). `Expect: 100-continue` gets its interim answer.
"""

from __future__ import annotations

import asyncio
import io
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote

MAX_HEAD = 1 << 16

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class BadRequest(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class _Date:
    """The Date header, formatted once a second."""

    second, text = 0, ""

    @classmethod
    def now(cls) -> str:
        second = int(time.time())
        if second != cls.second:
            cls.text, cls.second = formatdate(second, usegmt=True), second
        return cls.text


class Http11Connection(asyncio.Protocol):
    """One client connection: requests parsed from the buffer as they complete, answered in order."""

    def __init__(self, app: WsgiApp, base_environ: dict[str, Any], connections: set[Http11Connection], *,
                 max_body: int) -> None:
        self._app, self._base, self._connections, self._max_body = app, base_environ, connections, max_body
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._continued = False  # the interim 100 Continue sent for the request being received
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport  # asyncio sets TCP_NODELAY on TCP connections
        self._connections.add(self)
        peer = transport.get_extra_info("peername")
        self._base = {**self._base, "REMOTE_ADDR": str(peer[0]) if isinstance(peer, tuple) else ""}

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._connections.discard(self)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def pause_writing(self) -> None:  # a client that sends without reading: stop reading until it reads
        self._paused = True
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        if self._transport is not None:
            self._transport.resume_reading()
            self._answer_complete_requests()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._answer_complete_requests()

    def _answer_complete_requests(self) -> None:
        while self._transport is not None and not self._paused:
            try:
                request = self._next_request()
            except BadRequest as bad:
                self._transport.write(f"HTTP/1.1 {bad.status}\r\nContent-Length: 0\r\nConnection: close\r\n"
                                      f"Date: {_Date.now()}\r\n\r\n".encode("latin-1"))
                self._transport.close()
                return
            if request is None:
                return
            if self._respond(*request):  # closed: whatever the client pipelined after it goes unanswered
                self._transport = None
                return

    def _next_request(self) -> tuple[dict[str, Any], bool] | None:
        """The next complete request's WSGI environ and whether the connection closes after it; None until the
        buffer holds one."""
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD:
                raise BadRequest("431 Request Header Fields Too Large")
            return None
        lines = buffer[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
            raise BadRequest("400 Bad Request")
        method, target, version = parts
        environ = {**self._base, "REQUEST_METHOD": method, "SERVER_PROTOCOL": version}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise BadRequest("400 Bad Request")
            key = name.upper().replace("-", "_")
            key = key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key
            value = value.strip()
            environ[key] = f"{environ[key]},{value}" if key in environ else value
        if "HTTP_TRANSFER_ENCODING" in environ:
            raise BadRequest("501 Not Implemented")
        length_text = environ.get("CONTENT_LENGTH", "0")
        if not length_text.isdigit():
            raise BadRequest("400 Bad Request")
        length = int(length_text)
        if length > self._max_body:
            raise BadRequest("413 Content Too Large")
        start = end + 4
        if len(buffer) < start + length:
            if not self._continued and environ.get("HTTP_EXPECT", "").lower() == "100-continue":
                self._continued = True
                assert self._transport is not None
                self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return None
        body = bytes(buffer[start:start + length])
        del buffer[:start + length]
        self._continued = False
        path, _, query = target.partition("?")
        environ["PATH_INFO"], environ["QUERY_STRING"] = unquote(path, "latin-1"), query
        environ["wsgi.input"] = io.BytesIO(body)
        connection = environ.get("HTTP_CONNECTION", "").lower()
        close = "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection)
        return environ, close

    def _respond(self, environ: dict[str, Any], close: bool) -> bool:
        """Answer one request; whether the connection is closed after it."""
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable:
            answer[:] = [status, headers]
            return _no_write

        try:
            result = self._app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
            status, headers = answer
        except Exception:
            traceback.print_exc(file=sys.stderr)
            status, headers, body, close = "500 Internal Server Error", [], b"", True
        head = [f"HTTP/1.1 {status}"]
        head += [f"{name}: {value}" for name, value in headers if name.lower() not in _OURS]
        if environ["REQUEST_METHOD"] == "HEAD":  # the app's Content-Length stands for the body it would send
            head += [f"{name}: {value}" for name, value in headers if name.lower() == "content-length"]
            body = b""
        elif status[:3] not in ("204", "304"):
            head.append(f"Content-Length: {len(body)}")
        head.append(f"Date: {_Date.now()}")
        if close:
            head.append("Connection: close")
        head.append("\r\n")
        assert self._transport is not None
        self._transport.write("\r\n".join(head).encode("latin-1") + body)
        if close:
            self._transport.close()
        return close


_OURS = frozenset({"content-length", "date", "connection"})


def _no_write(data: bytes) -> None:
    raise NotImplementedError("this server takes the answer from the app's iterable, not write()")
