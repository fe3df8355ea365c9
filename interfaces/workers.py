"""Projection workers: each read model follows its application's notification log in its own process.

`paywarden project [NAME ...]` runs them (all by default); `paywarden up` and `paywarden serve` start one.
Register a read model in `PROJECTIONS`; the container builds its view for the configured store.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from interfaces.container import Container
from projections.accounts import AccountsProjection
from projections.runner import catch_up, follow


@dataclass(frozen=True)
class ProjectionSpec:
    name: str
    application: Callable[[Container], Any]  # the application whose log it follows
    projection: type
    view: Callable[[Container], Any]


PROJECTIONS: dict[str, ProjectionSpec] = {
    "accounts": ProjectionSpec("accounts", lambda c: c.merchants, AccountsProjection, lambda c: c.accounts),
}


def catch_up_all(container: Container, names: Sequence[str] = ()) -> int:
    total = 0
    for spec in _selected(names):
        total += catch_up(spec.application(container), spec.projection(spec.view(container)))
    return total


def run(container: Container, names: Sequence[str] = (), stop: threading.Event | None = None) -> None:
    """Follow the selected projections until SIGINT/SIGTERM (or `stop`)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    threads = [
        threading.Thread(target=follow, args=(spec.application(container), spec.projection(spec.view(container)),
                                              stop), name=f"projection-{spec.name}", daemon=True)
        for spec in _selected(names)
    ]
    for thread in threads:
        thread.start()
    stop.wait()
    for thread in threads:
        thread.join(timeout=5)


def _selected(names: Sequence[str]) -> list[ProjectionSpec]:
    unknown = set(names) - set(PROJECTIONS)
    if unknown:
        raise ValueError(f"unknown projection(s): {', '.join(sorted(unknown))}; known: {', '.join(PROJECTIONS)}")
    return [PROJECTIONS[n] for n in (names or PROJECTIONS)]
