"""Rate limits with the `limits` library: per API key on the payment API, per client IP on public endpoints and
on failed authentication.

- `key`: each API key has its own budget (`PAYWARDEN_RATE_LIMIT_PER_KEY`, or its merchant's `set-rate-limit`
  override, which applies to each of the merchant's keys), counted by the key's SHA-256.
- `ip`: discovery and the anonymous identity, per client IP and endpoint scope (`PAYWARDEN_RATE_LIMIT_PER_IP`).
- `auth`: failed authentications (missing, malformed, unknown or revoked key) per client IP, with the per-IP
  budget; once it is spent, every authenticated request from that IP is 429 until the window frees a slot, so a
  key guesser is slowed down and cannot tell a right guess from a wrong one by the answer.

Storage is Redis when `PAYWARDEN_REDIS_URL` is set (shared by every worker and host: `RedisWindows`, keys of our
own, interfaces/adapters/redis_windows.py), memory otherwise (the same moving window, `MemoryWindows`: a deque of
hit times per key instead of the library's list, which inserts at its head and is re-sliced by a timer every
10 ms). `limits` gives the notation (`100/minute`) and each window's key; the console's login throttle uses its
storage and strategy through their public API (interfaces/http/console/security.py). Over the limit: 429 with
`Retry-After` in whole seconds and {"error": "rate_limited", "message": ...}. Client IPs believe
`X-Forwarded-For` only from `PAYWARDEN_TRUSTED_PROXIES`.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import falcon
from limits import RateLimitItem, parse, storage

from domain.clients import ANONYMOUS_ID
from interfaces.adapters.redis import redis_client
from interfaces.adapters.redis_windows import RedisWindows, Window


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


class MemoryWindows:
    """`limits`' moving window (`MovingWindowRateLimiter` over its memory storage), with each key's hit times in a
    deque, oldest first: a hit is admitted when fewer than `amount` hits of the key are younger than the expiry (a hit
    exactly `expiry` old still counts, as the library counts it), and the older ones leave from the left, so a hit
    costs O(1) whatever the budget. Keys idle for longer than their expiry are dropped at most every 10 seconds.
    One lock: exact under threads as under gevent."""

    SWEEP_SECONDS = 10.0
    MAX_KEYS = 10_000  # window keys kept made (a bound: past it they are made again)

    def __init__(self) -> None:
        self._windows: dict[str, tuple[float, deque[float]]] = {}
        # Each window's key and expiry as `limits` makes them (`key_for`, `get_expiry`: ~2 µs a window), kept per
        # item and identifiers (and namespace, which items' equality leaves out and their keys do not).
        self._keys: dict[tuple[str, RateLimitItem, Sequence[str]], tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._next_sweep = time.time() + self.SWEEP_SECONDS

    def admit(self, *windows: Window) -> tuple[int, int] | None:
        """As `RedisWindows.admit`: None when every window has room (an entry is then taken in each window marked
        so), else the index of the first full window and the whole seconds until it frees a slot (at least 1)."""
        now = time.time()
        with self._lock:
            if now >= self._next_sweep:
                self._sweep(now)
            found = [self._hits(item, identifiers, now) for item, identifiers, _ in windows]
            for index, ((item, _, _), hits) in enumerate(zip(windows, found, strict=True)):
                if len(hits) >= item.amount:
                    return index, max(1, math.ceil((hits[0] if hits else now) + item.get_expiry() - now))
            for (_, _, take), hits in zip(windows, found, strict=True):
                if take:
                    hits.append(now)
        return None

    def _hits(self, item: RateLimitItem, identifiers: Sequence[str], now: float) -> deque[float]:
        made = (item.namespace, item, identifiers)
        if (known := self._keys.get(made)) is None:
            if len(self._keys) >= self.MAX_KEYS:
                self._keys.clear()
            known = self._keys[made] = (item.key_for(*identifiers), item.get_expiry())
        key, expiry = known
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = (expiry, deque())
        return self._current(window[1], now - expiry)

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
        # A moving window: "100 per minute" holds over any 60 seconds, not 200 across a fixed window's edge.
        self.windows: MemoryWindows | RedisWindows = (
            MemoryWindows() if storage_uri.startswith("memory") else RedisWindows(redis_client(storage_uri)))

    def admit_key(self, address: str, key_id: str, per_minute: int | None) -> None:
        """An authenticated request: refused when its IP has spent its failed-authentication budget, else one
        request of its key's budget (both at once: one Redis round trip)."""
        item = per_minute_item(per_minute) if per_minute else self.per_key
        self._admit((self.per_ip, ("auth", address), False, "auth"), (item, ("key", key_id), True, "key"))

    def check(self, item: RateLimitItem, *identity: str, scope: str = "key") -> None:
        self._admit((item, identity, True, scope))

    def check_key(self, key_id: str, per_minute: int | None) -> None:
        """One API key's request (`key_id`: its SHA-256); `per_minute` is its merchant's override, if any."""
        item = per_minute_item(per_minute) if per_minute else self.per_key
        self.check(item, "key", key_id)

    def check_ip(self, address: str, scope: str) -> None:
        self.check(self.per_ip, "ip", scope, address, scope="ip")

    def check_auth_failures(self, address: str) -> None:
        """Before a key is looked up: refuse when this IP has spent its budget of failed authentications."""
        self._admit((self.per_ip, ("auth", address), False, "auth"))

    def auth_failed(self, address: str) -> None:
        self.windows.admit((self.per_ip, ("auth", address), True))

    def _admit(self, *windows: tuple[RateLimitItem, tuple[str, ...], bool, str]) -> None:
        """Every window has room (and an entry is taken in those marked so), or RateLimited by the first full one."""
        refused = self.windows.admit(*[(item, identity, take) for item, identity, take, _ in windows])
        if refused is not None:
            index, retry_after = refused
            item, _, _, scope = windows[index]
            raise RateLimited(retry_after, str(item), scope)


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
