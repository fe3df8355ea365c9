"""A lean JSON-RPC transport for the hot path: pooled keep-alive HTTP/1.1 connections, one `send` per request.

solana-py's `Client` goes through httpx: per call a few thousand Python calls of request/response object churn and
the headers and the body in separate socket writes (system calls cost ~70 µs on this VM). The calls of a verify
and a settle (`simulateTransaction`, `sendTransaction`, `getSignatureStatuses`, `isBlockhashValid`) post solders'
own request bodies through this instead and parse the answers with solders, exactly as solana-py would
(`_parse_raw`): the same typed results and errors. On a settle this halved the API worker's CPU for its chain
calls (docs/performance.md).

Connections are kept in a LIFO pool (greenlet- and thread-safe: `list.append`/`pop` are atomic). A call without
side effects is retried once on a fresh connection when the one it used turns out closed. A broadcast is never
sent twice by this transport (`retry=False`): a lost answer to `sendTransaction` may hide a transaction that
landed, and a second send would be refused as already processed and read as a failure. It gets a connection the
server has not closed instead, and a fault is a `TransportError` (the payment stays submitted; the settle's
reconciliation asks the chain).
"""

from __future__ import annotations

import http.client
import select
from typing import Any, TypeVar
from urllib.parse import urlsplit

from solana.rpc.core import RPCException
from solders.rpc.responses import RPCError

T = TypeVar("T")


class TransportError(Exception):
    """The endpoint could not be reached or did not answer HTTP 200 (RpcChain: `ChainUnavailableError`)."""

_ERRORS = RPCError.__args__  # type: ignore[attr-defined]


class _OneSend:
    """http.client (Python 3) writes a request's headers and its body with two `send`s: two system calls, two
    wake-ups of the server (it reads the headers, then waits for the body), and under Nagle's algorithm the body
    may wait for the headers' delayed ACK. A bytes body goes out with the headers in one `send` here."""

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked)  # type: ignore[misc]
            return
        buffer = self._buffer  # type: ignore[attr-defined]
        buffer.extend((b"", b""))
        request = b"\r\n".join(buffer) + message_body
        del buffer[:]
        self.send(request)  # type: ignore[attr-defined]


class _Connection(_OneSend, http.client.HTTPConnection):
    pass


class _TlsConnection(_OneSend, http.client.HTTPSConnection):
    pass


class KeepAliveJsonRpc:
    """POST JSON-RPC bodies to one endpoint over pooled keep-alive connections."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._timeout = timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}

    def call(self, body: Any, parser: type[T], *, retry: bool = True) -> T:
        """Send solders' request `body`; its answer parsed by `parser` (a solders response type). Raises
        `RPCException` with solders' typed error as solana-py does, `TransportError` on transport faults.
        `retry=False` for a call with side effects: sent at most once, on a connection checked open."""
        payload = body.to_json().encode()
        for attempt in (1, 2) if retry else (2,):
            conn = self._open_idle() if not retry else self._idle.pop() if self._idle else self._connect()
            try:
                conn.request("POST", self._path, body=payload, headers=self._headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as gone:
                conn.close()
                if attempt == 2:
                    raise TransportError(f"connection lost: {gone!r}") from gone
                continue
            except (OSError, http.client.HTTPException) as failed:
                conn.close()
                raise TransportError(f"{type(failed).__name__}: {failed}") from failed
            if resp.will_close:
                conn.close()
            else:
                self._idle.append(conn)
            if resp.status != 200:
                raise TransportError(f"HTTP {resp.status}")
            parsed = parser.from_json(raw.decode())  # type: ignore[attr-defined]
            if isinstance(parsed, _ERRORS):
                raise RPCException(parsed)
            return parsed
        raise AssertionError("unreachable")

    def _open_idle(self) -> http.client.HTTPConnection:
        """An idle connection the server has not closed (nothing to read on it while idle), else a new one."""
        while self._idle:
            conn = self._idle.pop()
            try:
                readable = conn.sock is None or bool(select.select([conn.sock], [], [], 0)[0])
            except (OSError, ValueError):
                readable = True
            if not readable:
                return conn
            conn.close()
        return self._connect()

    def _connect(self) -> http.client.HTTPConnection:
        cls = _TlsConnection if self._https else _Connection
        return cls(self._host, self._port, timeout=self._timeout)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
