"""What the proxy sends upstream and what it passes back: header rules (SPEC.md "Transparent proxy forwarding")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import quote

# x402's client headers and credentials never leave the proxy; hop-by-hop headers are per connection (RFC 9110
# 7.6.1); Host and Content-Length are set by the client library for the upstream connection; a client cannot
# forge the payment hash.
STRIPPED = frozenset({
    "payment-signature", "authorization", "x-payment", "sign-in-with-x", "payment-retry", "payment-recovery",
    "x-paywarden-payment-hash", "proxy-authorization", "cookie2",
})
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
})
PAYMENT_HASH_HEADER = "X-Paywarden-Payment-Hash"


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


def upstream_headers(incoming: Iterable[tuple[str, str]], payment_hash: str,
                     auth: tuple[str, str] | None) -> list[tuple[str, str]]:
    incoming = list(incoming)
    named_by_connection = {token.strip().lower() for k, v in incoming if k.lower() == "connection"
                           for token in v.split(",")}
    dropped = STRIPPED | HOP_BY_HOP | named_by_connection | ({auth[0].lower()} if auth else set())
    kept = [(k, v) for k, v in incoming if k.lower() not in dropped]
    kept.append((PAYMENT_HASH_HEADER, payment_hash))
    if auth is not None:
        kept.append(auth)
    return kept


def response_headers(upstream: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The upstream's headers for the client: all but the hop-by-hop ones (Content-Length is kept: the body is
    passed through byte for byte)."""
    upstream = list(upstream)
    named = {token.strip().lower() for k, v in upstream if k.lower() == "connection" for token in v.split(",")}
    dropped = (HOP_BY_HOP - {"content-length"}) | named
    return [(k, v) for k, v in upstream if k.lower() not in dropped]


def raw_path(environ: Mapping[str, object]) -> str:
    """The request path as the client wrote it (percent-escapes intact), without the query."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if isinstance(raw, str) and raw.startswith("/"):
        return raw.split("?", 1)[0].split("#", 1)[0]
    path = str(environ.get("PATH_INFO") or "/")
    return quote(path.encode("latin-1"), safe="/!$&'()*+,;=:@-._~")
