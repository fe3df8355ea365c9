"""A lean JSON-RPC transport for the hot path: pooled keep-alive HTTP/1.1 connections, one TCP segment per request.

solana-py's `Client` goes through httpx: per call a few thousand Python calls of request/response object churn and
the headers and the body in separate socket writes (system calls cost ~70 µs on this VM). The calls of a verify
and a settle (`simulateTransaction`, `sendTransaction`, `getSignatureStatuses`, `isBlockhashValid`) post solders'
own request bodies through this instead and parse the answers with solders' public `from_json`, as solana-py does:
the same typed results, and its `RPCException` for solders' error types. On a settle this halved the API worker's
CPU for its chain calls (docs/performance.md). Only public interfaces: http.client's connections, corked with the
socket's own option (`_corked_request`; they were subclassed to override http.client's private `_send_output`).

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
import socket
from typing import Any, Protocol, TypeVar, get_args
from urllib.parse import urlsplit

from solana.rpc.core import RPCException
from solders.rpc.responses import RPCError


class _Parsed(Protocol):
    """A solders response type: `from_json` answers the result, or one of solders' RPC error types."""

    @staticmethod
    def from_json(raw: str) -> Any: ...


T = TypeVar("T", bound=_Parsed)


class TransportError(Exception):
    """The endpoint could not be reached or did not answer HTTP 200 (RpcChain: `ChainUnavailableError`)."""


_ERRORS = get_args(RPCError)  # the error types solders' parsers answer with


# http.client writes a request's headers and its body with two `send`s: two TCP segments (its connections set
# TCP_NODELAY), two wake-ups of the node (it reads the headers, then waits for the body). Corked while the request
# is written, the kernel sends them as one segment when uncorked (Linux's TCP_CORK; elsewhere two, as before).
_CORK = getattr(socket, "TCP_CORK", None)


def _corked_request(conn: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]) -> None:
    if _CORK is None:
        conn.request("POST", path, body=body, headers=headers)
        return
    if conn.sock is None:
        conn.connect()
    sock = conn.sock
    sock.setsockopt(socket.IPPROTO_TCP, _CORK, 1)
    try:
        conn.request("POST", path, body=body, headers=headers)
    finally:
        if conn.sock is sock:  # not closed by a failed write
            sock.setsockopt(socket.IPPROTO_TCP, _CORK, 0)


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
                _corked_request(conn, self._path, payload, self._headers)
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
            parsed = parser.from_json(raw.decode())
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
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self._timeout)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
