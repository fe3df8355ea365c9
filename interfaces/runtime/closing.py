"""What a gunicorn worker closes as it exits. Each app's composition root (interfaces/http/*/wsgi.py) registers
each thing it started with `on_worker_exit`; gunicorn's `worker_exit` hook (gunicorn_conf.py) runs `close_worker`,
newest first, while the worker's event loop still runs (not in the interpreter's finalizers)."""

from __future__ import annotations

from collections.abc import Callable

_closers: list[Callable[[], None]] = []


def on_worker_exit(close: Callable[[], None]) -> None:
    _closers.append(close)


def close_worker() -> None:
    while _closers:
        _closers.pop()()
