"""What the SQLite and PostgreSQL views share: statements written once with `?` placeholders.

A view subclasses `SqlView` and the tracking recorder of its database; each write runs in one transaction with
its tracking record, so an event is applied exactly once however often a runner restarts. Inside `batch()` (the
projection runner's, projections/runner.py) the writes of many events and their tracking records share one
transaction: one commit for a whole batch of notifications, still all or nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError, Tracking, TrackingRecorder
from eventsourcing.utils import retry


class SqlView(TrackingRecorder):
    """A tracking recorder's SQL, over `SQLiteTrackingRecorder` / `PostgresTrackingRecorder` (the concrete view
    subclasses one of them; a PostgreSQL view sets `paramstyle`)."""

    paramstyle = "qmark"
    tables: Sequence[str] = ()
    datastore: Any  # the SQLite or PostgreSQL datastore of the recorder this view is

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
        `batch()`, the batch's transaction."""
        batch = self._batch_local().cursor
        if batch is not None:
            yield _Cursor(batch, self)
            self._insert_tracking(batch, tracking)  # type: ignore[attr-defined]
            return
        with self.datastore.transaction(commit=True) as c:
            yield _Cursor(c, self)
            self._insert_tracking(c, tracking)  # type: ignore[attr-defined]

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every `tracked` write of this thread until the block ends goes into one transaction, committed at its
        end; an exception (IntegrityError: another runner applied one of the events first) rolls all back."""
        local = self._batch_local()
        if local.cursor is not None:  # already in a batch: part of it
            yield
            return
        with self.datastore.transaction(commit=True) as c:
            local.cursor = c
            try:
                yield
            finally:
                local.cursor = None

    def _batch_local(self) -> threading.local:
        local = self.__dict__.get("_batch")
        if local is None:
            local = self.__dict__.setdefault("_batch", threading.local())
        if not hasattr(local, "cursor"):
            local.cursor = None
        return local

    # A pooled connection broken by a database restart fails once; the retry takes a fresh one.
    @retry((InterfaceError, OperationalError), max_attempts=2, wait=0.05)
    def rows(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        batch = self._batch_local().cursor
        if batch is not None:  # a projection reading inside a batch reads the batch's own writes
            batch.execute(self.sql(statement), tuple(params))
            return [values(row) for row in batch.fetchall()]
        if self.paramstyle == "format":  # one autocommit statement: no BEGIN/ROLLBACK round trips
            with self.datastore.get_connection() as conn, conn.cursor() as c:
                c.execute(self.sql(statement), tuple(params))
                return [values(row) for row in c.fetchall()]
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.sql(statement), tuple(params))
            return [values(row) for row in c.fetchall()]


class _Cursor:
    def __init__(self, cursor: Any, view: SqlView) -> None:
        self._cursor, self._view = cursor, view

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        self._cursor.execute(self._view.sql(statement), tuple(params))
        return self._cursor

    def fetchall(self) -> list[list[Any]]:
        return [values(row) for row in self._cursor.fetchall()]


def values(row: Any) -> list[Any]:
    """A row's values in column order, whichever row type the driver returns (PostgreSQL's are dicts)."""
    return list(row.values()) if isinstance(row, dict) else list(row)
