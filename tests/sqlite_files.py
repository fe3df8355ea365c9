"""What a SQLite database's main file holds on its own, without its WAL: the tests of checkpoints read it so."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def events_in_the_main_file_alone(db: Path, tmp_path: Path) -> int:
    """The rows of the tables named `…events` in a copy of `db`'s main file alone (0 while even the tables are only
    in the WAL)."""
    alone = tmp_path / "alone.db"
    alone.write_bytes(db.read_bytes())
    with sqlite3.connect(alone) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return sum(conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in tables
                   if name.endswith("events"))
