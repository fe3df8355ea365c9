"""The last use of each API key: not an event, so not part of any read model built from events.

The API records it at most once a minute per key and process (interfaces/adapters/key_usage.py), the only writer;
the console and the CLI show it beside the keys of the accounts read model (`with_last_use`). It lives in a store
of its own, so that the API's writes never touch the accounts view's file (whose every commit empties the API
workers' key caches, interfaces/adapters/accounts_cache.py). That store is the one the console's read model had
(`console`, table `console_key_usage`): a store upgraded from it keeps every time it held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteTrackingRecorder

from projections.account_rows import KeyRow, iso
from projections.sql import SqlView

STORE = "console"  # the store's name (the SQLite file, the PostgreSQL tables' prefix), kept from the console view


class KeyUseView(SqlView):
    tables = ("CREATE TABLE IF NOT EXISTS console_key_usage (prefix TEXT PRIMARY KEY, last_used_at TEXT NOT NULL)",)

    def record_key_use(self, prefix: str, at: datetime) -> None:
        statement = ("INSERT INTO console_key_usage VALUES (?, ?) ON CONFLICT (prefix) DO UPDATE SET "
                     "last_used_at = excluded.last_used_at WHERE excluded.last_used_at > "
                     "console_key_usage.last_used_at")
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql(statement), (prefix, iso(at)))

    def last_used(self, prefixes: Sequence[str]) -> dict[str, str]:
        if not prefixes:
            return {}
        marks = ", ".join("?" * len(prefixes))
        return {str(p): str(t) for p, t in self.rows(
            f"SELECT prefix, last_used_at FROM console_key_usage WHERE prefix IN ({marks})", tuple(prefixes))}


class SqliteKeyUseView(KeyUseView, SQLiteTrackingRecorder):
    pass


class PostgresKeyUseView(KeyUseView, PostgresTrackingRecorder):
    paramstyle = "format"


def with_last_use(rows: Sequence[KeyRow], uses: KeyUseView) -> list[KeyRow]:
    """The keys with their last use (None: never used)."""
    times = uses.last_used([r.prefix for r in rows])
    return [replace(r, last_used_at=times.get(r.prefix)) for r in rows]
