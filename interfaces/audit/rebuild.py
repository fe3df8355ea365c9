"""Rebuild and compare: replay the event store into fresh copies of every read model, then compare row by row.

Every SQL read model registered in `interfaces.runtime.workers.PROJECTIONS` is rebuilt (so read models added later are
covered without a change here) in a scratch place: a temporary directory of SQLite files, or a scratch PostgreSQL
schema (`paywarden_rebuild_…`, dropped afterwards) reached through `search_path`. The live views are only read.
Each copy is replayed up to the live view's own tracking position, and the live rows are read between two equal
readings of that position, so a running service that moves on meanwhile causes a retry, not a false difference.
The Redis result cache is rebuilt in memory and compared key by key (entries past their expiry excepted).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eventsourcing.application import Application
from eventsourcing.persistence import InfrastructureFactory, Tracking
from eventsourcing.projection import Projection
from eventsourcing.utils import Environment

from interfaces.adapters.postgres import PostgresFactory, is_postgres, postgres_env
from interfaces.config import Config
from interfaces.container import Container
from projections.results import ResultCacheProjection, ResultCacheView
from projections.sql import SqlView

BATCH = 500
ATTEMPTS = 5
TABLE = re.compile(r"CREATE (?:VIRTUAL )?TABLE IF NOT EXISTS (\w+)", re.IGNORECASE)  # FTS5's are virtual


@dataclass
class Comparison:
    name: str
    rows: int = 0
    differences: list[str] = field(default_factory=list)


class ScratchPostgresFactory(PostgresFactory):
    """The project's PostgreSQL factory, whose connections see only the scratch schema (POSTGRES_SCHEMA)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        kwargs = self.datastore.pool.kwargs
        assert isinstance(kwargs, dict), "the pool is built with its connection arguments"
        kwargs["options"] = f"-c search_path={self.datastore.schema}"


def replay(app: Application, projection: Any, upto: int | None, on_event: Any = None) -> int:
    """Apply the application's events to `projection` in order, up to notification `upto` (all when None)."""
    done, position = 0, None
    if upto is None:
        upto = app.recorder.max_notification_id() or 0
    while True:
        notifications = app.recorder.select_notifications(position, BATCH, stop=upto, topics=projection.topics,
                                                          inclusive_of_start=False)
        for n in notifications:
            event = app.mapper.to_domain_event(n)
            if on_event is not None:
                on_event(event)
            projection.process_event(event, Tracking(app.name, n.id))
            done += 1
        if len(notifications) < BATCH:
            return done
        position = notifications[-1].id


@contextmanager
def _views(env_of: Callable[[str], dict[str, str]]) -> Iterator[Any]:
    """A function building an empty view of a class under a name, with `env_of(name)`; every view closed after."""
    views: list[Any] = []

    def build(name: str, view_class: type[Any]) -> Any:
        view = InfrastructureFactory.construct(env=Environment(name, env_of(name))).tracking_recorder(view_class)
        views.append(view)
        return view

    try:
        yield build
    finally:
        for view in views:
            view.datastore.close()


