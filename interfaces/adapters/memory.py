"""In-process adapters of the ports, for the embedded default (one process, no Redis): locks and the
discovery query cache (`TtlCache`). Their Redis twins are in `interfaces/adapters/redis.py`."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from application.ports import DISCOVERY_TTL_SECONDS


class InProcessLocks:
    """Per-key try-locks with expiry, shared by the threads (or greenlets) of one process."""

    def __init__(self) -> None:
        self._held: dict[str, float] = {}
        self._mutex = threading.Lock()

    @contextmanager
    def hold(self, key: str, ttl_seconds: float) -> Iterator[bool]:
        now = time.monotonic()
        with self._mutex:
            expiry = self._held.get(key)
            acquired = expiry is None or expiry <= now
            if acquired:
                self._held[key] = now + ttl_seconds
        try:
            yield acquired
        finally:
            if acquired:
                with self._mutex:
                    self._held.pop(key, None)


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
