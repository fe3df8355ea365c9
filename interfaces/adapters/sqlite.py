"""SQLite as the embedded event store: eventsourcing's SQLite persistence with a chosen `synchronous` level.

eventsourcing opens every SQLite database in WAL mode. SQLite's default `synchronous=FULL` then fsyncs the WAL at
every commit: on this machine that was a quarter of a verify's time, with the gevent hub (every request of the
worker) blocked while the disk answers. The payments store runs at `synchronous=NORMAL`: a commit is written to the
WAL (in the operating system's page cache) before the request answers, so a crash of the process loses nothing;
only a crash of the operating system or a power cut can lose the last commits, and never corrupts the database.
What such a loss can and cannot do is the `DurableSends` barrier's business (interfaces/adapters/sqlite_durability.py)
and docs/performance.md's.
The read models rebuilt from events alone (`DERIVED_VIEWS` in container.py: the payments list, the merchant
activity and the terminal result cache) run at `NORMAL` too: a lost commit loses its tracking record with it, and
the events are applied again.
Every other store (merchants and their keys, webhooks, proxy services, listings, the accounts, console, webhook
outbox and audit log views) keeps `FULL`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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


class WriteTransaction(sqlite.SQLiteTransaction):
    """A write transaction takes the database's write lock when it begins (`BEGIN IMMEDIATE`), waiting for another
    process's writer up to the lock timeout. Begun deferred, a transaction that reads before it writes pins a
    snapshot, and its first write fails at once with "database is locked" when another process committed meanwhile
    (SQLITE_BUSY_SNAPSHOT, to which no busy timeout applies): a CLI command beside `up` failed so while both brought
    the same read model level."""

    def __enter__(self) -> sqlite.SQLiteCursor:
        cursor = self.connection.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        return cursor


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
    Against the library's datastore used through its public surface, 6% less CPU per verify (docs/performance.md,
    "eventsourcing through its supported surface")."""

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
        as eventsourcing's), in one generator instead of three nested ones; a write transaction begun IMMEDIATE."""
        kind = WriteTransaction if commit else sqlite.SQLiteTransaction
        with self.get_connection(commit=commit) as conn, kind(conn, commit=commit) as curs, curs:
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
