"""SQLite as the embedded event store: eventsourcing's SQLite persistence with a chosen `synchronous` level, and the
barrier that makes the payments store durable before any transaction leaves for the chain.

eventsourcing opens every SQLite database in WAL mode. SQLite's default `synchronous=FULL` then fsyncs the WAL at
every commit: on this machine that was a quarter of a verify's time, with the gevent hub (every request of the
worker) blocked while the disk answers. The payments store runs at `synchronous=NORMAL`: a commit is written to the
WAL (in the operating system's page cache) before the request answers, so a crash of the process loses nothing;
only a crash of the operating system or a power cut can lose the last commits, and never corrupts the database.
What such a loss can and cannot do is the `DurableSends` barrier's business, below, and docs/performance.md's.
The read models rebuilt from events alone (`DERIVED_VIEWS` in container.py: the payments list, the merchant
activity and the terminal result cache) run at `NORMAL` too: a lost commit loses its tracking record with it, and
the events are applied again.
Every other store (merchants and their keys, webhooks, proxy services, listings, the accounts, console, webhook
outbox and audit log views) keeps `FULL`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from eventsourcing import sqlite
from eventsourcing.persistence import (
    ConnectionPoolClosedError,
    ConnectionUnavailableError,
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.utils import Environment

FACTORY_TOPIC = "interfaces.adapters.sqlite:SQLiteFactory"
SYNCHRONOUS = "SQLITE_SYNCHRONOUS"
WAL_AUTOCHECKPOINT = "SQLITE_WAL_AUTOCHECKPOINT"  # pages; SQLite's own default (1,000) when unset
LEVELS = ("FULL", "NORMAL")


class LeanApplicationRecorder(sqlite.SQLiteApplicationRecorder):
    """eventsourcing's SQLite application recorder; `select_events` (an aggregate's read: every verify and settle
    reads its payment) runs its one SELECT on an idle connection without the BEGIN and ROLLBACK the library wraps it
    in. One statement is a read transaction of its own in SQLite (autocommit: it reads one snapshot from its first
    step to its last), so the rows are the same; 12 µs of the 20 a read cost were that empty transaction."""

    def select_events(self, originator_id: UUID | str, *, gt: int | None = None, lte: int | None = None,
                      desc: bool = False, limit: int | None = None) -> Sequence[StoredEvent]:
        datastore = self.datastore
        if not isinstance(datastore, LeanDatastore):
            return super().select_events(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)
        # The statement exactly as the library builds it (`SQLiteAggregateRecorder.select_events`).
        statement = self.select_events_statement
        params: list[Any] = [originator_id.hex if isinstance(originator_id, UUID) else originator_id]
        if gt is not None:
            statement += "AND originator_version>? "
            params.append(gt)
        if lte is not None:
            statement += "AND originator_version<=? "
            params.append(lte)
        statement += "ORDER BY originator_version " + ("DESC " if desc else "ASC ")
        if limit is not None:
            statement += "LIMIT ? "
            params.append(limit)
        return [
            StoredEvent(originator_id=self.convert_originator_id(row["originator_id"]),
                        originator_version=row["originator_version"], topic=row["topic"], state=row["state"])
            for row in datastore.read(statement, params)
        ]


class SQLiteFactory(sqlite.SQLiteFactory):
    """eventsourcing's SQLite factory over a `LeanDatastore`, its applications on a `LeanApplicationRecorder`; each
    new connection runs `PRAGMA synchronous=<SQLITE_SYNCHRONOUS>` and, when set, `PRAGMA
    wal_autocheckpoint=<SQLITE_WAL_AUTOCHECKPOINT>`."""

    application_recorder_class = LeanApplicationRecorder

    def __init__(self, env: Environment | dict[str, str] | None) -> None:
        super().__init__(env)
        level = (self.env.get(SYNCHRONOUS) or "FULL").strip().upper()
        if level not in LEVELS:
            raise OSError(f"{SYNCHRONOUS} must be one of {', '.join(LEVELS)}, got {level!r}")
        self.synchronous = level
        autocheckpoint = (self.env.get(WAL_AUTOCHECKPOINT) or "").strip()
        if autocheckpoint and not (autocheckpoint.isdigit() and int(autocheckpoint) > 0):
            raise OSError(f"{WAL_AUTOCHECKPOINT} must be a number of pages above 0, got {autocheckpoint!r}")
        library = self.datastore  # built from the environment by the library; it has opened no connection yet
        self.datastore = LeanDatastore(
            library.pool.db_name, synchronous=level, lock_timeout=library.pool.lock_timeout,
            wal_autocheckpoint=int(autocheckpoint) if autocheckpoint else None,
            single_row_tracking=library.single_row_tracking, originator_id_type=library.originator_id_type,
        )
        library.close()


class LeanDatastore(sqlite.SQLiteDatastore):
    """eventsourcing's SQLite datastore with a plain list of idle connections instead of its pool's locks.

    The library's `ConnectionPool` takes about eight locks and conditions per transaction (its queue, its count of
    readers, the writer lock, each connection's in-use lock), and under gevent each is a Python-level lock, one of
    them yielding to the hub at every return of a connection: ~100 µs per transaction in a gevent worker, four
    transactions per verify. Here a transaction takes an idle connection from a list (or opens one), and gives it
    back: a list `pop` and `append`, atomic for threads and greenlets alike. What the library's pool guaranteed
    stays: a connection serves one transaction at a time, and the writers of one process take turns on one lock (a
    gevent lock in a gevent worker), so a writer never waits on SQLite's busy handler for another writer of its own
    process (that wait sleeps without yielding, and in WAL a read-then-write transaction would fail at once on a
    concurrent commit). Connections are made as the library makes them (WAL, autocommit, `sqlite3.Row`) plus the
    synchronous level; an in-memory database keeps the library's pool (it needs its reader-writer exclusion).
    """

    def __init__(self, db_name: str, *, synchronous: str = "FULL", wal_autocheckpoint: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(db_name, **kwargs)
        self.synchronous, self.wal_autocheckpoint = synchronous, wal_autocheckpoint
        self.pragmas: list[str] = []  # run on every connection opened after `tune` added them
        self._idle: list[LeanConnection] = []
        self._writer = threading.Lock()  # gevent's when the worker is patched: a waiting writer yields
        self._closed = False

    @contextmanager
    def transaction(self, *, commit: bool) -> Iterator[sqlite.SQLiteCursor]:
        """The library's transaction (`SQLiteTransaction`: BEGIN, then COMMIT or ROLLBACK, sqlite3's errors raised
        as eventsourcing's), in one generator instead of three nested ones."""
        with self.get_connection(commit=commit) as conn, sqlite.SQLiteTransaction(conn, commit=commit) as curs, curs:
            yield curs

    @contextmanager
    def get_connection(self, *, commit: bool) -> Iterator[sqlite.SQLiteConnection]:
        if self.pool.is_sqlite_memory_mode:
            with super().get_connection(commit=commit) as conn:
                yield conn
            return
        if self._closed:
            raise ConnectionPoolClosedError("the datastore is closed")
        if commit and not self._writer.acquire(timeout=self.pool.pool_timeout):
            raise ConnectionUnavailableError("Timed out waiting for return of writer")
        try:
            try:
                conn = self._idle.pop()
            except IndexError:
                conn = self._connect()
            try:
                yield conn
            finally:
                if self._closed or len(self._idle) >= self.pool.pool_size:
                    conn.close()
                else:
                    self._idle.append(conn)
        finally:
            if commit:
                self._writer.release()

    def read(self, statement: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """The rows of one statement that only reads, run alone (autocommit: its own read transaction, one
        snapshot) on an idle connection; sqlite3's errors raised as eventsourcing's, as in a transaction."""
        if self.pool.is_sqlite_memory_mode:
            with self.transaction(commit=False) as cursor:
                cursor.execute(statement, params)
                return list(cursor.fetchall())
        with self.get_connection(commit=False) as conn:
            try:
                rows = cast(LeanConnection, conn).sqlite.execute(statement, params)
                try:
                    return rows.fetchall()
                finally:
                    rows.close()
            except sqlite3.Error as error:
                raise _persistence_error(error) from error

    def tune(self, *pragmas: str) -> None:
        """Run `pragmas` on every idle connection now and on every connection opened from now on (the bulk mode
        of `paywarden-bench load`; no connection may be in use)."""
        self.pragmas.extend(pragmas)
        for conn in self._idle:
            for pragma in pragmas:
                conn.sqlite.execute(pragma)

    def _connect(self) -> LeanConnection:
        """A connection as the library's pool makes one (`SQLiteConnectionPool._create_connection`: autocommit, WAL,
        `sqlite3.Row`), with sqlite3's default statement cache (the library passes `cached_statements=True`, a
        cache of one statement: every statement of a transaction was compiled again, ~3x the CPU of a read) and the
        synchronous level."""
        pool = self.pool
        try:
            c = sqlite3.connect(database=pool.db_name, uri=True, check_same_thread=False, isolation_level=None,
                                timeout=pool.lock_timeout or sqlite.SQLITE3_DEFAULT_LOCK_TIMEOUT)
        except (sqlite3.Error, TypeError) as e:
            raise InterfaceError(e) from e
        if not pool.is_journal_mode_wal:
            _switch_to_wal(c, pool)
            pool.is_journal_mode_wal = True
        c.execute(f"PRAGMA synchronous={self.synchronous}")
        if self.wal_autocheckpoint is not None:
            c.execute(f"PRAGMA wal_autocheckpoint={int(self.wal_autocheckpoint)}")
        for pragma in self.pragmas:
            c.execute(pragma)
        c.row_factory = sqlite3.Row
        return LeanConnection(c)

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()
        super().close()


class LeanConnection(sqlite.SQLiteConnection):
    """The library's connection, keeping its sqlite3 connection where `LeanDatastore.read` can use it (the
    library's own attribute for it is private)."""

    def __init__(self, sqlite_conn: sqlite3.Connection) -> None:
        super().__init__(sqlite_conn=sqlite_conn, max_age=None)
        self.sqlite = sqlite_conn


def _switch_to_wal(c: sqlite3.Connection, pool: Any, tries: int = 100) -> None:
    """The database in WAL mode, as the library's pool puts it. Two connections that find a new database in rollback
    mode at the same moment both ask for WAL, and SQLite answers one of them "database is locked" at once, without
    waiting out the busy timeout (escalating a shared lock, it refuses rather than risk a deadlock): that one looks
    again, and finds WAL set by the other."""
    for attempt in range(tries):
        try:
            if c.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                c.execute("PRAGMA journal_mode=WAL")
                pool.journal_mode_was_changed_to_wal = True
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == tries - 1:
                raise
            time.sleep(0.01)


# sqlite3's errors as eventsourcing raises them (`SQLiteTransaction.__exit__`), the more specific first.
_ERRORS: tuple[tuple[type[sqlite3.Error], type[PersistenceError]], ...] = (
    (sqlite3.InterfaceError, InterfaceError), (sqlite3.DataError, DataError),
    (sqlite3.OperationalError, OperationalError), (sqlite3.IntegrityError, IntegrityError),
    (sqlite3.InternalError, InternalError), (sqlite3.ProgrammingError, ProgrammingError),
    (sqlite3.NotSupportedError, NotSupportedError), (sqlite3.DatabaseError, DatabaseError),
)


def _persistence_error(error: sqlite3.Error) -> PersistenceError:
    for raw, mapped in _ERRORS:
        if isinstance(error, raw):
            return mapped(error)
    return PersistenceError(error)


def fsync_database(db_path: Path) -> Callable[[], None]:
    """A barrier: fsync the database's WAL and main file, so every commit made before it survives a power cut.

    With `synchronous=NORMAL` a commit is in the WAL file but maybe not yet on the disk; `fsync` on the WAL file
    is exactly what `synchronous=FULL` would have done at that commit (and covers every earlier commit, the WAL
    being written in order). The main file is synced too, for frames a checkpoint has already moved into it.

    Concurrent callers share the work (`GroupFsync`), and in a gevent worker the fsync runs on the hub's thread
    pool: the disk's wait (~0.2 ms per file here) no longer stops every other request of the worker.
    """
    paths = (Path(f"{db_path}-wal"), db_path)

    def fsync_files() -> None:
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # no WAL: everything is in the main file, synced by the checkpoint that removed it
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    return GroupFsync(fsync_files)


class GroupFsync:
    """A durability barrier shared by concurrent callers (group commit's second half).

    A caller has committed before it calls; it returns once an fsync that *started after its call* has finished,
    which covers its commit. One caller at a time runs the fsync, and before starting it takes note of every call
    made so far: the callers that queued behind it while the disk worked return without an fsync of their own
    when it ends. So N concurrent settles cost one or two fsyncs instead of N, and no caller returns early.
    """

    def __init__(self, fsync: Callable[[], None], run: Callable[[Callable[[], None]], None] | None = None) -> None:
        self._fsync, self._run = fsync, run or off_the_event_loop
        self._sync = threading.Lock()  # a greenlet's lock once gevent has patched threading (the API worker)
        self._count = threading.Lock()
        self._called = 0  # calls so far
        self._covered = 0  # every call numbered up to this one is durable
        self.fsyncs = 0

    def __call__(self) -> None:
        with self._count:
            self._called += 1
            mine = self._called
        with self._sync:
            if self._covered >= mine:
                return  # an fsync that started after this call has finished
            with self._count:
                upto = self._called  # all of these committed before the fsync below starts
            self._run(self._fsync)
            self.fsyncs += 1
            self._covered = upto


def off_the_event_loop(fn: Callable[[], None]) -> None:
    """Run a blocking call (an fsync) on gevent's thread pool when this process is a gevent worker, so the other
    greenlets run meanwhile; a plain call anywhere else."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        import gevent  # type: ignore[import-untyped]

        gevent.get_hub().threadpool.apply(fn)
    else:
        fn()


class BackgroundCheckpoints:
    """A SQLite database's WAL copied back into its main file by another process, so that the writer's own
    checkpoints find almost nothing left to do.

    SQLite checkpoints in the commit that takes the WAL past `wal_autocheckpoint` pages (1,000 by default), in the
    committing connection: in the API worker, on the gevent hub, every request of the worker waiting. What a
    checkpoint costs grows with the history: the payments' `(originator_id, originator_version)` index is keyed by
    random UUIDs, so on a store of a million events the pages a thousand WAL frames hold are a thousand pages
    scattered over the file, each written and synced (docs/performance.md, "Cost with history"). Here a thread of every
    projection worker runs a PASSIVE checkpoint every `interval` seconds on a connection of its own: PASSIVE blocks
    neither writers nor readers (it copies the frames no reader still needs, then syncs the file), so the pages are
    written and synced out of every request's way. The writer's automatic checkpoint stays, every 20,000 pages on
    the payments store (container.py, `PAYMENTS_WAL_AUTOCHECKPOINT`): the safety valve, and the one that lets
    SQLite start the WAL over (a log is restarted only once a checkpoint has copied all of it, which a checkpointer
    racing a busy writer rarely does). It copies only the frames appended since the last pass, and comes seldom:
    each of its fsyncs holds the hub, and queues behind whatever the read models are writing to the same disk.

    Durability is unchanged: a checkpoint at `synchronous=NORMAL` syncs the WAL before copying and the main file
    after, as the writer's own does, and a checkpoint never loses or reorders a commit.
    """

    def __init__(self, db_path: Path, interval: float = 0.02) -> None:
        self.db_path, self.interval = Path(db_path), interval
        self.passes = 0  # checkpoints run
        self.last: tuple[int, int, int] | None = None  # the last one's (busy, frames in the WAL, frames copied)

    def run(self, stop: threading.Event) -> None:
        """Until `stop`: a checkpoint every `interval`. A database not made yet is waited for; an error is logged,
        and the next pass tries again on a new connection."""
        conn: sqlite3.Connection | None = None
        try:
            while not stop.wait(self.interval):
                try:
                    conn = conn or self._connect()
                    if conn is not None:
                        self.last = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                        self.passes += 1
                except sqlite3.Error:
                    logging.getLogger("paywarden.checkpoints").exception("checkpointing %s failed", self.db_path)
                    if conn is not None:
                        conn.close()
                    conn = None
                    stop.wait(1.0)  # a broken database is not retried fifty times a second
        finally:
            if conn is not None:
                conn.close()

    def _connect(self) -> sqlite3.Connection | None:
        if not self.db_path.exists():
            return None  # never create the database: it is the writer's to make
        conn = sqlite3.connect(f"{self.db_path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=0)
        conn.execute("PRAGMA synchronous=NORMAL")  # a checkpoint syncs the WAL, then the main file
        return conn


class DurableSends:
    """A `Chain` decorator: before a transaction is sent, the barrier makes the payments store durable.

    Payments records a broadcast (`Submitted`, with the settle-once claims) in one save and only then calls
    `send`; `_resend` sends the same recorded bytes again. So when `send` runs, the record that forbids a second
    broadcast is on the disk, whatever the store's synchronous level: no power cut can make Paywarden forget a
    transaction it sent. Everything else passes through.
    """

    def __init__(self, inner: Any, barrier: Callable[[], None]) -> None:
        self.inner, self._barrier = inner, barrier

    def send(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        self._barrier()
        return self.inner.send(transaction, signatures_verified=signatures_verified)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def durable_sends(chains: Any, db_path: Path) -> Any:
    """Wrap each adapter of a `Chains` in place; idempotent."""
    barrier = fsync_database(db_path)
    for caip2, chain in list(chains.by_network.items()):
        if not isinstance(chain, DurableSends):
            chains.by_network[caip2] = DurableSends(chain, barrier)
    return chains
