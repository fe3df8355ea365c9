"""`paywarden-bench history --store LABEL=copy:DIR` and `=new`: stores made for one run, so it never changes
what it measures."""

import sqlite3
from contextlib import closing

import pytest

from interfaces.bench.history import store_url


def test_a_copy_is_a_store_of_its_own_and_the_source_is_left_alone(tmp_path):
    source, work = tmp_path / "pristine", tmp_path / "work"
    source.mkdir()
    work.mkdir()
    with closing(sqlite3.connect(source / "payments.db")) as db:
        db.execute("CREATE TABLE stored_events (x)")
        db.execute("INSERT INTO stored_events VALUES (1)")
        db.commit()
    url = store_url(f"copy:{source}", 3, work)
    assert url == f"sqlite://{work / 'store-3'}"
    with closing(sqlite3.connect(work / "store-3" / "payments.db")) as db:
        db.execute("INSERT INTO stored_events VALUES (2)")  # what a run does to its copy
        db.commit()
    with closing(sqlite3.connect(source / "payments.db")) as db:
        assert db.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0] == 1


def test_new_is_an_empty_directory_and_other_urls_are_kept(tmp_path):
    assert store_url("new", 0, tmp_path) == f"sqlite://{tmp_path / 'store-0'}"
    assert list((tmp_path / "store-0").iterdir()) == []
    for url in ("sqlite:///var/lib/paywarden", "postgresql://postgres@127.0.0.1:5432/db"):
        assert store_url(url, 1, tmp_path) == url
    assert not (tmp_path / "store-1").exists()


def test_a_copy_of_what_is_not_a_store_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no SQLite store there"):
        store_url(f"copy:{tmp_path / 'empty'}", 0, tmp_path)
