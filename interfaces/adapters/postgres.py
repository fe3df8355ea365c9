"""PostgreSQL as the event store and read-model database, through `eventsourcing.postgres` (psycopg 3, pooled).

`postgres_env` turns `PAYWARDEN_DATABASE_URL` into the `POSTGRES_*` environment of one application or view.
Each application gets its own events table (`payments_events`, `merchants_events`: eventsourcing names it after
the application) and each view its own tracking table (`accounts_tracking`), so any number of applications share
one database without sharing a table.

`PostgresFactory` is eventsourcing's factory with three changes: schema creation runs under a PostgreSQL
advisory lock, so processes starting at once (two `serve` hosts, a worker and the CLI) create each table exactly
once instead of racing on `CREATE TYPE` / `CREATE TABLE IF NOT EXISTS` (which fail concurrently in PostgreSQL);
its pool gives up a reconnection chain after a few seconds so the next request retries at once; a request fails
within one pool timeout once the database has been out of reach for two (`BoundedDatastore`); and applications
insert their events in one round trip (`PostgresApplicationRecorder`). See docs/production.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import psycopg
import psycopg_pool
from eventsourcing import postgres
from eventsourcing.persistence import InterfaceError, OperationalError, PersistenceError, StoredEvent
from eventsourcing.utils import retry
from psycopg.sql import SQL, Identifier

from interfaces.config import ConfigError, without_password

# The pg_advisory_lock key of schema creation: any constant no other software on the database uses.
SCHEMA_LOCK_KEY = 0x2F6B_5D0E_7A31_4C19
FACTORY_TOPIC = "interfaces.adapters.postgres:PostgresFactory"
RECONNECT_SECONDS = 3.0
IDLE_SECONDS = 60.0  # an idle pooled connection is closed after this (the pools keep none open)
# A server or network that vanishes without a reset (a host powered off, a partition, a firewall dropping the flow)
# would leave a query waiting for its answer forever: TCP keepalives find the dead peer within ~11 s (5 s idle, then
# 3 probes 2 s apart), and tcp_user_timeout fails a send unacknowledged for 10 s. libpq's own settings; ignored on a
# Unix socket, where the kernel reports a dead server at once.
LIVENESS = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
            "tcp_user_timeout": 10_000}


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def postgres_env(url: str, *, pool_max: int = 10, timeout_seconds: int = 2) -> dict[str, str]:
    """The eventsourcing environment for a `postgresql://user:password@host:port/dbname` URL.

    The pool opens connections when they are used, up to `pool_max` under load, and closes those idle for
    IDLE_SECONDS: a process holds none for the stores it does not use (every process builds every store, and one
    connection kept per store and process exhausted PostgreSQL's default 100 with two workers). With gevent every
    waiting request is a greenlet, so a small pool per process serves many concurrent requests. `timeout_seconds`
    bounds the wait for a pooled connection: a database outage surfaces as an error within seconds, never a hang.
    """
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        raise ConfigError(f"PAYWARDEN_DATABASE_URL must name a database (…/dbname), got {without_password(url)!r}")
    host = parts.hostname or query.get("host", [""])[0]
    try:
        port = parts.port or 5432
    except ValueError:
        raise ConfigError(f"PAYWARDEN_DATABASE_URL has a bad port: {without_password(url)!r}") from None
    return {
        "PERSISTENCE_MODULE": FACTORY_TOPIC,
        "POSTGRES_DBNAME": dbname,
        "POSTGRES_HOST": host,
        "POSTGRES_PORT": str(port),
        "POSTGRES_USER": unquote(parts.username or "") or query.get("user", [""])[0],
        "POSTGRES_PASSWORD": unquote(parts.password or "") or query.get("password", [""])[0],
        "POSTGRES_POOL_SIZE": "0",
        "POSTGRES_MAX_OVERFLOW": str(pool_max),
        "POSTGRES_CONNECT_TIMEOUT": str(timeout_seconds),
        "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": "5",
        "POSTGRES_LOCK_TIMEOUT": "5",
    }


@contextmanager
def schema_lock(datastore: postgres.PostgresDatastore) -> Iterator[None]:
    """Hold the schema advisory lock on a connection of its own (the pool's are busy creating the tables)."""
    pool_kwargs = datastore.pool.kwargs if isinstance(datastore.pool.kwargs, dict) else {}
    kwargs: dict[str, Any] = {k: v for k, v in pool_kwargs.items() if k != "row_factory"}
    with psycopg.connect(**kwargs, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))


class PostgresApplicationRecorder(postgres.PostgresApplicationRecorder):
    """eventsourcing's application recorder, inserting in one round trip instead of three.

    The library's insert is a pipelined transaction (BEGIN; LOCK TABLE … IN EXCLUSIVE MODE; NOTIFY; INSERT;
    COMMIT): the lock makes commit order equal notification order, so a follower never skips an event committed
    late with a lower id. Here the same statements run inside a PL/pgSQL function called as one autocommit
    statement, whose implicit transaction holds the lock until it commits: the same guarantee, one round trip.
    The library has such a function too (POSTGRES_ENABLE_DB_FUNCTIONS), but without the table lock and with one
    name per database, which two applications in one database would overwrite; this one is named per table.
    """

    def __init__(self, datastore: postgres.PostgresDatastore, *, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        name = f"{events_table_name}_insert"
        self.check_identifier_length(name)
        schema, table = Identifier(datastore.schema), Identifier(events_table_name)
        self.pg_function_name_insert_events = name
        self.sql_invoke_pg_function_insert_events = SQL("SELECT * FROM {0}.{1}((%s))").format(schema, Identifier(name))
        self.sql_create_statements[self.create_insert_function_statement_index] = SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}(events {schema}.{event}[]) RETURNS SETOF bigint "
            "LANGUAGE plpgsql AS $BODY$ BEGIN "
            "SET LOCAL lock_timeout = '{lock_timeout}s'; "
            "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE; "
            "NOTIFY {channel}; "
            "RETURN QUERY INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state) "
            "SELECT originator_id, originator_version, topic, state FROM unnest(events) RETURNING notification_id; "
            "END; $BODY$"
        ).format(schema=schema, function=Identifier(name), event=Identifier(self.stored_event_type_name),
                 lock_timeout=datastore.lock_timeout, table=table, channel=Identifier(self.channel_name))

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if not stored_events:
            return None
        rows = [self.construct_pg_stored_event(e.originator_id, e.originator_version, e.topic, e.state)
                for e in stored_events]
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self.sql_invoke_pg_function_insert_events, (rows,), prepare=True)
            return [row[self.pg_function_name_insert_events] for row in curs.fetchall()]


