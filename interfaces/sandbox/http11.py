"""An HTTP/1.1 server for a WSGI app: every connection on one asyncio loop, in the thread that serves, the protocol
kept by h11 (the HTTP/1.1 state machine under httpx, a dependency already).

The localnet's clients (the API workers' pooled keep-alive JSON-RPC connections, solana-py, the SDKs, curl) send
small requests on kept-alive connections. wsgiref's server took a thread per connection and parsed each request's
headers with the email package; its threads taking turns at the GIL cost more CPU than the simulation they asked
for (docs/performance.md). Here the app runs on the loop's thread, each answer (status line, headers, body) leaves in
one write, pipelined requests are answered in order, `Expect: 100-continue` gets its interim answer, and h11 refuses
what is malformed (400), a head over 64 KB (431); a body over `max_body` is 413. The connection closes after an error.
"""

from __future__ import annotations

import asyncio
import io
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import h11

MAX_HEAD = 1 << 16

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Date:
    """The Date header, formatted once a second."""

    second, text = 0, b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.text, cls.second = formatdate(second, usegmt=True).encode("ascii"), second
        return cls.text


class Http11Connection(asyncio.Protocol):
    """One client connection: each request answered as soon as h11 has read all of it, in order."""

    def __init__(self, app: WsgiApp, base_environ: dict[str, Any], connections: set[Http11Connection], *,
                 max_body: int) -> None:
        self._app, self._base, self._connections, self._max_body = app, base_environ, connections, max_body
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self._transport: asyncio.Transport | None = None
        self._request: h11.Request | None = None
        self._body = bytearray()
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
            self._process()

    def data_received(self, data: bytes) -> None:
        self._h11.receive_data(data)
        self._process()

    def eof_received(self) -> bool:
        self._h11.receive_data(b"")
        self._process()
        return False  # the transport closes itself

    def _process(self) -> None:
        while self._transport is not None and not self._paused:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as bad:
                return self._refuse(bad.error_status_hint)
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request, self._body = event, bytearray()
                length = _header(event, b"content-length")
                if length is not None and int(length) > self._max_body:
                    return self._refuse(413)
                if self._h11.they_are_waiting_for_100_continue:
                    self._transport.write(self._h11.send(h11.InformationalResponse(status_code=100, headers=[],
                                                                                reason=b"Continue")))
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > self._max_body:  # a chunked body has no length to check up front
                    return self._refuse(413)
            elif isinstance(event, h11.EndOfMessage):
                self._respond()
                if self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
                    return self.close()  # `Connection: close`, or HTTP/1.0: whatever came after goes unanswered
                self._h11.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return self.close()

    def _environ(self, request: h11.Request) -> dict[str, Any]:
        path, _, query = request.target.partition(b"?")
        environ = {**self._base, "REQUEST_METHOD": request.method.decode("ascii"),
                   "SERVER_PROTOCOL": f"HTTP/{request.http_version.decode('ascii')}",
                   "PATH_INFO": unquote(path.decode("latin-1"), "latin-1"), "QUERY_STRING": query.decode("latin-1"),
                   "wsgi.input": io.BytesIO(bytes(self._body))}
        for name, value in request.headers:  # h11 gives lower-case names
            key = name.decode("latin-1").upper().replace("-", "_")
            key = key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key
            text = value.decode("latin-1")
            environ[key] = f"{environ[key]},{text}" if key in environ else text
        environ.pop("HTTP_TRANSFER_ENCODING", None)  # a chunked body is read whole: the app sees its length
        environ["CONTENT_LENGTH"] = str(len(self._body))
        return environ

    def _respond(self) -> None:
        assert self._request is not None and self._transport is not None
        environ, answer = self._environ(self._request), list[Any]()

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
            status, headers, body = "500 Internal Server Error", [], b""
        code, _, reason = status.partition(" ")
        fields = [(name, value) for name, value in headers if name.lower() not in _OURS]
        if self._request.method != b"HEAD" and code not in ("204", "304"):
            fields.append(("Content-Length", str(len(body))))
        elif self._request.method == b"HEAD":  # the app's Content-Length stands for the body it would send
            fields += [(name, value) for name, value in headers if name.lower() == "content-length"]
        fields.append(("Date", _Date.now().decode("ascii")))
        out = self._h11.send(h11.Response(status_code=int(code), reason=reason.encode("latin-1"), headers=fields))
        if body and self._request.method != b"HEAD":
            out += self._h11.send(h11.Data(data=body))
        out += self._h11.send(h11.EndOfMessage())
        self._transport.write(out)  # one write for the whole answer

    def _refuse(self, status: int) -> None:
        """An answer with no body to a request h11 or the body limit refused, then the connection closed."""
        assert self._transport is not None
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            response = h11.Response(status_code=status, reason=HTTPStatus(status).phrase.encode("ascii"),
                                    headers=[("Content-Length", "0"), ("Connection", "close"),
                                             ("Date", _Date.now().decode("ascii"))])
            self._transport.write(self._h11.send(response) + self._h11.send(h11.EndOfMessage()))
        self.close()


_OURS = frozenset({"content-length", "date", "connection"})


def _header(request: h11.Request, name: bytes) -> bytes | None:
    return next((value for key, value in request.headers if key == name), None)


def _no_write(data: bytes) -> None:
    raise NotImplementedError("this server takes the answer from the app's iterable, not write()")
