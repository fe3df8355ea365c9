"""Outbound HTTP for webhook deliveries: one POST through the project's `OutboundClient`
(`interfaces/adapters/outbound.py`): resolved once and pinned, no private, loopback, link-local or metadata address
in production, no redirects, and bounded as a whole: connect, send, status line, headers and the excerpt of the body
all end within the one `timeout` (a receiver sending a byte a second is cut off there; the attempt is a timeout).

A delivery is never an exception: every way it can end is an `Answer` (a status, or none with the error), so the
worker records it as an attempt. Only the first `EXCERPT_BYTES` of an answer are read.
"""

from __future__ import annotations

import ssl
import threading
import time
from dataclasses import dataclass, field

from application.ports import Resolver
from interfaces.adapters.outbound import OutboundClient, OutboundError, OutboundPolicy, OutboundRefused, UpstreamTimeout

EXCERPT_BYTES = 1024
_clients: dict[tuple[int, bool, float, str | None], OutboundClient] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no HTTP answer (refused, unreachable, timed out)
    text: str = ""
    latency_ms: int = 0
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def client(resolver: Resolver, *, production: bool, timeout: float, ca_file: str | None) -> OutboundClient:
    """One pooled client per resolver and settings (connections are reused per checked address)."""
    key = (id(resolver), production, timeout, ca_file)
    with _lock:
        if key not in _clients:
            context = ssl.create_default_context()
            if ca_file:
                context.load_verify_locations(ca_file)
            policy = OutboundPolicy.for_mode(not production, connect_timeout=min(5.0, timeout),
                                             response_timeout=timeout, read_timeout=timeout, max_duration=timeout)
            _clients[key] = OutboundClient(resolver, policy, ssl_context=context)
        return _clients[key]


def post(url: str, body: bytes, headers: dict[str, str], *, timeout: float, production: bool,
         resolver: Resolver, ca_file: str | None = None) -> Answer:
    started = time.monotonic()
    deadline = started + timeout

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    outbound = client(resolver, production=production, timeout=timeout, ca_file=ca_file)
    try:
        response = outbound.request("POST", url, headers.items(), body, deadline=deadline)
    except OutboundRefused as refused:
        return Answer(None, latency_ms=took(), error=f"refused: {refused.message}")
    except UpstreamTimeout:
        return Answer(None, latency_ms=took(), error=f"timed out after {timeout:g} s")
    except OutboundError as failed:
        return Answer(None, latency_ms=took(), error=f"{failed.reason}: {failed.message}"[:500])
    excerpt = b""
    try:
        for chunk in response.stream():
            excerpt += chunk
            if len(excerpt) >= EXCERPT_BYTES:
                break
    except UpstreamTimeout:  # the answer did not end in time: not an answer (retried like any timeout)
        return Answer(None, latency_ms=took(), error=f"timed out after {timeout:g} s")
    except OutboundError:
        pass  # the status is what counts; the excerpt is what arrived
    finally:
        response.close()
    return Answer(response.status, excerpt[:EXCERPT_BYTES].decode("utf-8", "replace"), took(),
                  headers={k.lower(): v for k, v in response.headers})