@contextmanager
def scratch(config: Config) -> Iterator[Any]:
    """A function building a fresh, empty view of a given class in a scratch place, removed afterwards."""
    if is_postgres(config.database_url):
        import psycopg

        schema = f"paywarden_rebuild_{secrets.token_hex(6)}"
        env = postgres_env(config.database_url, pool_max=2)
        connect: dict[str, Any] = dict(dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"],
                                       port=env["POSTGRES_PORT"], user=env["POSTGRES_USER"],
                                       password=env["POSTGRES_PASSWORD"] or None, autocommit=True)
        with psycopg.connect(**connect) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        scratch_env = {**env, "POSTGRES_SCHEMA": schema,
                       "PERSISTENCE_MODULE": "interfaces.audit.rebuild:ScratchPostgresFactory"}
        try:
            with _views(lambda name: scratch_env) as build:
                yield build
        finally:
            with psycopg.connect(**connect) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        return
    directory = Path(tempfile.mkdtemp(prefix="paywarden-rebuild-"))
    try:
        with _views(lambda name: {"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                                  "SQLITE_DBNAME": str(directory / f"{name}.db")}) as build:
            yield build
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def rebuild_all(container: Container, *, check: bool) -> list[Comparison]:
    """Rebuild every read model; with `check`, compare each with the live one."""
    from interfaces.runtime.workers import PROJECTIONS

    results = []
    with scratch(container.config) as fresh_view:
        for spec in PROJECTIONS.values():
            if not spec.available(container):
                continue
            live, app = spec.view(container), spec.application(container)
            if isinstance(live, SqlView):
                results.append(_sql(spec.name, app, spec.projection, live, fresh_view, check))
            elif isinstance(live, ResultCacheView):
                results.append(_result_cache(spec.name, app, live, check, container.redis))
    return results


def _sql(name: str, app: Application, projection_class: Any, live: Any, fresh_view: Any,
         check: bool) -> Comparison:
    skipped = set(getattr(live, "not_from_events", ()))  # e.g. the catalog's search rows
    tables = [m.group(1) for t in live.tables if (m := TABLE.search(t)) and m.group(1) not in skipped]
    comparison = Comparison(name)
    for _ in range(ATTEMPTS):
        position = live.max_tracking_id(app.name)
        live_rows = {t: _dump(live, t) for t in tables} if check else {}
        if live.max_tracking_id(app.name) == position:
            break
    else:
        comparison.differences.append(f"{name}: the live view kept moving; compare again when traffic is lower")
        return comparison
    copy = fresh_view(name, type(live))
    projection: Projection[Any] = projection_class(copy)
    comparison.rows = replay(app, projection, position or 0) if position else 0
    if check:
        for table in tables:
            comparison.differences.extend(_differences(table, live_rows[table], _dump(copy, table)))
    return comparison


def _dump(view: Any, table: str) -> dict[str, list[Any]]:
    """The table's rows keyed by their first column's value and the rest (a stable, hashable key)."""
    rows = view.rows(f"SELECT * FROM {table}")
    keyed: dict[str, list[Any]] = {}
    for row in rows:
        normal = [_normal(v) for v in row]
        keyed[json.dumps(normal, default=str, sort_keys=True)] = normal
    return keyed


def _normal(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _differences(table: str, live: dict[str, list[Any]], rebuilt: dict[str, list[Any]]) -> list[str]:
    out = []
    live_by_key = {json.dumps(v[0], default=str): (k, v) for k, v in live.items()}
    rebuilt_by_key = {json.dumps(v[0], default=str): (k, v) for k, v in rebuilt.items()}
    for k in sorted(set(live) - set(rebuilt)):
        first = json.dumps(live[k][0], default=str)
        if first in rebuilt_by_key and rebuilt_by_key[first][0] not in live:
            twin = rebuilt_by_key[first][1]
            out.append(f"{table}: row {first} differs: live {_short(live[k])} rebuilt {_short(twin)}")
        else:
            out.append(f"{table}: row {first} is live but not in the rebuilt copy: {_short(live[k])}")
    for k in sorted(set(rebuilt) - set(live)):
        first = json.dumps(rebuilt[k][0], default=str)
        if not (first in live_by_key and live_by_key[first][0] not in rebuilt):
            out.append(f"{table}: row {first} is missing from the live view: {_short(rebuilt[k])}")
    return out


def _short(row: list[Any]) -> str:
    text = json.dumps(row, default=str)
    return text if len(text) <= 400 else text[:397] + "..."


# -- the Redis result cache -----------------------------------------------------------------------------------


class MemoryResultCacheView(ResultCacheView):
    """The result cache rebuilt in memory, remembering when (by event time) each key was last written."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[Any, datetime]] = {}
        self.now = datetime.now(UTC)
        self.positions: dict[str, int] = {}

    def max_tracking_id(self, application_name: str) -> int | None:
        return self.positions.get(application_name)

    def insert_tracking(self, tracking: Tracking) -> None:
        self.record(tracking)

    def payment(self, payment_id: str) -> dict[str, Any] | None:
        found = self.values.get(f"payment:{payment_id}")
        return found[0] if found else None

    def record(self, tracking: Tracking, *, payment_id: str | None = None, payment: dict[str, Any] | None = None,
               results: Any = None) -> None:
        self.positions[tracking.application_name] = tracking.notification_id
        if payment_id is not None and payment is not None:
            self.values[f"payment:{payment_id}"] = (payment, self.now)
        for (key, operation), result in (results or {}).items():
            self.values[f"result:{operation}:{key}"] = (result, self.now)


def _result_cache(name: str, app: Application, live: Any, check: bool, client: Any) -> Comparison:
    from interfaces.adapters.redis import PREFIX, RESULT_TTL_SECONDS

    comparison = Comparison(name)
    position = live.max_tracking_id(app.name)
    copy = MemoryResultCacheView()

    def at(event: Any) -> None:
        copy.now = event.timestamp

    comparison.rows = replay(app, ResultCacheProjection(copy), position or 0, at) if position else 0
    if not check:
        return comparison
    horizon = time.time() - RESULT_TTL_SECONDS + 60  # entries written before it may have expired in Redis
    prefixes = (f"{PREFIX}:result:", f"{PREFIX}:result_cache:payment:")
    live_keys = {k.decode() for p in prefixes for k in client.scan_iter(match=f"{p}*", count=1000)}
    for suffix, (value, written) in sorted(copy.values.items()):
        key = f"{PREFIX}:result_cache:{suffix}" if suffix.startswith("payment:") else f"{PREFIX}:{suffix}"
        live_keys.discard(key)
        raw = client.get(key)
        if raw is None:
            if written.timestamp() >= horizon:
                comparison.differences.append(f"{name}: {key} is missing from Redis")
            continue
        if json.loads(raw) != value:
            comparison.differences.append(f"{name}: {key} differs: live {raw.decode()[:300]} rebuilt "
                                          f"{json.dumps(value)[:300]}")
    for key in sorted(live_keys):
        comparison.differences.append(f"{name}: {key} is in Redis but no event wrote it")
    return comparison
