"""Every read model the projections define on SQLite has its PostgreSQL twin in `POSTGRES_VIEWS`, the class
`build_view` makes in its place on PostgreSQL: a view added without one would fail only on a PostgreSQL deployment."""

from __future__ import annotations

import importlib
import pkgutil

from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteTrackingRecorder

import projections
from interfaces.container import POSTGRES_VIEWS
from projections.sql import SqlView


def subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | subclasses(sub)
    return found


def test_every_sqlite_view_has_its_postgres_twin_sharing_its_read_model():
    for module in pkgutil.iter_modules(projections.__path__):
        importlib.import_module(f"projections.{module.name}")
    sqlite_views = {c for c in subclasses(SqlView) if issubclass(c, SQLiteTrackingRecorder)
                    and c.__module__.startswith("projections.")}
    assert sqlite_views and sqlite_views == set(POSTGRES_VIEWS)
    for sqlite_view, postgres_view in POSTGRES_VIEWS.items():
        assert issubclass(postgres_view, PostgresTrackingRecorder)
        model = sqlite_view.__mro__[1]  # the read model's class, holding every query
        assert issubclass(postgres_view, model) and issubclass(sqlite_view, model)