class DatabaseUnreachable(PersistenceError):
    """No pooled connection for longer than the outage a store rides out: raised instead of eventsourcing's
    `OperationalError`, so that no retry decorator (they retry `OperationalError` and `InterfaceError`) waits the
    pool's timeout again."""


OUTAGE_RIDDEN = 2  # pool timeouts (PAYWARDEN_DATABASE_TIMEOUT_SECONDS) of an outage a request rides out


class BoundedDatastore(postgres.PostgresDatastore):
    """eventsourcing's PostgreSQL datastore, whose `get_connection` fails at once once the database has been out of
    reach for `ride_seconds`.

    eventsourcing's recorders and ours retry a statement that fails with `OperationalError` ten times, 0.2 s apart,
    and a pool that cannot connect fails each `getconn` only after its whole timeout: during an outage every request
    would wait ten timeouts (~22 s at the default 2 s) before its 500, where the operator is promised one. The first
    `getconn` that times out starts the outage's clock; an outage shorter than `ride_seconds` is still ridden out
    by the retries (a request waits for the database's return), and once the clock has passed `ride_seconds` a
    timed-out `getconn` raises `DatabaseUnreachable`, which no retry catches: a request then fails after one
    timeout. A connection handed out to anyone stops the clock, so a pool that is only busy (connections coming
    back) never reaches it. Errors of a statement on a connection (a connection broken by a restart) are retried
    as before. Built with the library's documented constructor arguments (`PostgresFactory`, below)."""

    def __init__(self, *args: Any, ride_seconds: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ride_seconds = ride_seconds
        self._outage_began: float | None = None  # when the first timed-out getconn of this outage ended

    @contextmanager
    def get_connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with super().get_connection() as conn:
                self._outage_began = None
                yield conn
        except OperationalError as failed:
            if not isinstance(failed.__cause__, psycopg_pool.PoolTimeout):
                raise
            if self._outage_began is None:
                self._outage_began = time.monotonic()
            elif time.monotonic() - self._outage_began >= self.ride_seconds:
                raise DatabaseUnreachable(f"no database connection for over {self.ride_seconds:g} s (the database "
                                          f"out of reach, or every pooled connection busy that long): {failed}"
                                          ) from failed
            raise


def bounded_datastore(library: postgres.PostgresDatastore, ride_seconds: float) -> BoundedDatastore:
    """A `BoundedDatastore` with the settings the library's factory read from the environment into `library` (which
    has opened no connection yet): its documented constructor arguments, read back from the datastore and its pool
    (a psycopg_pool `ConnectionPool`, whose settings are public attributes)."""
    pool = library.pool
    connect = dict(pool.kwargs) if isinstance(pool.kwargs, dict) else {}
    return BoundedDatastore(
        connect["dbname"], connect["host"], connect["port"], connect["user"], connect["password"],
        connect_timeout=pool.timeout, idle_in_transaction_session_timeout=library.idle_in_transaction_session_timeout,
        pool_size=pool.min_size, max_overflow=pool.max_size - pool.min_size, max_waiting=pool.max_waiting,
        conn_max_age=pool.max_lifetime, pre_ping=library.pre_ping, lock_timeout=library.lock_timeout,
        schema=library.schema, pool_open_timeout=library.pool_open_timeout, get_password_func=pool.get_password_func,
        single_row_tracking=library.single_row_tracking, enable_db_functions=library.enable_db_functions,
        originator_id_type="text" if library.originator_id_type == "text" else "uuid", ride_seconds=ride_seconds,
    )


class PostgresFactory(postgres.PostgresFactory):
    """eventsourcing's PostgreSQL factory, with schema creation serialized across processes, a pool that comes
    back quickly after an outage, and one-round-trip inserts."""

    application_recorder_class = PostgresApplicationRecorder

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        library = self.datastore
        self.datastore = bounded_datastore(library, OUTAGE_RIDDEN * library.pool.timeout)
        library.close()
        # psycopg_pool retries a lost connection with a doubling delay for 5 minutes: after a 30 s outage the
        # next attempt may be 30 s away. Giving up after RECONNECT_SECONDS lets the next request start a fresh
        # attempt at once, so service resumes within seconds of the database's return.
        self.datastore.pool.reconnect_timeout = RECONNECT_SECONDS
        self.datastore.pool.max_idle = IDLE_SECONDS  # read when the pool opens (its first use)
        if isinstance(connect := self.datastore.pool.kwargs, dict):  # every pooled connection's connect() arguments
            connect.update(LIVENESS)

    def aggregate_recorder(self, purpose: str = "events") -> Any:
        with self._creating():
            return super().aggregate_recorder(purpose)

    def application_recorder(self) -> Any:
        with self._creating():
            return super().application_recorder()

    def tracking_recorder(self, tracking_recorder_class: Any = None) -> Any:
        with self._creating():
            return super().tracking_recorder(tracking_recorder_class)

    def process_recorder(self) -> Any:
        with self._creating():
            return super().process_recorder()

    @contextmanager
    def _creating(self) -> Iterator[None]:
        if not self.env_create_table():
            yield
            return
        with schema_lock(self.datastore):
            yield
        release_idle_connections(self.datastore.pool)


def release_idle_connections(pool: Any) -> None:
    """Close the pool's idle connections now. Creating a store's tables takes a connection, and every process
    builds every store: kept until IDLE_SECONDS, they were over a hundred while a stack started (PostgreSQL's
    default limit). psycopg_pool has no public call for this (closing or draining a connection makes it open a
    replacement): its private names, pinned to the versions tested (setup.cfg: psycopg-pool>=3.3,<3.4) and
    guarded by tests/integration/test_postgres_pool.py. If they change, the idle timeout still closes them."""
    try:
        while True:
            with pool._lock:
                if not pool._pool or pool._nconns <= pool.min_size:
                    return
                conn = pool._pool.popleft()
                pool._nconns -= 1
            pool._close_connection(conn)
    except AttributeError:
        return
