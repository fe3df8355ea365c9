"""`paywarden serve`'s supervisor: gunicorn, the projection worker and the webhook worker as children, stopped
together.

SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed to gunicorn (which gives them their usual meaning: graceful stop,
reload, quick stop); when gunicorn exits, the projection worker is stopped and the supervisor exits with gunicorn's
status. A worker that dies is restarted (after a pause that doubles up to 30 s). Each child is asked by
the kernel to stop if the supervisor itself is killed (Linux `PR_SET_PDEATHSIG`), and the projection worker also
watches its parent (`paywarden project --exit-with-parent`).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence

log = logging.getLogger("paywarden.serve")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
STOP_SECONDS = 15.0
WORKER_NICENESS = 10  # the projection and webhook workers' `nice` increment (docs/performance.md)


def exit_with_parent(stop: threading.Event) -> None:
    """Set `stop` once this process is orphaned (its parent, `serve`, is gone): checked every second by a daemon
    thread, for the children the kernel's PR_SET_PDEATHSIG may not reach (`project`/`webhooks --exit-with-parent`)."""
    parent = os.getppid()

    def watch() -> None:
        while not stop.wait(1.0):
            if os.getppid() != parent:
                stop.set()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the projection worker still watches its parent
        pass


def _start(argv: Sequence[str], niceness: int = 0) -> subprocess.Popen:
    def prepare() -> None:
        _die_with_parent()
        if niceness:
            os.nice(niceness)

    return subprocess.Popen(list(argv), preexec_fn=prepare)  # noqa: PLW1509 - only a prctl call and nice


def _stop(child: subprocess.Popen, sig: int = signal.SIGTERM) -> int:
    return _stop_all([child], sig)[0]


def _stop_all(children: Sequence[subprocess.Popen], sig: int = signal.SIGTERM) -> list[int]:
    """Signal every child at once, then wait for each (SIGKILL after STOP_SECONDS): they stop side by side, so
    stopping takes as long as the slowest, not the sum."""
    for child in children:
        if child.poll() is None:
            child.send_signal(sig)
    deadline = time.monotonic() + STOP_SECONDS
    for child in children:
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return [child.returncode for child in children]


class _Worker:
    """A child restarted when it dies, after a pause that doubles up to 30 s (1 s again once it ran a minute). It
    runs at a lower CPU priority (`WORKER_NICENESS`): the read models, the audit log and webhook deliveries trail
    the writers, so when the cores are short the requests go first and the workers catch up in larger batches."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv, self.child = argv, _start(argv, WORKER_NICENESS)
        self.pause, self.started, self.restart_at = 1.0, time.monotonic(), 0.0

    def watch(self) -> None:
        if self.child.poll() is None:
            return
        now = time.monotonic()
        if self.restart_at == 0.0:
            self.pause = 1.0 if now - self.started > 60 else min(self.pause * 2, 30.0)
            log.error("worker %s exited with %s; restarting in %.0f s", " ".join(self.argv[-2:]),
                      self.child.returncode, self.pause)
            self.restart_at = now + self.pause
        elif now >= self.restart_at:
            self.child, self.started, self.restart_at = _start(self.argv, WORKER_NICENESS), now, 0.0


def supervise(server_argv: Sequence[str], worker_argv: Sequence[str] | None, *more_workers: Sequence[str],
              poll_seconds: float = 0.5, also: Sequence[Sequence[str]] = ()) -> int:
    """Run the server and the workers until the server exits; return the server's exit status. `also` are more
    servers (the proxy's gunicorn) started, signalled and stopped with the first; one exiting stops everything."""
    wake = threading.Event()
    received: list[int] = []

    def forward(sig: int, _frame: object) -> None:
        received.append(sig)
        wake.set()

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    server = _start(server_argv)
    others = [_start(argv) for argv in also]
    workers = [_Worker(argv) for argv in (worker_argv, *more_workers) if argv]
    stopping = False
    try:
        while server.poll() is None:
            if not stopping and any(other.poll() is not None for other in others):
                log.error("a server exited; stopping the others")
                received.append(signal.SIGTERM)
            while received:
                sig = received.pop(0)
                server.send_signal(sig)
                for other in others:
                    if other.poll() is None:
                        other.send_signal(sig)
                if sig != signal.SIGHUP:
                    stopping = True
                    _stop_all([worker.child for worker in workers])
            if not stopping:
                for worker in workers:
                    worker.watch()
            wake.wait(0.05 if stopping else poll_seconds)
            wake.clear()
    finally:
        _stop_all([worker.child for worker in workers])
        _stop_all(others)
        if server.poll() is None:
            _stop(server)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return server.returncode
