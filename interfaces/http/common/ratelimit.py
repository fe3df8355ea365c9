"""Rate limits with the `limits` library: per API key on the payment API, per client IP on public endpoints and
on failed authentication.

- `key`: each API key has its own budget (`PAYWARDEN_RATE_LIMIT_PER_KEY`, or its merchant's `set-rate-limit`
  override, which applies to each of the merchant's keys), counted by the key's SHA-256.
- `ip`: discovery and the anonymous identity, per client IP and endpoint scope (`PAYWARDEN_RATE_LIMIT_PER_IP`).
- `auth`: failed authentications (missing, malformed, unknown or revoked key) per client IP, with the per-IP
  budget; once it is spent, every authenticated request from that IP is 429 until the window frees a slot, so a
  key guesser is slowed down and cannot tell a right guess from a wrong one by the answer.

Storage is Redis when `PAYWARDEN_REDIS_URL` is set (shared by every worker and host), memory otherwise (the same
moving window, `MemoryWindows`: a deque of hit times per key instead of the library's list, which inserts at its head
and is re-sliced by a timer every 10 ms). Over the limit: 429 with `Retry-After` in whole seconds and
{"error": "rate_limited", "message": ...}. Client IPs believe `X-Forwarded-For` only from
`PAYWARDEN_TRUSTED_PROXIES`.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import threading
import time
from collections import deque
from typing import Any

import falcon
from limits import RateLimitItem, WindowStats, parse, storage, strategies

from domain.clients import ANONYMOUS_ID


class RateLimited(Exception):
    def __init__(self, retry_after: int, limit: str, scope: str = "key") -> None:
        super().__init__(f"rate limit of {limit} exceeded")
        self.retry_after, self.limit, self.scope = retry_after, limit, scope


def client_ip(req: falcon.Request, trusted: tuple[str, ...]) -> str:
    """The caller's address; `X-Forwarded-For` counts only when the direct peer is a trusted proxy."""
    remote = req.remote_addr or "unknown"
    if not trusted or not is_trusted(remote, trusted):
        return remote
    hops = [h.strip() for h in (req.get_header("X-Forwarded-For") or "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else remote


def is_trusted(address: str, trusted: tuple[str, ...]) -> bool:
    """Whether `address` is one of the trusted proxies (addresses or CIDRs, PAYWARDEN_TRUSTED_PROXIES)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(net, strict=False) for net in trusted)


# One round trip for an authenticated request on Redis: is the client IP's failed-authentication budget spent
# (tested as `limits` tests a moving window), else take one entry of the API key's window (as `limits` acquires
# one: the same keys, list layout and trimming, so its own calls read and count them exactly as before).
# KEYS: the IP's auth window, the key's window. ARGV: now, auth limit, auth expiry, key limit, key expiry.
# Answers 0 (admitted), 1 (the IP's auth budget is spent), 2 (the key's budget is spent).
_ADMIT = """
local now = tonumber(ARGV[1])
local spent = redis.call('lindex', KEYS[1], tonumber(ARGV[2]) - 1)
if spent and tonumber(spent) >= now - tonumber(ARGV[3]) then return 1 end
local limit, expiry = tonumber(ARGV[4]), tonumber(ARGV[5])
local oldest = redis.call('lindex', KEYS[2], limit - 1)
if oldest and tonumber(oldest) >= now - expiry then return 2 end
redis.call('lpush', KEYS[2], ARGV[1])
redis.call('ltrim', KEYS[2], 0, limit - 1)
redis.call('expire', KEYS[2], expiry)
return 0
"""


class MemoryWindows:
    """`limits`' moving window (`MovingWindowRateLimiter` over its memory storage), with each key's hit times in a
    deque, oldest first: a hit is admitted when fewer than `amount` hits of the key are younger than the expiry (a hit
    exactly `expiry` old still counts, as the library counts it), and the older ones leave from the left, so a hit
    costs O(1) whatever the budget. Keys idle for longer than their expiry are dropped at most every 10 seconds.
    One lock: exact under threads as under gevent."""

    SWEEP_SECONDS = 10.0

    def __init__(self) -> None:
        self._windows: dict[str, tuple[float, deque[float]]] = {}
        self._lock = threading.Lock()
        self._next_sweep = time.time() + self.SWEEP_SECONDS

    def hit(self, item: RateLimitItem, *identifiers: str) -> bool:
        key, expiry, now = item.key_for(*identifiers), item.get_expiry(), time.time()
        with self._lock:
            if now >= self._next_sweep:
                self._sweep(now)
            window = self._windows.get(key)
            if window is None:
                window = self._windows[key] = (expiry, deque())
            hits = self._current(window[1], now - expiry)
            if len(hits) >= item.amount:
                return False
            hits.append(now)
            return True

    def test(self, item: RateLimitItem, *identifiers: str) -> bool:
        return self.get_window_stats(item, *identifiers).remaining > 0

    def get_window_stats(self, item: RateLimitItem, *identifiers: str) -> WindowStats:
        """(when the oldest hit in the window leaves it, the hits left): the library's window statistics."""
        expiry, now = item.get_expiry(), time.time()
        with self._lock:
            window = self._windows.get(item.key_for(*identifiers))
            hits = self._current(window[1], now - expiry) if window is not None else ()
            return WindowStats((hits[0] if hits else now) + expiry, item.amount - len(hits))

    @staticmethod
    def _current(hits: deque[float], oldest: float) -> deque[float]:
        while hits and hits[0] < oldest:
            hits.popleft()
        return hits

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + self.SWEEP_SECONDS
        for key, (expiry, hits) in list(self._windows.items()):
            if not hits or hits[-1] < now - expiry:
                del self._windows[key]


@functools.lru_cache(maxsize=1024)
def per_minute_item(per_minute: int) -> RateLimitItem:
    """A merchant's override as a `limits` item (parsed once per value)."""
    return parse(f"{per_minute}/minute")


def limits_storage(url: str) -> Any:
    """The `limits` storage for `PAYWARDEN_REDIS_URL` (or `memory://`). The configuration takes Redis URLs as
    redis-py reads them, `unix:///path?db=N` included, which `limits` names `redis+unix://`. On Redis, fail fast
    (1 s) when it is unreachable: the request then fails (500), it does not hang."""
    if url.startswith("unix://"):
        url = "redis+" + url
    options = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0} if url.startswith("redis") else {}
    return storage.storage_from_string(url, **options)


class RateLimiter:
    def __init__(self, storage_uri: str, per_key: str, per_ip: str) -> None:
        self.per_key, self.per_ip = parse(per_key), parse(per_ip)
        self._redis: Any = None
        self._admit: Any = None
        # A moving window: "100 per minute" holds over any 60 seconds, not 200 across a fixed window's edge.
        self._limiter: Any
        if storage_uri.startswith("memory"):
            self._limiter = MemoryWindows()
            return
        self._storage = limits_storage(storage_uri)
        self._limiter = strategies.MovingWindowRateLimiter(self._storage)
        self._redis = self._storage if isinstance(self._storage, storage.RedisStorage) else None
        self._admit = self._redis.storage.register_script(_ADMIT) if self._redis is not None else None

    def admit_key(self, address: str, key_id: str, per_minute: int | None) -> None:
        """An authenticated request: refused when its IP has spent its failed-authentication budget, else one
        request of its key's budget (both in one Redis round trip; two checks on the in-memory store)."""
        item = per_minute_item(per_minute) if per_minute else self.per_key
        if self._admit is None or self._redis is None:
            self.check_auth_failures(address)
            self.check_key(key_id, per_minute)
            return
        keys = [self._redis.prefixed_key(self.per_ip.key_for("auth", address)),
                self._redis.prefixed_key(item.key_for("key", key_id))]
        refused = self._admit(keys=keys, args=[time.time(), self.per_ip.amount, self.per_ip.get_expiry(),
                                               item.amount, item.get_expiry()])
        if refused == 1:
            raise self._limited(self.per_ip, ("auth", address), "auth")
        if refused == 2:
            raise self._limited(item, ("key", key_id), "key")

    def check(self, item: RateLimitItem, *identity: str, scope: str = "key") -> None:
        if not self._limiter.hit(item, *identity):
            raise self._limited(item, identity, scope)

    def check_key(self, key_id: str, per_minute: int | None) -> None:
        """One API key's request (`key_id`: its SHA-256); `per_minute` is its merchant's override, if any."""
        item = per_minute_item(per_minute) if per_minute else self.per_key
        self.check(item, "key", key_id)

    def check_ip(self, address: str, scope: str) -> None:
        self.check(self.per_ip, "ip", scope, address, scope="ip")

    def check_auth_failures(self, address: str) -> None:
        """Before a key is looked up: refuse when this IP has spent its budget of failed authentications."""
        if not self._limiter.test(self.per_ip, "auth", address):
            raise self._limited(self.per_ip, ("auth", address), "auth")

    def auth_failed(self, address: str) -> None:
        self._limiter.hit(self.per_ip, "auth", address)

    def _limited(self, item: RateLimitItem, identity: tuple[str, ...], scope: str) -> RateLimited:
        reset, _ = self._limiter.get_window_stats(item, *identity)
        return RateLimited(max(1, math.ceil(reset - time.time())), str(item), scope)


class FailedAuthLimit:
    """What the authentication middleware asks before and after looking a key up (the `auth` scope)."""

    def __init__(self, limiter: RateLimiter, trusted_proxies: tuple[str, ...]) -> None:
        self._limiter, self._trusted = limiter, trusted_proxies

    def admit(self, address: str, key_id: str, per_minute: int | None) -> None:
        """A key that authenticated: this IP's failed-authentication budget and the key's own, in one go."""
        self._limiter.admit_key(address, key_id, per_minute)

    def address(self, req: falcon.Request) -> str:
        return client_ip(req, self._trusted)

    def check(self, address: str) -> None:
        self._limiter.check_auth_failures(address)

    def failed(self, address: str) -> None:
        self._limiter.auth_failed(address)


class RateLimitMiddleware:
    """After authentication: resources declare `rate_limit = "key"` (payment API) or `"ip"` (public)."""

    def __init__(self, limiter: RateLimiter, trusted_proxies: tuple[str, ...]) -> None:
        self._limiter, self._trusted = limiter, trusted_proxies

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict) -> None:
        scope = getattr(resource, "rate_limit", None)
        if scope is None:
            return
        client = getattr(req.context, "client", None)
        key_id = getattr(req.context, "api_key_id", None)
        if getattr(req.context, "key_admitted", False):  # counted with the authentication (AuthMiddleware)
            return
        if scope == "key" and client is not None and client.id != ANONYMOUS_ID and key_id:
            self._limiter.check_key(key_id, client.rate_limit_per_minute)
        else:
            self._limiter.check_ip(client_ip(req, self._trusted), scope)
