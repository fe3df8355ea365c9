"""Real PostgreSQL and Redis for the tests that claim to test them.

Under CI (`CI=true`) a missing service fails the test; on a developer's machine it skips with the reason.
Addresses: PAYWARDEN_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/postgres) and
PAYWARDEN_TEST_REDIS (default redis://127.0.0.1:6379/14). The suite runs in pytest-xdist workers (setup.cfg's
addopts); each flushes a Redis database of its own, worker gwN the given database plus N (14 and 15 by default).
Each PostgreSQL test gets a database of its own anyway.
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

POSTGRES = os.environ.get("PAYWARDEN_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def worker_database(url: str, worker: str | None) -> str:
    """The Redis URL of pytest-xdist worker `worker` ("gw0", "gw1", ... or None outside xdist): `url`'s database
    number plus the worker's index, so that no worker flushes another's keys."""
    if not worker:
        return url
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) + int(worker.removeprefix("gw"))
    return urlunsplit(parts._replace(path=f"/{database}"))


REDIS = worker_database(os.environ.get("PAYWARDEN_TEST_REDIS", "redis://127.0.0.1:6379/14"),
                        os.environ.get("PYTEST_XDIST_WORKER"))


def unavailable(what: str, why: Exception) -> None:
    message = f"{what} is not reachable ({why}); start it (see .ci/run) to run this test"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def fresh_postgres_database() -> str:
    """A new, empty database on the test server; returns its URL."""
    import psycopg

    name = f"paywarden_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as down:
        unavailable("PostgreSQL", down)
    return POSTGRES.rsplit("/", 1)[0] + "/" + name


def drop_postgres_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class LaterDrops:
    """Drops test databases on a thread of its own while the next tests run: a DROP DATABASE waits for a checkpoint
    (0.5-2 s on this server), which no test needs to wait for. `finish()` (at the end of the session) waits until
    every database handed over is gone and raises the first failure."""

    def __init__(self) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._failures: list[BaseException] = []
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def drop(self, url: str) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="drop-test-databases", daemon=True)
                self._thread.start()
        self._queue.put(url)

    def _run(self) -> None:
        while (url := self._queue.get()) is not None:
            try:
                drop_postgres_database(url)
            except Exception as failure:  # noqa: BLE001 - reported by finish()
                self._failures.append(failure)

    def finish(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
        if self._failures:
            raise self._failures[0]


LATER = LaterDrops()


def clean_redis() -> str:
    import redis

    try:
        client = redis.Redis.from_url(REDIS, socket_connect_timeout=2)
        client.flushdb()
        client.close()
    except redis.RedisError as down:
        unavailable("Redis", down)
    return REDIS


RAM = "/dev/shm"


def temporary_files_in_ram() -> None:
    """Temporary files (pytest's `tmp_path`s, and so every test's data directory and SQLite files, the e2e
    virtualenv, and what the processes the tests start write under TMPDIR) on tmpfs, unless TMPDIR names a place:
    a SQLite commit's fsync and a WAL checkpoint cost ~0.05 s on this machine's disk, and a test gateway makes
    dozens (0.56 s per gateway on disk, 0.10 s on tmpfs, measured side by side)."""
    if os.environ.get("TMPDIR") or not os.path.isdir(RAM) or not os.access(RAM, os.W_OK | os.X_OK):
        return
    if os.statvfs(RAM).f_flag & os.ST_NOEXEC:  # the virtualenv's console scripts must run from there
        return
    os.environ["TMPDIR"] = RAM
    tempfile.tempdir = None  # tempfile.gettempdir() reads TMPDIR again


CHROMIUM = os.environ.get("PAYWARDEN_TEST_CHROMIUM", "/usr/bin/chromium")


def chromium() -> str:
    """Debian's chromium for Playwright's `executable_path` (installed by .ci/run; never `playwright install`)."""
    if not os.path.exists(CHROMIUM):
        unavailable("Chromium", FileNotFoundError(f"{CHROMIUM} is missing (apt-get install -y chromium)"))
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as missing:
        unavailable("Playwright for Python", missing)
    return CHROMIUM
