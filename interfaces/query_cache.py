"""The discovery query cache (60 seconds, SPEC.md): in-process by default, Redis when PAYWARDEN_REDIS_URL is set.

A miss is never an error: the catalog view answers. Redis being down degrades to no cache, logged.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import redis

log = logging.getLogger("paywarden.cache")
DISCOVERY_TTL_SECONDS = 60


class QueryCache(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, value: dict[str, Any]) -> None: ...


class TtlCache:
    """Entries expire `ttl` seconds after they were put, by `clock` (injectable); the oldest go first when full."""

    def __init__(self, ttl: float = DISCOVERY_TTL_SECONDS, *, clock: Callable[[], float] = time.monotonic,
                 capacity: int = 1024) -> None:
        self._ttl, self._clock, self._capacity = ttl, clock, capacity
        self._entries: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._mutex = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._mutex:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self._clock() >= entry[0]:
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._mutex:
            self._entries.pop(key, None)
            while len(self._entries) >= self._capacity:
                self._entries.popitem(last=False)
            self._entries[key] = (self._clock() + self._ttl, value)


class RedisQueryCache:
    """Shared by every worker and host: one JSON value per query, expired by Redis."""

    def __init__(self, client: redis.Redis, ttl: int = DISCOVERY_TTL_SECONDS, *,
                 prefix: str = "paywarden:discovery:") -> None:
        self._redis, self._ttl, self._prefix = client, ttl, prefix

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            raw = self._redis.get(self._prefix + key)
        except redis.RedisError as down:
            log.warning("discovery cache unavailable: %s", down)
            return None
        return json.loads(raw) if raw is not None else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self._redis.set(self._prefix + key, json.dumps(value, separators=(",", ":")), ex=self._ttl)
        except redis.RedisError as down:
            log.warning("discovery cache unavailable: %s", down)
