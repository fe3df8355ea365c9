"""What the SQLite and PostgreSQL views share: statements written once with `?` placeholders.

A view subclasses `SqlView` and the tracking recorder of its database; each write runs in one transaction with
its tracking record, so an event is applied exactly once however often a runner restarts. Inside `batch()` (the
projection runner's, projections/runner.py) the writes of many events and their tracking records share one
transaction: one commit for a whole batch of notifications, still all or nothing.

A batch given its first and last notification (`batch(first, last)`, what the runner does) records the position
twice, not once per event: eventsourcing's tracking table keeps one row per application (`single_row_tracking`,
its default on SQLite and PostgreSQL), and recording a position fails unless it is past the recorded one. So the
batch records `first` as it begins (IntegrityError, and a rollback of the whole batch, if any runner applied that
notification or a later one already) and `last` before it commits: exactly what recording every event's position
in turn would have checked and left, with two statements instead of one per event, and the events a projection
ignores advance the position too. A store with multi-row tracking records every event as before.

A view may also keep a batch's writes in memory (`Batch.state`) and write them at its end (`Batch.before_commit`):
a payment's Received and Approved, which usually arrive in one batch, then become one row written once. A statement
whose answer nobody reads goes through `write` (`Cursor.write`): inside a batch it is queued, and the queue is sent
in order before the next statement of the batch and before it commits, on PostgreSQL as one pipeline (one round trip
for the whole queue instead of one per statement); every statement still runs, in the order written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError, Tracking, TrackingRecorder
from eventsourcing.utils import retry


class SqlView(TrackingRecorder):
    """A tracking recorder's SQL, over `SQLiteTrackingRecorder` / `PostgresTrackingRecorder` (the concrete view
    subclasses one of them; a PostgreSQL view sets `paramstyle`)."""

    paramstyle = "qmark"
    tables: Sequence[str] = ()
    datastore: Any  # the SQLite or PostgreSQL datastore of the recorder this view is
    insert_tracking_statement: Any  # the recorder's own statement recording a position (`record_position`)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.paramstyle == "format":  # PostgreSQL: its recorders create what `sql_create_statements` lists
            from psycopg.sql import SQL

            self.sql_create_statements.extend(SQL(self.sql(t)) for t in self.tables)  # type: ignore[attr-defined]

    def sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.paramstyle == "format" else statement

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *map(self.sql, self.tables)]  # type: ignore[misc]

    @contextmanager
    def tracked(self, tracking: Tracking) -> Iterator[Any]:
        """A cursor in a transaction that also records `tracking` (and fails if it was recorded before); inside
        `batch()`, the batch's transaction (and position)."""
        batch = self.current_batch()
        if batch is not None:
            yield _Cursor(batch.cursor, self, batch)
            batch.track(tracking)
            return
        with self.datastore.transaction(commit=True) as c:
            yield _Cursor(c, self)
            self.record_position(c, tracking)

    @contextmanager
    def batch(self, first: Tracking | None = None, last: Tracking | None = None) -> Iterator[Batch]:
        """Every `tracked` write of this thread until the block ends goes into one transaction, committed at its
        end; an exception (IntegrityError: another runner applied one of the events first) rolls all back. Given
        the batch's `first` and `last` notification, the position is recorded at both ends instead of per event
        (the module's doc)."""
        local = self._batch_local()
        if local.batch is not None:  # already in a batch: part of it
            yield local.batch
            return
        bounded = first is not None and last is not None and bool(self.datastore.single_row_tracking)
        with self.datastore.transaction(commit=True) as c:
            # `last` is recorded at the end unless it is `first` (a batch of one), recorded already.
            end = last if bounded and last is not None and first is not None and \
                last.notification_id != first.notification_id else None
            batch = local.batch = Batch(c, self, end, first=first if bounded else None)
            try:
                if first is not None and bounded:
                    self.record_position(c, first)
                yield batch
                batch.finish()
            finally:
                local.batch = None

    def record_position(self, cursor: Any, tracking: Tracking) -> None:
        """Record `tracking` in the transaction of `cursor`, as the recorder's public `insert_tracking` does in a
        transaction of its own: with the recorder's own statement (`insert_tracking_statement`, public on the
        SQLite and PostgreSQL tracking recorders), so `max_tracking_id` and `has_tracking_id` read what this
        wrote. With single-row tracking the statement returns the new position, and nothing when the recorded one
        is not before it: that is the IntegrityError the recorder raises (an event applied twice)."""
        params = {"application_name": tracking.application_name, "notification_id": tracking.notification_id}
        if self.paramstyle == "format":  # psycopg: prepared once per connection, as the recorder does
            cursor.execute(self.insert_tracking_statement, params, prepare=True)
        else:
            cursor.execute(self.insert_tracking_statement, params)
        if self.datastore.single_row_tracking and cursor.fetchone() is None:
            raise IntegrityError(f"Failed to record tracking for {tracking.application_name} "
                                 f"{tracking.notification_id}")

    def current_batch(self) -> Batch | None:
        """This thread's open batch of this view, if any."""
        batch: Batch | None = self._batch_local().batch
        return batch

    def _batch_local(self) -> threading.local:
        local = self.__dict__.get("_batch")
        if local is None:
            local = self.__dict__.setdefault("_batch", threading.local())
        if not hasattr(local, "batch"):
            local.batch = None
        return local

    # A pooled connection broken by a database restart fails once; the retry takes a fresh one.
    @retry((InterfaceError, OperationalError), max_attempts=2, wait=0.05)
    def rows(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        batch = self.current_batch()
        if batch is not None:  # a projection reading inside a batch reads the batch's own writes
            batch.send_writes()
            batch.cursor.execute(self.sql(statement), tuple(params))
            return [values(row) for row in batch.cursor.fetchall()]
        if self.paramstyle == "format":  # one autocommit statement: no BEGIN/ROLLBACK round trips
            with self.datastore.get_connection() as conn, conn.cursor() as c:
                c.execute(self.sql(statement), tuple(params))
                return [values(row) for row in c.fetchall()]
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.sql(statement), tuple(params))
            return [values(row) for row in c.fetchall()]


