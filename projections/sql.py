"""What the SQLite and PostgreSQL views share: statements written once with `?` placeholders.

A view subclasses `SqlView` and the tracking recorder of its database; each write runs in one transaction with
its tracking record, so an event is applied exactly once however often a runner restarts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import Tracking


class SqlView:
    """Mixin over `SQLiteTrackingRecorder` / `PostgresTrackingRecorder`."""

    paramstyle = "qmark"
    tables: Sequence[str] = ()

    def sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.paramstyle == "format" else statement

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *map(self.sql, self.tables)]  # type: ignore[misc]

    @contextmanager
    def tracked(self, tracking: Tracking) -> Iterator[Any]:
        """A cursor in a transaction that also records `tracking` (and fails if it was recorded before)."""
        with self.datastore.transaction(commit=True) as c:  # type: ignore[attr-defined]
            yield _Cursor(c, self)
            self._insert_tracking(c, tracking)  # type: ignore[attr-defined]

    def rows(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:  # type: ignore[attr-defined]
            c.execute(self.sql(statement), tuple(params))
            return list(c.fetchall())


class _Cursor:
    def __init__(self, cursor: Any, view: SqlView) -> None:
        self._cursor, self._view = cursor, view

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        self._cursor.execute(self._view.sql(statement), tuple(params))
        return self._cursor

    def fetchall(self) -> list[Any]:
        return list(self._cursor.fetchall())
