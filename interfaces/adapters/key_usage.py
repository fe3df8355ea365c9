"""Last use of each API key, fresh to the minute without a write per request.

Each process remembers when it last wrote a key's time and writes again only after `every` seconds, so a key
used a thousand times a minute costs one write a minute per process; the stored time is never older than that.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import Protocol

log = logging.getLogger("paywarden.keys")


class KeyUseStore(Protocol):
    def record_key_use(self, prefix: str, at: datetime) -> None: ...


class KeyUsage:
    def __init__(self, store: KeyUseStore, *, every: float = 60.0) -> None:
        self._store, self._every = store, every
        self._written: dict[str, float] = {}
        self._lock = threading.Lock()

    def touch(self, prefix: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._written.get(prefix, -self._every) < self._every:
                return
            self._written[prefix] = now
        try:
            self._store.record_key_use(prefix, datetime.now(UTC))
        except Exception:  # a last-used time is never worth failing a payment for
            log.warning("could not record the last use of key %s…", prefix, exc_info=True)
            with self._lock:
                self._written.pop(prefix, None)
