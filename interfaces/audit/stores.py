"""Every application's event store, found in the configured database and read without its application class.

An application is any SQLite file of the data directory holding `stored_events`, or any PostgreSQL table
`<name>_events` with an event store's columns, so applications added later (console, proxy, webhooks) are audited
without a change here. A reader is a bare `Application` of the same name: it reads, it never writes.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing

from eventsourcing.application import Application

from interfaces.adapters.postgres import is_postgres
from interfaces.config import Config
from interfaces.container import sqlite_dir, store_env

EVENT_COLUMNS = {"originator_id", "originator_version", "topic", "state", "notification_id"}


def application_names(config: Config) -> list[str]:
    if is_postgres(config.database_url):
        return _postgres_names(config)
    names = []
    for path in sorted(sqlite_dir(config).glob("*.db")):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stored_events'")
            if found.fetchone():
                names.append(path.stem)
    return names


def _postgres_names(config: Config) -> list[str]:
    import psycopg

    env = store_env(config, "audit")
    with psycopg.connect(dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
                         user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"] or None,
                         connect_timeout=int(env["POSTGRES_CONNECT_TIMEOUT"])) as conn:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = current_schema() AND table_name LIKE '%\\_events'").fetchall()
    columns: dict[str, set[str]] = {}
    for table, column in rows:
        columns.setdefault(table, set()).add(column)
    return sorted(t.removesuffix("_events") for t, c in columns.items() if EVENT_COLUMNS <= c)


def reader(config: Config, name: str) -> Application:
    """A read-only view of application `name`'s event store (its notification log and aggregates' events)."""
    cls = type(name.capitalize(), (Application,), {})
    return cls(env=store_env(config, name))
