"""What the proxy sends upstream and what it passes back: header rules
(docs/architecture.md#the-interface-contract, "Proxy forwarding").

Nothing a client sends becomes privileged upstream (docs/proxy.md, "Headers an upstream can trust"): method
overrides and the client's own forwarding headers are dropped, and the proxy sets `Forwarded` and `X-Forwarded-*`
itself (a client's `X-Forwarded-For` chain is kept only when the peer is one of `PAYWARDEN_TRUSTED_PROXIES`).
Cookies pass only for a service that opts in. The client gets one `PAYMENT-RESPONSE`: the proxy's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from application.errors import UpstreamFailedError
from interfaces.adapters.outbound import OutboundError, OutboundResponse
from interfaces.http.common.ratelimit import is_trusted
from interfaces.http.proxy import metrics

# x402's client headers and credentials never leave the proxy; hop-by-hop headers are per connection (RFC 9110
# 7.6.1); Host and Content-Length are set by the client library for the upstream connection; a client cannot
# forge the payment hash.
STRIPPED = frozenset({
    "payment-signature", "authorization", "x-payment", "sign-in-with-x", "payment-retry", "payment-recovery",
    "x-paywarden-payment-hash", "x-paywarden-signed-in", "proxy-authorization", "cookie2",
})
# What only the proxy may say to the upstream: who the client is, how and where it connected, which method it used.
CLIENT_CONTROLLED = frozenset({
    "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port",
    "x-forwarded-prefix", "x-forwarded-server", "x-forwarded-ssl", "x-real-ip", "x-client-ip", "true-client-ip",
    "client-ip", "x-cluster-client-ip", "cf-connecting-ip", "fastly-client-ip", "x-http-method-override",
    "x-http-method", "x-method-override", "x-original-url", "x-rewrite-url", "x-original-method",
})
COOKIES_IN, COOKIES_OUT = frozenset({"cookie"}), frozenset({"set-cookie", "set-cookie2"})
# x402's answers to the client are the proxy's own: an upstream's would make two (or other terms to pay).
UPSTREAM_PAYMENT_HEADERS = frozenset({"payment-response", "payment-required", "x-payment-response"})
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
})
PAYMENT_HASH_HEADER = "X-Paywarden-Payment-Hash"
SIGNED_IN_HEADER = "X-Paywarden-Signed-In"


def request_headers(environ: Mapping[str, object]) -> list[tuple[str, str]]:
    """The client's headers from a WSGI environ, with their dashes back (`HTTP_X_API_KEY` → `X-Api-Key`)."""
    headers = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers.append((key[5:].replace("_", "-").title(), str(value)))
    for key, name in (("CONTENT_TYPE", "Content-Type"), ("CONTENT_LENGTH", "Content-Length")):
        if environ.get(key):
            headers.append((name, str(environ[key])))
    return headers


@dataclass(frozen=True)
class Origin:
    """Where a request came from, as the proxy vouches for it: the address chain (client first, the direct peer
    last) and the public scheme and host the client addressed."""

    chain: tuple[str, ...]
    proto: str
    host: str

    @classmethod
    def of(cls, environ: Mapping[str, object], public_url: str, trusted: tuple[str, ...]) -> Origin:
        peer = str(environ.get("REMOTE_ADDR") or "unknown")
        chain: list[str] = []
        if trusted and is_trusted(peer, trusted):
            chain = [h.strip() for h in str(environ.get("HTTP_X_FORWARDED_FOR") or "").split(",") if h.strip()]
        proto, _, rest = public_url.partition("://")
        return cls((*chain, peer), proto or "http", rest.split("/", 1)[0])

    def headers(self) -> list[tuple[str, str]]:
        forwarded = f"for={_node(self.chain[-1])};proto={self.proto}" + (f';host="{self.host}"' if self.host else "")
        headers = [("Forwarded", forwarded), ("X-Forwarded-For", ", ".join(self.chain)),
                   ("X-Forwarded-Proto", self.proto)]
        if self.host:
            headers.append(("X-Forwarded-Host", self.host))
        return headers


def upstream_headers(incoming: Iterable[tuple[str, str]], payment_hash: str, auth: tuple[str, str] | None,
                     origin: Origin | None = None, cookies: bool = False,
                     signed_in: str = "") -> list[tuple[str, str]]:
    """`signed_in`: the wallet a Sign-In-With-X grant let in (`X-Paywarden-Signed-In` instead of a payment hash)."""
    incoming = list(incoming)
    named_by_connection = {token.strip().lower() for k, v in incoming if k.lower() == "connection"
                           for token in v.split(",")}
    dropped = (STRIPPED | HOP_BY_HOP | CLIENT_CONTROLLED | named_by_connection | (set() if cookies else COOKIES_IN)
               | ({auth[0].lower()} if auth else set()))
    kept = [(k, v) for k, v in incoming if k.lower() not in dropped]
    if origin is not None:
        kept.extend(origin.headers())
    kept.append((SIGNED_IN_HEADER, signed_in) if signed_in else (PAYMENT_HASH_HEADER, payment_hash))
    if auth is not None:
        kept.append(auth)
    return kept


def response_headers(upstream: Iterable[tuple[str, str]], cookies: bool = False) -> list[tuple[str, str]]:
    """The upstream's headers for the client: all but the hop-by-hop ones, its own x402 headers and (unless the
    service passes cookies) `Set-Cookie` (Content-Length is kept: the body is passed through byte for byte)."""
    upstream = list(upstream)
    named = {token.strip().lower() for k, v in upstream if k.lower() == "connection" for token in v.split(",")}
    dropped = (HOP_BY_HOP - {"content-length"}) | named | UPSTREAM_PAYMENT_HEADERS | (
        set() if cookies else COOKIES_OUT)
    return [(k, v) for k, v in upstream if k.lower() not in dropped]


def _node(address: str) -> str:
    """An address as RFC 7239 writes a node: IPv6 in brackets and quotes."""
    return f'"[{address}]"' if ":" in address else address


def raw_path(environ: Mapping[str, object]) -> str:
    """The request path as the client wrote it (percent-escapes intact), without the query."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if isinstance(raw, str) and raw.startswith("/"):
        return raw.split("?", 1)[0].split("#", 1)[0]
    path = str(environ.get("PATH_INFO") or "/")
    return quote(path.encode("latin-1"), safe="/!$&'()*+,;=:@-._~")


def answer_body(x: Any, response: OutboundResponse, source: str) -> Iterator[bytes]:
    """An upstream's body as the delivery command reads it (the HTTP proxy's and the MCP gateway's alike): a break is
    the upstream's failure (`UpstreamFailedError`), the bytes passed on are counted, the response closed at the end."""
    sent = 0
    try:
        for chunk in response.stream():
            sent += len(chunk)
            yield chunk
    except OutboundError as broken:
        raise UpstreamFailedError(broken.reason, f"{source} answer broke off: {broken.message}") from None
    finally:
        response.close()
        metrics.bytes_streamed(x, "response", sent)
