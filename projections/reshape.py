"""A read model whose tables changed shape between releases is rebuilt from the event store, not migrated.

A view names a column its current tables have and an earlier release's did not (`Shape.marker`). When the view is
created over tables of the earlier shape (the marker's table there, the column missing), the tables it lists are
dropped and its tracking position in the application it follows is forgotten, in one transaction, before the view
creates its tables anew; then the projection applies every event again from the first, before the process reads
the view (the composition root brings the views of the logs only commands write level as it builds them,
projections/read_your_writes.py; the projection worker follows as always). Only tables built from events are
dropped so: nothing is lost that the event store cannot give back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from projections.sql import SqlView


@dataclass(frozen=True)
class Shape:
    application_name: str  # whose log the view follows (its tracking position is forgotten)
    marker: tuple[str, str]  # (table, column): the column present in the current shape only
    tables: Sequence[str]  # every table of earlier shapes, dropped (IF EXISTS) when the marker is missing


def columns(view: SqlView, table: str) -> set[str]:
    """The column names of `table` in the view's database (none when it does not exist)."""
    if view.paramstyle == "format":
        rows = view.rows("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                         "AND table_name = ?", (table,))
        return {str(r[0]) for r in rows}
    return {str(r[1]) for r in view.rows(f"PRAGMA table_info({table})")}


def reshape(view: Any, shape: Shape) -> bool:
    """Drop the tables of an earlier shape and forget the view's tracking position; True when it did. Called before
    the view creates its tables (which then are of the current shape); a new view (no marker table) is left alone.
    `view` is a `SqlView` over SQLite's tracking recorder (its tracking table is `tracking`) or PostgreSQL's (which
    names it)."""
    table, column = shape.marker
    found = columns(view, table)
    if not found or column in found:
        return False
    tracking = getattr(view, "tracking_table_name", "tracking")
    with view.datastore.transaction(commit=True) as c:
        for name in shape.tables:
            c.execute(f"DROP TABLE IF EXISTS {name}")
        c.execute(view.sql(f"DELETE FROM {tracking} WHERE application_name = ?"),
                  (shape.application_name,))
    return True
