"""Outbound HTTP that a merchant's URL cannot turn against us (OWASP SSRF prevention), over urllib3.

One `OutboundClient` serves every outbound call Paywarden makes to an address a merchant chose (the proxy's
upstream, webhook deliveries, domain checks). Per request it:

- accepts `https://` only (and `http://` when the policy allows it, the sandbox's `http://localhost:<port>`), no
  user-info in the URL;
- resolves the host ONCE and checks every answer: in production a loopback, private, link-local, shared, reserved,
  multicast, unspecified or cloud metadata address refuses the request, and so does an IPv6 address that embeds one
  (IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64);
- connects to the checked address (no second lookup a DNS rebinding could answer differently), with the URL's
  hostname kept for TLS (SNI and certificate check) and for the `Host` header;
- follows no redirect (a 3xx is returned as it came), retries nothing;
- bounds the connect time, the time until the response headers, the wait for each body chunk and the whole body's
  duration, and the size of the response headers; given a `deadline`, the whole request too (`deadline.py`);
- streams the response body as it arrives (`OutboundResponse.stream()`), never reading it whole.

Connections are pooled per (address, port, hostname): a keep-alive connection goes back only to the address that
was checked for that request. Under gevent (gunicorn's worker) the sockets are gevent's, so waits yield.
"""

from __future__ import annotations

import ipaddress
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypedDict, Unpack
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    MaxRetryError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

from interfaces.adapters.deadline import Deadline, WatchedHTTPPool, WatchedHTTPSPool, armed

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata and platform endpoints that are not all caught by "not global" (Azure's wire server is a
# public address); refused in production whatever the resolver says.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "100.100.100.200", "168.63.129.16", "fd00:ec2::254",
))
NAT64_NETWORKS = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
READ_CHUNK = 64 * 1024


class Resolver(Protocol):
    """Every address a hostname resolves to, as written; empty when it does not resolve."""

    def resolve(self, hostname: str) -> list[str]: ...


