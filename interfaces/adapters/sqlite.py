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

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eventsourcing import sqlite
from eventsourcing.utils import Environment

FACTORY_TOPIC = "interfaces.adapters.sqlite:SQLiteFactory"
SYNCHRONOUS = "SQLITE_SYNCHRONOUS"
LEVELS = ("FULL", "NORMAL")


class SQLiteFactory(sqlite.SQLiteFactory):
    """eventsourcing's SQLite factory; each new connection runs `PRAGMA synchronous=<SQLITE_SYNCHRONOUS>`."""

    def __init__(self, env: Environment | dict[str, str] | None) -> None:
        super().__init__(env)
        level = (self.env.get(SYNCHRONOUS) or "FULL").strip().upper()
        if level not in LEVELS:
            raise OSError(f"{SYNCHRONOUS} must be one of {', '.join(LEVELS)}, got {level!r}")
        self.synchronous = level
        pool = self.datastore.pool
        connect = pool._create_connection  # the library has no hook for connection set-up; wrap its factory

        def create_connection() -> sqlite.SQLiteConnection:
            connection = connect()
            connection._sqlite_conn.execute(f"PRAGMA synchronous={level}")
            return connection

        pool._create_connection = create_connection  # type: ignore[method-assign]


def fsync_database(db_path: Path) -> Callable[[], None]:
    """A barrier: fsync the database's WAL and main file, so every commit made before it survives a power cut.

    With `synchronous=NORMAL` a commit is in the WAL file but maybe not yet on the disk; `fsync` on the WAL file
    is exactly what `synchronous=FULL` would have done at that commit (and covers every earlier commit, the WAL
    being written in order). The main file is synced too, for frames a checkpoint has already moved into it.
    """
    paths = (Path(f"{db_path}-wal"), db_path)

    def barrier() -> None:
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # no WAL: everything is in the main file, synced by the checkpoint that removed it
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    return barrier


class DurableSends:
    """A `Chain` decorator: before a transaction is sent, the barrier makes the payments store durable.

    Payments records a broadcast (`Submitted`, with the settle-once claims) in one save and only then calls
    `send`; `_resend` sends the same recorded bytes again. So when `send` runs, the record that forbids a second
    broadcast is on the disk, whatever the store's synchronous level: no power cut can make Paywarden forget a
    transaction it sent. Everything else passes through.
    """

    def __init__(self, inner: Any, barrier: Callable[[], None]) -> None:
        self.inner, self._barrier = inner, barrier

    def send(self, transaction: bytes) -> str:
        self._barrier()
        return self.inner.send(transaction)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def durable_sends(chains: Any, db_path: Path) -> Any:
    """Wrap each adapter of a `Chains` in place; idempotent."""
    barrier = fsync_database(db_path)
    for caip2, chain in list(chains.by_network.items()):
        if not isinstance(chain, DurableSends):
            chains.by_network[caip2] = DurableSends(chain, barrier)
    return chains
