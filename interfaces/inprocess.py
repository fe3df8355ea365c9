"""In-process adapters of the ports, for the embedded default (one process, no Redis)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


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


class InProcessResultCache:
    """A bounded map of terminal results; the event store stays the authority on a miss."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._results: dict[tuple[str, str], dict[str, Any]] = {}
        self._capacity = capacity
        self._mutex = threading.Lock()

    def get(self, key: str, operation: str) -> dict[str, Any] | None:
        return self._results.get((key, operation))

    def put(self, key: str, operation: str, result: dict[str, Any]) -> None:
        with self._mutex:
            if len(self._results) >= self._capacity:
                self._results.pop(next(iter(self._results)))
            self._results[(key, operation)] = result


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
