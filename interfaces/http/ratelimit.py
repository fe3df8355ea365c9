"""Rate limits with the `limits` library: per API key on the payment API, per client IP on public endpoints.

Storage is Redis when `PAYWARDEN_REDIS_URL` is set (shared by every worker and host), memory otherwise. Over the
limit: 429 with `Retry-After` in whole seconds and {"error": "rate_limited", "message": ...}.
"""

from __future__ import annotations

import ipaddress
import math
import time

import falcon
from limits import RateLimitItem, parse, storage, strategies

from domain.clients import ANONYMOUS_ID


class RateLimited(Exception):
    def __init__(self, retry_after: int, limit: str) -> None:
        super().__init__(f"rate limit of {limit} exceeded")
        self.retry_after, self.limit = retry_after, limit


def client_ip(req: falcon.Request, trusted: tuple[str, ...]) -> str:
    """The caller's address; `X-Forwarded-For` counts only when the direct peer is a trusted proxy."""
    remote = req.remote_addr or "unknown"
    if not trusted or not _trusted(remote, trusted):
        return remote
    hops = [h.strip() for h in (req.get_header("X-Forwarded-For") or "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, trusted):
            return hop
    return hops[0] if hops else remote


def _trusted(address: str, trusted: tuple[str, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(net, strict=False) for net in trusted)


class RateLimiter:
    def __init__(self, storage_uri: str, per_key: str, per_ip: str) -> None:
        # On Redis, fail fast (1 s) when it is unreachable: the request then fails (500), it does not hang.
        options = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0} if storage_uri.startswith("redis") else {}
        self._storage = storage.storage_from_string(storage_uri, **options)
        # A moving window: "100 per minute" holds over any 60 seconds, not 200 across a fixed window's edge.
        self._limiter = strategies.MovingWindowRateLimiter(self._storage)
        self.per_key, self.per_ip = parse(per_key), parse(per_ip)

    def check(self, item: RateLimitItem, *identity: str) -> None:
        if not self._limiter.hit(item, *identity):
            reset, _ = self._limiter.get_window_stats(item, *identity)
            raise RateLimited(max(1, math.ceil(reset - time.time())), str(item))

    def check_key(self, merchant_id: str, per_minute: int | None) -> None:
        item = parse(f"{per_minute}/minute") if per_minute else self.per_key
        self.check(item, "key", merchant_id)

    def check_ip(self, address: str, scope: str) -> None:
        self.check(self.per_ip, "ip", scope, address)


class RateLimitMiddleware:
    """After authentication: resources declare `rate_limit = "key"` (payment API) or `"ip"` (public)."""

    def __init__(self, limiter: RateLimiter, trusted_proxies: tuple[str, ...]) -> None:
        self._limiter, self._trusted = limiter, trusted_proxies

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict) -> None:
        scope = getattr(resource, "rate_limit", None)
        if scope is None:
            return
        client = getattr(req.context, "client", None)
        if scope == "key" and client is not None and client.id != ANONYMOUS_ID:
            self._limiter.check_key(client.id, client.rate_limit_per_minute)
        else:
            self._limiter.check_ip(client_ip(req, self._trusted), scope)
