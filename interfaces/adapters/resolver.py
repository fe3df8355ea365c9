"""The `Resolver` port over the operating system's resolver (getaddrinfo), with a time bound."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as ResolutionTimeout


class GetaddrinfoResolver:
    """Every address a hostname resolves to, as written; empty when it does not resolve within the bound.

    getaddrinfo itself has no timeout, so it runs on a small pool and a slow answer counts as none (the
    registration is skipped; the next payment tries again).
    """

    def __init__(self, timeout_seconds: float = 5.0) -> None:
        self._timeout = timeout_seconds
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="resolver")

    def resolve(self, hostname: str) -> list[str]:
        future = self._pool.submit(socket.getaddrinfo, hostname, None, proto=socket.IPPROTO_TCP)
        try:
            answers = future.result(timeout=self._timeout)
        except (OSError, UnicodeError, ResolutionTimeout):
            return []
        return sorted({str(info[4][0]) for info in answers})