class Batch:
    """One open batch of a view: its cursor, the position it records at its end, and what the view keeps in
    memory until then."""

    def __init__(self, cursor: Any, view: SqlView, last: Tracking | None, *, first: Tracking | None = None) -> None:
        self.cursor, self.view, self.last, self.first = cursor, view, last, first
        self.bounded = first is not None
        self.state: dict[str, Any] = {}  # a view's pending writes, by a name of its choosing
        self._flushes: dict[str, Callable[[], None]] = {}
        self._writes: list[tuple[str, tuple[Any, ...]]] = []  # `write`'s queue, in order

    def track(self, tracking: Tracking) -> None:
        """One event applied: its position is recorded now, unless the batch records its bounds."""
        if not self.bounded:
            self.send_writes()
            self.view.record_position(self.cursor, tracking)

    def write(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Queue a statement whose answer is not read; `send_writes` sends the queue."""
        self._writes.append((self.view.sql(statement), tuple(params)))

    def send_writes(self) -> None:
        """Run the queued statements in order: on PostgreSQL in one pipeline (psycopg's `Connection.pipeline`), a
        run of one statement as one `executemany`; an error is raised here, and rolls the batch back."""
        if not self._writes:
            return
        writes, self._writes = self._writes, []
        runs: list[tuple[str, list[tuple[Any, ...]]]] = []
        for statement, params in writes:
            if runs and runs[-1][0] == statement:
                runs[-1][1].append(params)
            else:
                runs.append((statement, [params]))
        if self.view.paramstyle != "format":
            for statement, rows in runs:
                self.cursor.executemany(statement, rows)
            return
        with self.cursor.connection.pipeline():
            for statement, rows in runs:
                self.cursor.executemany(statement, rows)

    def stop_after(self, tracking: Tracking) -> None:
        """The batch ends early: `tracking`, not its announced last notification, is the position it records."""
        if self.bounded:
            self.last = None if self.first is not None and tracking.notification_id == self.first.notification_id \
                else tracking

    def before_commit(self, name: str, flush: Callable[[], None]) -> None:
        """Run `flush` (once, whatever how often registered under `name`) when the batch ends, before it
        commits; an exception there rolls the batch back."""
        self._flushes.setdefault(name, flush)

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        self.send_writes()
        self.cursor.execute(self.view.sql(statement), tuple(params))
        return self.cursor

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self.send_writes()
        if rows:
            self.cursor.executemany(self.view.sql(statement), [tuple(r) for r in rows])

    def finish(self) -> None:
        self.send_writes()
        for flush in self._flushes.values():
            flush()
        self.send_writes()
        if self.last is not None:
            self.view.record_position(self.cursor, self.last)


class _Cursor:
    def __init__(self, cursor: Any, view: SqlView, batch: Batch | None = None) -> None:
        self._cursor, self._view, self._batch = cursor, view, batch

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        if self._batch is not None:  # what the batch queued runs first: this statement reads what it wrote
            self._batch.send_writes()
        self._cursor.execute(self._view.sql(statement), tuple(params))
        return self._cursor

    def write(self, statement: str, params: Sequence[Any] = ()) -> None:
        """A statement whose answer is not read: queued inside a batch (`Batch.write`), else run now."""
        if self._batch is not None:
            self._batch.write(statement, params)
        else:
            self._cursor.execute(self._view.sql(statement), tuple(params))

    def fetchall(self) -> list[list[Any]]:
        return [values(row) for row in self._cursor.fetchall()]


def values(row: Any) -> list[Any]:
    """A row's values in column order, whichever row type the driver returns (PostgreSQL's are dicts)."""
    return list(row.values()) if isinstance(row, dict) else list(row)


def rowcount(cursor: Any) -> int:
    """Rows the last statement changed, whichever store's cursor (eventsourcing's SQLite cursor wraps sqlite3's)."""
    return int(getattr(cursor, "sqlite_cursor", cursor).rowcount)


Cursor = _Cursor  # a view's cursor that writes its statements with `?` placeholders, whichever the store
