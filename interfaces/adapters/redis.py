"""Redis adapters of the ports, shared by every worker and host: the per-payment lock, the terminal result cache and
the discovery query cache. Their in-process twins are in `interfaces/adapters/memory.py`.

Keys (one Redis database, no cluster hash slots needed):
- `paywarden:lock:<idempotency key>`: the lock, holding its owner's random token, with an expiry (PX);
- `paywarden:result:<operation>:<idempotency key>`: a terminal result, {"terms": digest, "outcome": {...}};
- `paywarden:result_cache:payment:<payment id>`: what the cache projection keeps of a payment until its results;
- `paywarden:result_cache:tracking:<application>`: the cache projection's position in the notification log.

The event store is the authority: a cache read that fails is a miss. A lock
that cannot be taken because Redis is down raises, so the request fails (500) rather than run unguarded.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import redis
from eventsourcing.persistence import IntegrityError, Tracking
from redis.backoff import NoBackoff
from redis.retry import Retry

from application.ports import DISCOVERY_TTL_SECONDS
from projections.results import ResultCacheView, load_entry

PREFIX = "paywarden"
RESULT_TTL_SECONDS = 24 * 3600
log = logging.getLogger("paywarden.redis")
cache_log = logging.getLogger("paywarden.cache")


def redis_client(url: str, *, timeout_seconds: float = 1.0) -> redis.Redis:
    """A client that fails fast (one retry, 1 s socket timeouts) and reconnects on the next command by itself."""
    return redis.Redis.from_url(
        url, socket_connect_timeout=timeout_seconds, socket_timeout=timeout_seconds,
        retry=Retry(NoBackoff(), 1), health_check_interval=30,
    )


def lock_key(key: str) -> str:
    return f"{PREFIX}:lock:{key}"


def result_key(key: str, operation: str) -> str:
    return f"{PREFIX}:result:{operation}:{key}"


class RedisLocks:
    """Implements `Locks`: SET NX PX with a random token; released only by its owner; a dead owner's lock expires."""

    _RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._release = client.register_script(self._RELEASE)

    @contextmanager
    def hold(self, key: str, ttl_seconds: float) -> Iterator[bool]:
        name, token = lock_key(key), secrets.token_hex(16)
        acquired = self._acquire(name, token, max(1, int(ttl_seconds * 1000)))
        try:
            yield acquired
        finally:
            if acquired:
                self._release_quietly(name, token)

    def _acquire(self, name: str, token: str, ttl_ms: int) -> bool:
        if self._client.set(name, token, nx=True, px=ttl_ms):
            return True
        # A SET retried after a lost reply finds its own token: that is still our lock.
        return self._client.get(name) == token.encode()

    def release(self, key: str, token: str) -> bool:
        """Delete the lock if `token` still owns it; True if it did."""
        return bool(self._release(keys=[lock_key(key)], args=[token]))

    def _release_quietly(self, name: str, token: str) -> None:
        try:
            self._release(keys=[name], args=[token])
        except redis.RedisError as down:
            # The work is recorded; the lock frees itself at its expiry. Failing the request now would lie.
            log.warning("could not release %s (%s); it expires by itself", name, down)


class RedisResultCache:
    """Implements `ResultCache` over Redis, read-only (`ResultCacheProjection` fills it, through
    `RedisResultCacheView`). A read that fails is a miss, never a failure: the event store answers."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def get(self, key: str, operation: str) -> dict[str, Any] | None:
        try:
            raw = self._client.get(result_key(key, operation))
        except redis.RedisError as down:
            log.debug("result cache unavailable (%s): answering from the event store", down)
            return None
        return load_entry(raw)


class RedisAdmission:
    """Implements `Admission`: the terminal result's read and, on a miss, the lock (`RedisLocks`' SET NX PX with a
    random token) in one Lua script, one round trip instead of two. A script retried after a lost reply finds
    its own token: still our lock. Redis unreachable: raises, as taking the lock alone would (nothing runs
    unguarded); the release is `RedisLocks`' compare-and-delete."""

    _ADMIT = """
local cached = redis.call('GET', KEYS[1])
if cached then return {cached, 0} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'', 1} end
if redis.call('GET', KEYS[2]) == ARGV[1] then return {'', 1} end
return {'', 0}
"""

    def __init__(self, client: redis.Redis, locks: RedisLocks) -> None:
        self._admit, self._locks = client.register_script(self._ADMIT), locks

    @contextmanager
    def admit(self, key: str, operation: str, ttl_seconds: float) -> Iterator[tuple[dict[str, Any] | None, bool]]:
        name, token = lock_key(key), secrets.token_hex(16)
        raw, held = self._admit(keys=[result_key(key, operation), name],
                                args=[token, max(1, int(ttl_seconds * 1000))])
        cached = load_entry(raw) if raw else None
        try:
            yield cached, bool(held)
        finally:
            if held:
                self._locks._release_quietly(name, token)


class RedisResultCacheView(ResultCacheView):
    """The result cache as the view of `ResultCacheProjection`: each event's writes and its tracking position
    are applied by one Lua script, so an event is applied once even with several runners."""

    _RECORD = """
local position = tonumber(redis.call('GET', KEYS[1]) or '0')
if position >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
for i = 2, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 1], 'EX', ARGV[2]) end
return 1
"""

    def __init__(self, client: redis.Redis, *, ttl_seconds: int = RESULT_TTL_SECONDS) -> None:
        self._client, self._ttl = client, ttl_seconds
        self._record = client.register_script(self._RECORD)

    def max_tracking_id(self, application_name: str) -> int | None:
        raw = self._client.get(self._tracking_key(application_name))
        return int(raw) if raw is not None else None

    def insert_tracking(self, tracking: Tracking) -> None:
        self.record(tracking)

    def payment(self, payment_id: str) -> dict[str, Any] | None:
        return load_entry(self._client.get(self._payment_key(payment_id)))

    def record(self, tracking: Tracking, *, payment_id: str | None = None, payment: dict[str, Any] | None = None,
               results: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        keys, values = [self._tracking_key(tracking.application_name)], []
        if payment_id is not None and payment is not None:
            keys.append(self._payment_key(payment_id))
            values.append(json.dumps(payment, separators=(",", ":")))
        for (key, operation), result in (results or {}).items():
            keys.append(result_key(key, operation))
            values.append(json.dumps(result, separators=(",", ":")))
        if not self._record(keys=keys, args=[tracking.notification_id, self._ttl, *values]):
            raise IntegrityError(f"{tracking.application_name} notification {tracking.notification_id} was applied")

    @staticmethod
    def _tracking_key(application_name: str) -> str:
        return f"{PREFIX}:result_cache:tracking:{application_name}"

    @staticmethod
    def _payment_key(payment_id: str) -> str:
        return f"{PREFIX}:result_cache:payment:{payment_id}"


class RedisQueryCache:
    """Shared by every worker and host: one JSON value per query, expired by Redis."""

    def __init__(self, client: redis.Redis, ttl: int = DISCOVERY_TTL_SECONDS, *,
                 prefix: str = "paywarden:discovery:") -> None:
        self._redis, self._ttl, self._prefix = client, ttl, prefix

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            raw = self._redis.get(self._prefix + key)
        except redis.RedisError as down:
            cache_log.warning("discovery cache unavailable: %s", down)
            return None
        return json.loads(raw) if raw is not None else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self._redis.set(self._prefix + key, json.dumps(value, separators=(",", ":")), ex=self._ttl)
        except redis.RedisError as down:
            cache_log.warning("discovery cache unavailable: %s", down)