class OutboundError(Exception):
    """An outbound request that was not made or did not complete; `reason` is a stable code for logs and bodies."""

    reason = "upstream_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OutboundRefused(OutboundError):
    """Refused before any byte was sent: a bad URL, a host that does not resolve, or a forbidden address."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class UpstreamTimeout(OutboundError):
    reason = "upstream_timeout"


class UpstreamUnreachable(OutboundError):
    reason = "upstream_unreachable"


class UpstreamProtocolError(OutboundError):
    reason = "upstream_protocol_error"


class Timeouts(TypedDict, total=False):
    """The timeouts a mode's policy may be given (seconds), as `OutboundPolicy`'s fields of the same names."""

    connect_timeout: float
    response_timeout: float
    read_timeout: float
    max_duration: float


@dataclass(frozen=True)
class OutboundPolicy:
    """What the client may reach and how long it waits. Production refuses every non-public address."""

    allow_private: bool = False  # sandbox only: localhost and private addresses are reachable
    allow_http: bool = False  # sandbox only: plain http:// URLs
    connect_timeout: float = 5.0
    response_timeout: float = 30.0  # connect + request + until the response headers are in
    read_timeout: float = 30.0  # longest wait for one chunk of the body
    max_duration: float = 600.0  # longest a body may stream
    max_header_bytes: int = 32 * 1024  # the response's status line and headers together

    @classmethod
    def for_mode(cls, sandbox: bool, **overrides: Unpack[Timeouts]) -> OutboundPolicy:
        return cls(allow_private=sandbox, allow_http=sandbox, **overrides)



def forbidden_reason(address: Address) -> str | None:
    """Why production must not connect to `address`, or None when it is a public unicast address."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        inner = forbidden_reason(embedded) if embedded is not None else None
        if inner:
            return f"an IPv6 form of {embedded}, {inner}"
        if embedded is not None and address.ipv4_mapped is not None:
            return None  # a socket connects to the IPv4 address itself
    if address.is_multicast:
        return "a multicast address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "a reserved or non-public address"
    return None


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, 6to4, Teredo client, NAT64), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in net for net in NAT64_NETWORKS):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if int(address) >> 32 == 0 and int(address) > 1:  # ::a.b.c.d, the deprecated IPv4-compatible form
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (`address`), and what to call the host (`hostname`, for SNI and Host)."""

    scheme: str
    hostname: str
    port: int
    address: str
    path: str  # path and query, as sent in the request line

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return host if self.port == default else f"{host}:{self.port}"


@dataclass
class OutboundResponse:
    """A response whose body has not been read: `stream()` yields it as it arrives; always `close()` it."""

    status: int
    headers: list[tuple[str, str]]
    _raw: urllib3.BaseHTTPResponse
    _policy: OutboundPolicy
    _released: bool = field(default=False)
    _deadline: Deadline | None = None

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self.headers if k.lower() == lowered), None)

    def stream(self) -> Iterator[bytes]:
        """The body's bytes as the upstream sends them (content encoding untouched); each wait is bounded by
        `read_timeout`, the whole by `max_duration`."""
        deadline = time.monotonic() + self._policy.max_duration
        try:
            while True:
                try:
                    chunk = self._raw.read1(READ_CHUNK, decode_content=False)
                except ReadTimeoutError as slow:
                    raise UpstreamTimeout(f"the upstream sent nothing for {self._policy.read_timeout}s") from slow
                except (ProtocolError, HTTPError, OSError) as broken:
                    if self._deadline is not None and self._deadline.expired:
                        raise UpstreamTimeout("the request did not complete before its deadline") from broken
                    raise UpstreamProtocolError(f"the upstream's body broke off: {broken}") from broken
                if self._deadline is not None and self._deadline.expired:
                    raise UpstreamTimeout("the request did not complete before its deadline")
                if not chunk:
                    self._release()
                    return
                yield chunk
                if time.monotonic() > deadline:
                    raise UpstreamTimeout(f"the upstream's body streamed longer than {self._policy.max_duration}s")
        finally:
            self.close()

    def read(self, limit: int) -> bytes:
        """The whole body, for small answers (webhook acknowledgements); more than `limit` bytes is an error."""
        body = bytearray()
        for chunk in self.stream():
            body += chunk
            if len(body) > limit:
                self.close()
                raise UpstreamProtocolError(f"the upstream's body is over {limit} bytes")
        return bytes(body)

    def _release(self) -> None:
        if not self._released:
            self._released = True
            if self._deadline is not None:
                self._deadline.cancel()
            self._raw.release_conn()

    def close(self) -> None:
        """Drop the connection unless the body was read to its end (then it went back to the pool)."""
        if not self._released:
            self._released = True
            if self._deadline is not None:
                self._deadline.cancel()
            self._raw.close()
            self._raw.release_conn()


class OutboundClient:
    """Requests to merchant-chosen URLs under an `OutboundPolicy`; see the module's docstring."""

    def __init__(self, resolver: Resolver, policy: OutboundPolicy = OutboundPolicy(), *,
                 ssl_context: ssl.SSLContext | None = None, max_pools: int = 256, pool_size: int = 10) -> None:
        self._resolver, self.policy = resolver, policy
        self._ssl_context = ssl_context or ssl.create_default_context()
        self._pools: OrderedDict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = OrderedDict()
        self._max_pools, self._pool_size = max_pools, pool_size
        self._lock = threading.Lock()

    def target(self, url: str) -> Target:
        """Check the URL and resolve its host once; raise `OutboundRefused` when the policy forbids it."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as bad:
            raise OutboundRefused("invalid_url", f"{url!r} is not a URL: {bad}") from bad
        allowed = ("https", "http") if self.policy.allow_http else ("https",)
        if parts.scheme not in allowed:
            raise OutboundRefused("invalid_url", f"only {' and '.join(allowed)} URLs may be called, not {url!r}")
        if parts.username is not None or parts.password is not None:
            raise OutboundRefused("invalid_url", "a URL with user information is refused")
        hostname = (parts.hostname or "").rstrip(".")
        if not hostname:
            raise OutboundRefused("invalid_url", f"{url!r} has no host")
        port = port or (443 if parts.scheme == "https" else 80)
        address = self._checked_address(hostname)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return Target(parts.scheme, hostname, port, address, path)

    def _checked_address(self, hostname: str) -> str:
        try:
            literal: Address | None = ipaddress.ip_address(hostname)
        except ValueError:
            literal = None
        answers = [str(literal)] if literal is not None else self._resolver.resolve(hostname)
        if not answers:
            raise OutboundRefused("unresolvable", f"{hostname} does not resolve")
        addresses: list[Address] = []
        for answer in answers:
            try:
                addresses.append(ipaddress.ip_address(answer.split("%", 1)[0]))
            except ValueError as bad:
                raise OutboundRefused("unresolvable", f"{hostname} resolved to {answer!r}") from bad
        if not self.policy.allow_private:
            for address in addresses:
                if reason := forbidden_reason(address):
                    raise OutboundRefused("forbidden_address", f"{hostname} resolves to {address}, {reason}")
        return str(addresses[0])

    def request(self, method: str, url: str, headers: Iterable[tuple[str, str]] = (),
                body: bytes | Iterable[bytes] | None = None, *, deadline: float | None = None) -> OutboundResponse:
        """Send one request to the checked address of `url`; the response's body is left to stream.

        With `deadline` (a `time.monotonic()` moment) the whole exchange, until the response is closed, ends by
        then: past it, whatever is still waiting is cut off and reported as `UpstreamTimeout`."""
        target = self.target(url)
        sent = [(k, v) for k, v in headers if k.lower() != "host"] + [("Host", target.host_header)]
        sized = isinstance(body, bytes) or any(k.lower() == "content-length" for k, _ in sent)
        pool = self._pool(target)
        connect, response = self.policy.connect_timeout, self.policy.response_timeout
        watch = Deadline(deadline) if deadline is not None else None
        if watch is not None:
            if watch.remaining() <= 0:
                raise UpstreamTimeout(f"{target.hostname}: no time left before the deadline")
            connect, response = min(connect, watch.remaining()), min(response, watch.remaining())
            watch.start()
        timeout = urllib3.Timeout(connect=connect, read=self.policy.read_timeout, total=response)
        try:
            with armed(watch):
                raw = self._open(pool, target, method, sent, body, timeout, chunked=body is not None and not sized)
        except OutboundError as failed:
            if watch is not None:
                watch.cancel()
                if watch.expired:
                    raise UpstreamTimeout(f"{target.hostname} did not complete the exchange in time") from failed
            raise
        response_headers = list(raw.headers.items())
        size = sum(len(k) + len(v) + 4 for k, v in response_headers)
        if size > self.policy.max_header_bytes:
            if watch is not None:
                watch.cancel()
            raw.close()
            raw.release_conn()
            raise UpstreamProtocolError(f"{target.hostname}'s response headers are {size} bytes, over "
                                        f"{self.policy.max_header_bytes}")
        return OutboundResponse(raw.status, response_headers, raw, self.policy, _deadline=watch)

    @staticmethod
    def _open(pool: urllib3.HTTPConnectionPool, target: Target, method: str, sent: list[tuple[str, str]],
              body: bytes | Iterable[bytes] | None, timeout: urllib3.Timeout, *,
              chunked: bool) -> urllib3.BaseHTTPResponse:
        try:
            return pool.urlopen(
                method, target.path, body=body, headers=urllib3.HTTPHeaderDict(sent), retries=False,
                redirect=False, assert_same_host=False, timeout=timeout, preload_content=False,
                decode_content=False, release_conn=False, chunked=chunked,
            )
        except (NewConnectionError, SSLError) as refused:  # before ConnectTimeoutError: urllib3 subclasses it
            raise UpstreamUnreachable(f"{target.hostname} ({target.address}) is unreachable: {refused}") \
                from refused
        except (ConnectTimeoutError, ReadTimeoutError) as slow:
            raise UpstreamTimeout(f"{target.hostname} did not answer in time") from slow
        except MaxRetryError as failed:
            if isinstance(failed.reason, (ConnectTimeoutError, ReadTimeoutError)) and \
                    not isinstance(failed.reason, NewConnectionError):
                raise UpstreamTimeout(f"{target.hostname} did not answer in time") from failed
            raise UpstreamUnreachable(f"{target.hostname} ({target.address}) is unreachable: {failed.reason}") \
                from failed
        except (ProtocolError, HTTPError, OSError) as broken:
            raise UpstreamProtocolError(f"{target.hostname} broke off the exchange: {broken}") from broken

    def _pool(self, target: Target) -> urllib3.HTTPConnectionPool:
        key = (target.scheme, target.address, target.port, target.hostname)
        with self._lock:
            pool = self._pools.get(key)
            if pool is not None:
                self._pools.move_to_end(key)
                return pool
            if target.scheme == "https":
                pool = WatchedHTTPSPool(
                    target.address, target.port, maxsize=self._pool_size, block=False,
                    server_hostname=target.hostname, assert_hostname=target.hostname,
                    ssl_context=self._ssl_context,
                )
            else:
                pool = WatchedHTTPPool(target.address, target.port, maxsize=self._pool_size, block=False)
            self._pools[key] = pool
            while len(self._pools) > self._max_pools:
                _, old = self._pools.popitem(last=False)
                old.close()
            return pool

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
