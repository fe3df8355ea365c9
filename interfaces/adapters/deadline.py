"""One deadline over a whole outbound request: connect, TLS handshake, sending, status line, headers and body.

A socket timeout bounds each read, not the exchange: a server that sends its status line one byte a second never
lets a read wait long, and held a webhook sender 45 s under a 15 s timeout. A `Deadline` is armed for one request;
the connection it runs on (`WatchedHTTPConnection`, `WatchedHTTPSConnection`, the connection classes of the
`OutboundClient`'s pools) reports itself when it connects or sends, and when the deadline passes a timer shuts the
connection's socket down. Whatever the request was blocked in then returns at once, and the client reports a
timeout because `Deadline.expired` is set.

The deadline reaches the connection through a thread-local (greenlet-local under gevent): urllib3 picks the pooled
connection inside `urlopen` and offers no other way to hand a request's context to it.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.connection import HTTPConnection, HTTPSConnection

RECHECK_SECONDS = 0.05  # past the deadline with no socket yet (still connecting): look again this often

_current = threading.local()


class Deadline:
    """`at` is a `time.monotonic()` moment; `cancel()` once the response is done with (before the connection goes
    back to the pool, so a later request on it is never cut)."""

    def __init__(self, at: float) -> None:
        self.at, self.expired = at, False
        self._connection: Any = None
        self._done = False
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def start(self) -> Deadline:
        self._arm(self.remaining())
        return self

    def attach(self, connection: Any) -> None:
        with self._lock:
            self._connection = connection
            if self.expired:
                self._cut()

    def cancel(self) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()

    def _arm(self, seconds: float) -> None:
        with self._lock:
            if self._done:
                return
            self._timer = threading.Timer(seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            cut = self._cut()
        if not cut:
            self._arm(RECHECK_SECONDS)

    def _cut(self) -> bool:
        sock = getattr(self._connection, "sock", None)
        if sock is None:
            return False
        try:
            # The plain socket's shutdown, also for a TLS socket: the reader blocked in it sees the end of the
            # stream, and the TLS object it reads through stays in place (SSLSocket.shutdown would drop it).
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass  # already closed
        return True


class armed:  # noqa: N801 - used as a context manager, like `open`
    """`with armed(deadline):` the requests this thread makes meanwhile run under `deadline` (None: none)."""

    def __init__(self, deadline: Deadline | None) -> None:
        self._deadline = deadline

    def __enter__(self) -> Deadline | None:
        _current.deadline = self._deadline
        return self._deadline

    def __exit__(self, *_: object) -> None:
        _current.deadline = None


def _attach(connection: Any) -> None:
    deadline: Deadline | None = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.attach(connection)


class _Watched:
    """A connection that reports itself to the current deadline before it connects and before each request."""

    def connect(self) -> None:
        _attach(self)
        super().connect()  # type: ignore[misc]  # the urllib3 connection class it is mixed into

    def request(self, *args: Any, **kwargs: Any) -> None:
        _attach(self)
        super().request(*args, **kwargs)  # type: ignore[misc]  # likewise


class WatchedHTTPConnection(_Watched, HTTPConnection):
    pass


class WatchedHTTPSConnection(_Watched, HTTPSConnection):
    pass


class WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = WatchedHTTPConnection


class WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = WatchedHTTPSConnection
