"""A store that creates its tables on PostgreSQL keeps no connection idle afterwards (`release_idle_connections`,
interfaces/adapters/postgres.py): every process builds every store, and each kept the connection that created its
tables, ~80 at rest for a stack, past PostgreSQL's default limit beside other suites. psycopg_pool has no public
call for it; this fails if the pool's internals change shape (the release then does nothing)."""

from __future__ import annotations

from pathlib import Path

from interfaces.adapters.postgres import LIVENESS
from interfaces.config import Config
from interfaces.container import build_view
from projections.payment_list import SqlitePaymentListView


def test_a_store_that_created_its_tables_keeps_no_idle_connection(tmp_path: Path, empty_postgres_url: str) -> None:
    view = build_view(Config(data_dir=tmp_path, database_url=empty_postgres_url), "payment_list",
                      SqlitePaymentListView)
    try:
        pool = view.datastore.pool
        assert pool.get_stats().get("pool_available", 0) == 0
        assert view.max_tracking_id("payments") is None  # it works: the next use opens a connection again
        assert pool.get_stats().get("pool_available", 0) == 1  # and keeps it, until IDLE_SECONDS
    finally:
        view.datastore.close()


def test_pooled_connections_find_a_silently_dead_server(tmp_path: Path, postgres_url: str) -> None:
    """A server gone without a reset would leave a query waiting forever: every pooled connection is made with
    libpq's TCP keepalives and tcp_user_timeout (`LIVENESS`, interfaces/adapters/postgres.py)."""
    view = build_view(Config(data_dir=tmp_path, database_url=postgres_url), "payment_list", SqlitePaymentListView)
    try:
        with view.datastore.get_connection() as conn:
            parameters = conn.info.get_parameters()
        assert {name: parameters.get(name) for name in LIVENESS} == {name: str(v) for name, v in LIVENESS.items()}
    finally:
        view.datastore.close()
