"""Outbound HTTP for webhook deliveries: one POST, resolved once and pinned, no redirects, bounded in time.

The host is resolved once; the request goes to that address (TLS still checks the certificate against the
hostname, sent as SNI), so a DNS answer that changes between the check and the connection cannot redirect it. In
production every address must be public (`domain.webhook.check_addresses`: no private, loopback, link-local,
metadata or reserved address). Redirects are never followed (a 3xx is a failed attempt, as Standard Webhooks
says). Only the first `EXCERPT_BYTES` of the answer are read.

`post` is the one place a delivery touches the network: when the shared outbound adapter lands, this is where it
is swapped in.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

import httpx

from application.listings import Resolver
from domain.webhook import WebhookError, check_addresses

EXCERPT_BYTES = 1024


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no HTTP answer (refused, unreachable, timed out)
    text: str = ""
    latency_ms: int = 0
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)


@lru_cache(maxsize=4)
def _tls(ca_file: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(ca_file)
    return context


def post(url: str, body: bytes, headers: dict[str, str], *, timeout: float, production: bool,
         resolver: Resolver, ca_file: str | None = None) -> Answer:
    started = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    try:
        addresses = resolver.resolve(host)
        if production:
            check_addresses(host, addresses)
        elif not addresses:
            raise WebhookError("unresolvable", f"{host} does not resolve")
    except WebhookError as refused:
        return Answer(None, latency_ms=took(), error=f"refused: {refused.message}")
    address = addresses[0]
    pinned = f"[{address}]" if ":" in address else address
    netloc = f"{pinned}:{parts.port}" if parts.port else pinned
    target = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host_header = parts.netloc.rsplit("@", 1)[-1]
    try:
        with httpx.Client(verify=_tls(ca_file), timeout=timeout, follow_redirects=False, trust_env=False) as client, \
                client.stream("POST", target, content=body, extensions={"sni_hostname": host},
                              headers={**headers, "Host": host_header}) as response:
            excerpt = b""
            for chunk in response.iter_bytes():
                excerpt += chunk
                if len(excerpt) >= EXCERPT_BYTES:
                    break
            return Answer(response.status_code, excerpt[:EXCERPT_BYTES].decode("utf-8", "replace"), took(),
                          headers={k.lower(): v for k, v in response.headers.items()})
    except httpx.TimeoutException:
        return Answer(None, latency_ms=took(), error=f"timed out after {timeout:g} s")
    except httpx.HTTPError as failed:
        return Answer(None, latency_ms=took(), error=f"{type(failed).__name__}: {failed}"[:500])
