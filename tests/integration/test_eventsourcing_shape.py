"""The parts of eventsourcing our stores build on beyond its application API (interfaces/adapters/sqlite.py and
postgres.py; docs/performance.md, "eventsourcing through its supported surface"): pinned to the minor release
tested (setup.cfg), and checked here so that a release that moves one fails this test rather than a store."""

from __future__ import annotations

import configparser
import inspect
import re
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlsplit

from eventsourcing import postgres, sqlite

from interfaces.adapters.postgres import PostgresApplicationRecorder
from tests.services import POSTGRES

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_release_is_the_minor_release_setup_cfg_pins():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    [pin] = [line.strip() for line in config["options"]["install_requires"].splitlines()
             if line.strip().startswith("eventsourcing")]
    assert pin == "eventsourcing>=9.5,<9.6"
    assert re.fullmatch(r"9\.5\.\d+", version("eventsourcing"))


def test_the_sqlite_datastore_and_pool_have_the_settings_the_lean_datastore_reads(tmp_path):
    library = sqlite.SQLiteDatastore(str(tmp_path / "store.db"), lock_timeout=7, pool_size=3, pool_timeout=4.0,
                                     single_row_tracking=False, originator_id_type="text")
    try:
        pool = library.pool
        assert (pool.db_name, pool.lock_timeout, pool.pool_size, pool.pool_timeout) == (
            str(tmp_path / "store.db"), 7, 3, 4.0)
        assert (pool.is_sqlite_memory_mode, pool.is_journal_mode_wal, pool.journal_mode_was_changed_to_wal) == (
            False, False, False)
        assert (library.single_row_tracking, library.originator_id_type) == (False, "text")
    finally:
        library.close()
    assert list(inspect.signature(sqlite.SQLiteConnection).parameters) == ["sqlite_conn", "max_age"]
    assert list(inspect.signature(sqlite.SQLiteTransaction).parameters) == ["connection", "commit"]
    assert isinstance(sqlite.SQLITE3_DEFAULT_LOCK_TIMEOUT, int)
    assert "select_events_statement" in vars(sqlite.SQLiteApplicationRecorder(library))


def test_the_postgres_recorder_creates_our_insert_function_in_place_of_the_librarys():
    """Nothing is created: a recorder reads its statements' types from the server when it is made."""
    url = urlsplit(POSTGRES)
    datastore = postgres.PostgresDatastore(url.path.lstrip("/"), url.hostname or "", url.port or 5432,
                                           url.username or "", url.password or "", schema="public")
    try:
        library = postgres.PostgresApplicationRecorder(datastore, events_table_name="payments_events")
        ours = PostgresApplicationRecorder(datastore, events_table_name="payments_events")
        index = library.create_insert_function_statement_index
        theirs_at = library.sql_create_statements[index].as_string(None)
        ours_at = ours.sql_create_statements[index].as_string(None)
        assert "CREATE OR REPLACE FUNCTION" in theirs_at and library.pg_function_name_insert_events in theirs_at
        assert '"payments_events_insert"' in ours_at and "LOCK TABLE" in ours_at
        assert len(ours.sql_create_statements) == len(library.sql_create_statements)
        assert [s.as_string(None) for i, s in enumerate(ours.sql_create_statements) if i != index] == [
            s.as_string(None) for i, s in enumerate(library.sql_create_statements) if i != index]
    finally:
        datastore.close()
