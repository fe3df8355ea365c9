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

# socketserver's `serve_forever` looks for a `shutdown()` once per poll interval, 0.5 s unless told: every test
# server's stop waited up to that (two servers, ~0.95 s, in each proxy test's teardown). The suite's servers poll
# every POLL seconds.
POLL = 0.05

POSTGRES = os.environ.get("PAYWARDEN_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


# The pool size of the PostgreSQL stacks the e2e tests start (PAYWARDEN_DATABASE_POOL_MAX: 10 by default, per
# application and view, per process): two at most, where a test is not about the pool's size. A stack's every
# process builds every store, and its connections beside the other worker's tests passed the server's 100.
SMALL_POOLS = {"PAYWARDEN_DATABASE_POOL_MAX": "2"}


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


def fresh_postgres_database(template: str | None = None) -> str:
    """A new database on the test server; returns its URL. Empty, or a copy of the database `template` (by name),
    which no one may be connected to. STRATEGY WAL_LOG copies the template block by block through the WAL; FILE_COPY
    (the other strategy) waits for two checkpoints: 0.4 s against 1.6 s per copy here, measured side by side."""
    import psycopg

    name = f"paywarden_test_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}" STRATEGY WAL_LOG' if template else ""
    try:
        with psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{copy}')
    except psycopg.OperationalError as down:
        unavailable("PostgreSQL", down)
    return POSTGRES.rsplit("/", 1)[0] + "/" + name


def database_with_schema() -> str:
    """A new database holding every store's schema (tables, types, functions, and the rows a first build writes:
    the views' tracking positions, the catalog's counters) and no event: a process's first `build()` made it, and a
    test's database is a copy of it (`schema_template`), so that the test's own build finds its schema made, as
    every build after a store's first does. 0.4 s to copy and 0.7 s to build on the copy, against 0.3 s for an
    empty database and 1.7 s to build on it (medians of six, side by side, load ~7)."""
    from pathlib import Path

    from interfaces.config import Config
    from interfaces.container import build
    from interfaces.sandbox.chain import Sandbox

    url = fresh_postgres_database()
    with tempfile.TemporaryDirectory() as data_dir:
        build(Config(data_dir=Path(data_dir), database_url=url), sandbox=Sandbox()).close()
    return url


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


class ReadyCopies:
    """Copies of the database `template`, each made on a thread of its own while the tests before it run: `take()`
    hands over one made ahead (at most two wait), so no test waits for its CREATE DATABASE. A copy the thread could
    not make (the server down or full) is made by `take()` itself, which then skips or fails the test as
    `fresh_postgres_database` does. `finish()` stops the thread and returns the URLs of the copies never taken."""

    def __init__(self, template: str) -> None:
        self._template = template
        self._ready: queue.Queue[str | None] = queue.Queue(maxsize=1)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="copy-test-databases", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                url: str | None = fresh_postgres_database(template=self._template)
            except BaseException:  # noqa: BLE001 - take() makes its copy itself, and reports why it cannot
                url = None
            self._ready.put(url)  # a failure too: the thread goes on, and take() never waits for nothing

    def take(self) -> str:
        return self._ready.get() or fresh_postgres_database(template=self._template)

    def finish(self) -> list[str]:
        self._stopping.set()
        left = []
        while self._thread.is_alive() or not self._ready.empty():
            try:
                url = self._ready.get(timeout=0.1)
            except queue.Empty:
                continue
            if url:
                left.append(url)
        return left


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
