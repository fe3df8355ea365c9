"""A read model whose tables changed shape between releases is rebuilt from the event store, not migrated.

A view (`ReshapedView`) names a column its current tables have and an earlier release's did not (`Shape.marker`).
When the view is created over tables of the earlier shape (the marker's table there, the column missing; or, for a
table the earlier release did not have, the marker's table missing while a table of every release, `Shape.anchor`,
is there), the tables
it lists are dropped and its tracking position in the application it follows is forgotten, in one transaction,
before the view creates its tables anew; then the projection applies every event again from the first, before the
process reads the view (the composition root brings the views of the logs only commands write level as it builds
them, projections/read_your_writes.py; the projection worker follows as always). Only tables built from events are
dropped so: nothing is lost that the event store cannot give back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from projections.sql import Cursor, SqlView


@dataclass(frozen=True)
class Shape:
    application_name: str  # whose log the view follows (its tracking position is forgotten)
    marker: tuple[str, str]  # (table, column): the column present in the current shape only
    tables: Sequence[str]  # every table of earlier shapes, dropped (IF EXISTS) when the marker is missing
    # A table every shape has, when the marker is a table of the current shape only: the marker's table missing
    # beside it is the earlier shape (without an anchor, a missing marker table is a new view).
    anchor: str = ""


class ReshapedView(SqlView):
    """A view whose tables changed shape once: reshaped (when of the earlier shape) before it creates them."""

    shape: Shape

    def create_table(self) -> None:
        reshape(self, self.shape)
        super().create_table()  # type: ignore[misc]  # the tracking recorder's (SqlView precedes it in the MRO)


def columns(view: SqlView, table: str, cursor: Cursor | None = None) -> set[str]:
    """The column names of `table` in the view's database (none when it does not exist); read in `cursor`'s
    transaction when given."""
    if view.paramstyle == "format":
        statement = ("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                     "AND table_name = ?")
        params: tuple[str, ...] = (table,)
    else:
        statement, params = f"PRAGMA table_info({table})", ()
    if cursor is not None:
        cursor.execute(statement, params)
        rows = cursor.fetchall()
    else:
        rows = view.rows(statement, params)
    return {str(r[0] if view.paramstyle == "format" else r[1]) for r in rows}


def reshape(view: Any, shape: Shape) -> bool:
    """Drop the tables of an earlier shape and forget the view's tracking position; True when it did. Called before
    the view creates its tables (which then are of the current shape); a new view (no marker table) is left alone.
    `view` is a `SqlView` over SQLite's tracking recorder (its tracking table is `tracking`) or PostgreSQL's (which
    names it)."""
    if _current(view, shape):
        return False  # the usual case: one read, no write at start-up
    tracking = getattr(view, "tracking_table_name", "tracking")
    with view.datastore.transaction(commit=True) as c:
        cursor = Cursor(c, view)
        # Processes starting at once (the API's workers, the projection worker, other hosts): one reshapes, the
        # others wait here, then find the current shape (or no table yet) and leave it be. PostgreSQL: a lock for
        # the transaction; SQLite: a write (of nothing) first, which takes the database's write lock.
        if view.paramstyle == "format":
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"paywarden reshape {shape.marker[0]}",))
        else:
            cursor.execute(f"DELETE FROM {tracking} WHERE application_name = ?", ("",))
        if _current(view, shape, cursor):
            return False
        for name in shape.tables:
            cursor.execute(f"DROP TABLE IF EXISTS {name}")
        cursor.execute(f"DELETE FROM {tracking} WHERE application_name = ?", (shape.application_name,))
    return True


def _current(view: Any, shape: Shape, cursor: Cursor | None = None) -> bool:
    """The view's tables are of the current shape, or not there yet (a new view)."""
    table, column = shape.marker
    found = columns(view, table, cursor)
    if found:
        return column in found
    return not shape.anchor or not columns(view, shape.anchor, cursor)
