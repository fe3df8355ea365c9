"""The accounts lookup cached in each process, with a revoked key refused on the very next request.

Every authenticated request looks its API key up in the accounts view (one database round trip). `CachedAccounts`
keeps the records it has read in memory, but only while a `Freshness` source vouches that the view has not changed
since: it answers a token that changes whenever the view may have changed, or None when it cannot tell, and then
every lookup reads the view (fail safe: a stale key is never served).

- `PushedChanges` (with Redis, the production stack): every writer of the accounts view publishes on
  `paywarden:accounts:changed` after its commit (`AccountsView.on_change`), and so does every command of the
  Merchants application once the view holds its events (projections/read_your_writes.py). Each worker process
  holds a subscription and, before answering from its cache, reads whatever has arrived on it (a non-blocking
  read: Redis writes the message to every subscriber before it answers the publisher, so it is there before the
  revoking command returns). While the subscription is not confirmed, broken, or being re-established, the token
  is None: the view is read per request, as without the cache.
- `DataVersion` (the embedded default): SQLite's `PRAGMA data_version` of the view's file, on a connection of the
  worker's own that never writes: SQLite changes it whenever another connection (any process) has committed to
  the file, from the commit on. A few microseconds: no table is read, no transaction of the library's is opened.
- `TrackingPosition` (PostgreSQL without Redis): the view's tracking position, read per request. Each event is
  applied with its tracking record in one transaction, so a changed view has a changed position.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Protocol

from projections.accounts import AccountsView, KeyRecord

if TYPE_CHECKING:  # redis is imported by the stacks that use it, not by every process that reads accounts
    import redis

CHANNEL = "paywarden:accounts:changed"
MAX_RECORDS = 10_000  # keys cached per process; past it the cache starts again (a bound, not an eviction policy)
RESUBSCRIBE_SECONDS = 1.0  # after a broken subscription, the next attempt waits at least this long
log = logging.getLogger("paywarden.accounts_cache")


class Freshness(Protocol):
    def current(self) -> Hashable | None:
        """A token that changes whenever the accounts view may have changed; None: read the view."""


class KeyRecords(Protocol):
    def get_key(self, key_hash: str) -> KeyRecord | None:
        """The record of the API key whose SHA-256 is `key_hash` (the accounts view's authentication read)."""


class CachedAccounts:
    """`get_key` of the accounts view, answered from memory while `freshness` vouches for it: the API's key lookup,
    and nothing else of the view (the console, the CLI and the proxy read the view itself)."""

    def __init__(self, view: KeyRecords, freshness: Freshness, *, max_records: int = MAX_RECORDS) -> None:
        self._view, self._freshness, self._max = view, freshness, max_records
        self._token: Hashable | None = None
        self._records: dict[str, KeyRecord] = {}

    def get_key(self, key_hash: str) -> KeyRecord | None:
        token = self._freshness.current()
        if token is None:
            return self._view.get_key(key_hash)
        if token != self._token:
            self._token, self._records = token, {}
        records = self._records  # the records of this token: a newer token starts a new dict
        if (record := records.get(key_hash)) is not None:
            return record
        # Read after the token: the record is at least as new as the token says the view is.
        record = self._view.get_key(key_hash)
        if record is not None:  # unknown keys are not kept: a guesser cannot fill the memory
            if len(records) >= self._max:
                records.clear()
            records[key_hash] = record
        return record


class DataVersion:
    """Freshness from SQLite's `PRAGMA data_version` of the database file `db_name` (the accounts view's).

    The value changes when a commit by another connection, of this process or another, has changed the file since
    this connection's previous look (https://www.sqlite.org/pragma.html#pragma_data_version); SQLite updates it as
    part of the commit, so there is no moment at which a committed revocation is in the file and the token has not
    moved. The connection is this object's alone and never writes (its own commits would not count). The token
    pairs the value with the connection it came from (a new connection counts afresh); when the file cannot be
    read, the token is None and every lookup reads the view. A forked child opens its own connection.
    """

    def __init__(self, db_name: str) -> None:
        self._db_name = db_name
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._connections = 0  # connections opened so far: the first half of every token

    def current(self) -> Hashable | None:
        try:
            if self._conn is None or self._pid != os.getpid():
                self._open()
            assert self._conn is not None
            return self._connections, self._conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error as unreadable:
            log.warning("cannot read the accounts view's data version (%s): reading the view per request", unreadable)
            self._conn = None
            return None

    def _open(self) -> None:
        self._conn, self._pid = None, os.getpid()
        self._connections += 1
        self._conn = sqlite3.connect(self._db_name, uri=True, check_same_thread=False, isolation_level=None)

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None


class TrackingPosition:
    """Freshness from the view's tracking position of `application_name` (one indexed query per request)."""

    def __init__(self, view: AccountsView, application_name: str) -> None:
        self._view, self._application = view, application_name

    def current(self) -> Hashable | None:
        return self._view.max_tracking_id(self._application) or 0


class PushedChanges:
    """Freshness from a Redis subscription to CHANNEL: the token is a count of what arrived on it, None while the
    subscription is not known to be live. Each process holds its own (a forked child subscribes again)."""

    def __init__(self, url: str, *, timeout_seconds: float = 1.0) -> None:
        self._url, self._timeout = url, timeout_seconds
        self._lock = threading.Lock()  # one reader of the subscription at a time (gevent-patched in workers)
        self._pubsub: Any = None
        self._pid = 0
        self._live = False
        self._generation = 0
        self._retry_at = 0.0
        self.current()  # subscribe now: its confirmation is usually in by the first request

    def current(self) -> Hashable | None:
        import redis

        with self._lock:
            try:
                self._drain()
            except (redis.RedisError, OSError) as down:
                self._drop(down)
            return self._generation if self._live else None

    def _drain(self) -> None:
        if self._pubsub is None or self._pid != os.getpid():
            if time.monotonic() < self._retry_at:
                return
            self._subscribe()
        while (message := self._pubsub.get_message(timeout=0)) is not None:
            if message["type"] == "subscribe":  # confirmed: changes from now on will arrive
                self._live = True
            if message["type"] in ("subscribe", "message"):
                self._generation += 1

    def _subscribe(self) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self._pid, self._live, self._retry_at = os.getpid(), False, time.monotonic() + RESUBSCRIBE_SECONDS
        client = redis.Redis.from_url(self._url, socket_connect_timeout=self._timeout, socket_timeout=self._timeout,
                                      retry=Retry(NoBackoff(), 0), health_check_interval=10)
        self._pubsub = client.pubsub()
        self._pubsub.subscribe(CHANNEL)

    def _drop(self, down: BaseException) -> None:
        import redis

        if self._live:
            log.warning("accounts change subscription lost (%s): reading the accounts view per request", down)
        self._live, self._generation = False, self._generation + 1
        pubsub, self._pubsub = self._pubsub, None
        self._retry_at = time.monotonic() + RESUBSCRIBE_SECONDS
        if pubsub is not None and self._pid == os.getpid():
            try:
                pubsub.close()
            except (redis.RedisError, OSError):
                pass

    def close(self) -> None:
        with self._lock:
            if self._pubsub is not None and self._pid == os.getpid():
                self._pubsub.close()
            self._pubsub, self._live = None, False


class ChangePublisher:
    """Tells every worker that the accounts view changed. Called after each commit of the view (projection worker,
    CLI, console); a failed publish is retried for `patience` seconds, then raised: a worker that missed it would
    serve its cache, so the caller must know (the CLI exits with an error)."""

    def __init__(self, client: redis.Redis, *, patience: float = 10.0) -> None:
        self._client, self._patience = client, patience

    def __call__(self) -> None:
        import redis

        deadline = time.monotonic() + self._patience
        while True:
            try:
                self._client.publish(CHANNEL, b"1")
                return
            except redis.RedisError as down:
                if time.monotonic() >= deadline:
                    raise
                log.warning("could not publish an accounts change (%s); retrying", down)
                time.sleep(0.2)
