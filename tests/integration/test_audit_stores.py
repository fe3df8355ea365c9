"""The audit log follower finds every application's event store each second without opening every file each
time: a file found to be an event store stays one; one that was not is opened again only once it changed."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import interfaces.audit.stores as stores
from interfaces.audit.stores import ApplicationNames, application_names
from interfaces.config import Config


def test_a_file_is_opened_again_only_once_it_changed_and_a_new_event_store_is_found(tmp_path, monkeypatch):
    config = Config(data_dir=tmp_path)
    for name, table in (("payments", "stored_events"), ("payment_list", "tracking")):
        with closing(sqlite3.connect(tmp_path / f"{name}.db")) as db:
            db.execute(f"CREATE TABLE {table} (x)")
    opened: list[str] = []
    is_store = stores._is_event_store
    monkeypatch.setattr(stores, "_is_event_store", lambda path: (opened.append(path.stem), is_store(path))[1])
    names = ApplicationNames(config)
    assert names() == ["payments"] and sorted(opened) == ["payment_list", "payments"]
    assert names() == names() == ["payments"] and len(opened) == 2  # nothing changed: nothing opened
    with closing(sqlite3.connect(tmp_path / "webhooks.db")) as db:  # a new application, its file made first
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE tracking (x)")
        db.commit()
        assert names() == ["payments"]
        db.execute("CREATE TABLE stored_events (x)")  # its tables come a moment later, into the WAL
        db.commit()
        assert names() == ["payments", "webhooks"]
    assert opened.count("payment_list") == 1 and opened.count("webhooks") == 2  # the one that changed, twice
    assert application_names(config) == ["payments", "webhooks"]  # the one-off function: the same answer
