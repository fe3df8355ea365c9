"""Every application's event store, found in the configured database and read without its application class.

An application is any SQLite file of the data directory holding `stored_events`, or any PostgreSQL table
`<name>_events` with an event store's columns, so applications added later (console, proxy, webhooks) are audited
without a change here. A reader is a bare `Application` of the same name: it reads, it never writes.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from eventsourcing.application import Application

from interfaces.adapters.postgres import is_postgres
from interfaces.config import Config
from interfaces.container import sqlite_dir, store_env

EVENT_COLUMNS = {"originator_id", "originator_version", "topic", "state", "notification_id"}


def application_names(config: Config) -> list[str]:
    return ApplicationNames(config)()


class ApplicationNames:
    """`application_names`, for a follower that asks every second: a SQLite file found to be an event store stays
    one, and a file that was not is opened again only once it (or its write-ahead log) has changed since."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._stores: set[Path] = set()
        self._others: dict[Path, tuple[tuple[int, int], ...]] = {}  # not an event store when it looked like this

    def __call__(self) -> list[str]:
        if is_postgres(self._config.database_url):
            return _postgres_names(self._config)
        names = []
        for path in sorted(sqlite_dir(self._config).glob("*.db")):
            if path not in self._stores:
                looks = _looks(path)
                if self._others.get(path) == looks:
                    continue
                if not _is_event_store(path):
                    self._others[path] = looks
                    continue
                self._stores.add(path)
                self._others.pop(path, None)
            names.append(path.stem)
        return names


def _looks(path: Path) -> tuple[tuple[int, int], ...]:
    """Size and modification time of the file and of its write-ahead log (where a new table first lands)."""
    looks = []
    for candidate in (path, path.with_name(path.name + "-wal")):
        try:
            st = candidate.stat()
        except FileNotFoundError:
            looks.append((-1, -1))
        else:
            looks.append((st.st_size, st.st_mtime_ns))
    return tuple(looks)


def _is_event_store(path: Path) -> bool:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stored_events'")
        return found.fetchone() is not None


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
