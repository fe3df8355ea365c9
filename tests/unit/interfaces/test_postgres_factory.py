"""`PostgresFactory` builds its own datastore (`BoundedDatastore`) with the library's documented constructor
arguments, read back from the datastore the library's factory made from the environment: every setting must arrive.
Fails when eventsourcing or psycopg_pool move a setting this reads (pinned in setup.cfg). No database is needed: a
factory opens no connection until a recorder is made."""

from __future__ import annotations

from typing import Any

from eventsourcing import postgres
from eventsourcing.utils import Environment

from interfaces.adapters.postgres import LIVENESS, BoundedDatastore, PostgresFactory, postgres_env

URL = "postgresql://pw:s3cret@db.example:6543/payments"


def settings(datastore: postgres.PostgresDatastore) -> dict[str, Any]:
    pool = datastore.pool
    kwargs = dict(pool.kwargs) if isinstance(pool.kwargs, dict) else {}
    return {
        "connect": {k: v for k, v in kwargs.items() if k not in LIVENESS},
        "pool": (pool.min_size, pool.max_size, pool.timeout, pool.max_waiting, pool.max_lifetime),
        "datastore": (datastore.idle_in_transaction_session_timeout, datastore.pre_ping, datastore.lock_timeout,
                      datastore.schema, datastore.single_row_tracking, datastore.originator_id_type,
                      datastore.enable_db_functions, datastore.pool_open_timeout),
    }


def test_every_setting_the_library_reads_from_the_environment_reaches_the_bounded_datastore():
    env = {**postgres_env(URL, pool_max=7, timeout_seconds=3), "POSTGRES_SCHEMA": "pw", "POSTGRES_PRE_PING": "y",
           "POSTGRES_CONN_MAX_AGE": "120", "POSTGRES_MAX_WAITING": "9", "SINGLE_ROW_TRACKING": "n"}
    library = postgres.PostgresFactory(Environment("payments", env))
    ours = PostgresFactory(Environment("payments", env))
    try:
        assert isinstance(ours.datastore, BoundedDatastore)
        assert settings(ours.datastore) == settings(library.datastore)
        assert settings(ours.datastore)["connect"]["password"] == "s3cret"
        assert settings(ours.datastore)["pool"] == (0, 7, 3.0, 9, 120.0)
        assert ours.datastore.ride_seconds == 6.0  # two pool timeouts
        assert all(ours.datastore.pool.kwargs[k] == v for k, v in LIVENESS.items())  # type: ignore[index]
    finally:
        library.close()
        ours.close()
