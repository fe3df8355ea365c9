"""The embedded store's durability settings: the payments store and the derived views at synchronous=NORMAL, every
other store at FULL, and the fsync barrier that runs before any transaction is sent to the chain."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from eventsourcing import sqlite
from eventsourcing.persistence import ConnectionPoolClosedError, InfrastructureFactory, OperationalError, StoredEvent
from eventsourcing.utils import Environment

from interfaces.adapters.sqlite import LeanApplicationRecorder, LeanDatastore, SQLiteFactory
from interfaces.adapters.sqlite_durability import BackgroundCheckpoints, DurableSends, GroupFsync, fsync_database
from interfaces.config import Config
from interfaces.container import store_env
from tests.sqlite_files import events_in_the_main_file_alone

SYNCHRONOUS = {1: "NORMAL", 2: "FULL"}


def synchronous_of(tmp_path: Path, name: str) -> str:
    factory = InfrastructureFactory.construct(env=Environment(name, store_env(Config(data_dir=tmp_path), name)))
    assert isinstance(factory, SQLiteFactory)
    with factory.datastore.transaction(commit=False) as cursor:
        cursor.execute("PRAGMA synchronous")
        level = cursor.fetchone()[0]
    with factory.datastore.transaction(commit=False) as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0].lower() == "wal"
    return SYNCHRONOUS[level]


def test_the_payments_store_and_the_derived_views_commit_at_normal_and_every_other_store_at_full(tmp_path):
    for name in ("payments", "payment_list", "payment_volume", "merchant_activity", "result_cache", "paid_access"):
        assert synchronous_of(tmp_path, name) == "NORMAL", name
    for name in ("merchants", "accounts", "webhooks", "proxy_services", "listings", "catalog", "console",
                 "webhooks_outbox", "audit_log", "access"):  # a grant lost to a power cut would free its nonce
        assert synchronous_of(tmp_path, name) == "FULL", name


def test_an_unknown_synchronous_level_is_refused(tmp_path):
    env = {**store_env(Config(data_dir=tmp_path), "payments"), "SQLITE_SYNCHRONOUS": "OFF"}
    with pytest.raises(OSError, match="SQLITE_SYNCHRONOUS must be one of FULL, NORMAL"):
        InfrastructureFactory.construct(env=Environment("payments", env))


def autocheckpoint_of(tmp_path: Path, name: str) -> int:
    factory = InfrastructureFactory.construct(env=Environment(name, store_env(Config(data_dir=tmp_path), name)))
    with factory.datastore.transaction(commit=False) as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        return cursor.fetchone()[0]


def test_only_the_payments_store_checkpoints_seldom_in_its_writer_the_projection_worker_does_it_often(tmp_path):
    assert autocheckpoint_of(tmp_path, "payments") == 20_000
    for name in ("payment_list", "result_cache", "merchants", "accounts", "catalog", "audit_log"):
        assert autocheckpoint_of(tmp_path, name) == 1000, name  # SQLite's own


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_wal_autocheckpoint_that_is_not_a_number_of_pages_is_refused(tmp_path, value):
    env = {**store_env(Config(data_dir=tmp_path), "payments"), "SQLITE_WAL_AUTOCHECKPOINT": value}
    with pytest.raises(OSError, match="SQLITE_WAL_AUTOCHECKPOINT must be a number of pages above 0"):
        InfrastructureFactory.construct(env=Environment("payments", env))


class Inner:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def send(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        self.log.append(f"send {transaction.hex()}")
        return "signature"

    def simulate(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        self.log.append("simulate")
        return "simulated"


def test_a_transaction_is_sent_only_after_the_barrier_returned_and_nothing_else_waits_for_it():
    log: list[str] = []
    chain = DurableSends(Inner(log), lambda: log.append("barrier"))
    assert chain.simulate(b"\x01") == "simulated"
    assert chain.send(b"\x02") == "signature"
    assert log == ["simulate", "barrier", "send 02"]


def test_a_failing_barrier_sends_nothing():
    log: list[str] = []

    def barrier() -> None:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        DurableSends(Inner(log), barrier).send(b"\x03")
    assert log == []


def test_the_barrier_fsyncs_the_wal_and_the_database_file(tmp_path, monkeypatch):
    db = tmp_path / "payments.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    assert Path(f"{db}-wal").stat().st_size > 0  # the commit sits in the WAL
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    fsync_database(db)()
    assert synced == [f"{db}-wal", str(db)]
    conn.close()  # the last connection checkpoints and removes the WAL
    synced.clear()
    fsync_database(db)()
    assert synced == [str(db)]


class SlowDisk:
    """An fsync that takes `seconds`, numbering its starts and ends on one clock shared with the callers."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.lock, self.tick, self.syncs = seconds, threading.Lock(), 0, []

    def now(self) -> int:
        with self.lock:
            self.tick += 1
            return self.tick

    def __call__(self) -> None:
        start = self.now()
        time.sleep(self.seconds)
        self.syncs.append((start, self.now()))


def test_concurrent_barriers_share_fsyncs_and_none_returns_before_one_that_started_after_its_call():
    disk = SlowDisk(0.05)
    barrier = GroupFsync(disk, run=lambda fn: fn())
    calls: list[tuple[int, int]] = []

    def settle() -> None:
        called = disk.now()  # the caller's commit is before this
        barrier()
        calls.append((called, disk.now()))

    run_together(settle, 20)

    assert len(calls) == 20
    for called, returned in calls:
        assert any(called < start and end < returned for start, end in disk.syncs), (called, returned)
    assert 1 <= len(disk.syncs) <= 3 and barrier.fsyncs == len(disk.syncs)  # 20 callers, not 20 fsyncs


def test_a_barrier_called_after_an_fsync_ended_gets_an_fsync_of_its_own():
    disk = SlowDisk(0)
    barrier = GroupFsync(disk, run=lambda fn: fn())
    barrier()
    barrier()
    assert len(disk.syncs) == 2


def test_in_a_gevent_worker_the_fsync_leaves_the_other_greenlets_running(tmp_path):
    """Under gevent's monkey patching the barrier's fsync runs on the hub's thread pool: a greenlet that only
    needs the hub keeps running while the disk works; run inline, as the barrier was, it does not."""
    script = """
from gevent import monkey; monkey.patch_all()
import gevent, json, time
from interfaces.adapters.sqlite_durability import GroupFsync
ticks = []
def ticker():
    while True:
        ticks.append(time.monotonic()); gevent.sleep(0.005)
blocking_sleep = monkey.get_original("time", "sleep")
def slow_fsync():
    blocking_sleep(0.3)  # blocks its thread as a slow disk's fsync does, unpatched
gevent.spawn(ticker); gevent.sleep(0.02)
figures = {}
for name, barrier in (("pool", GroupFsync(slow_fsync)), ("inline", GroupFsync(slow_fsync, run=lambda fn: fn()))):
    before = len(ticks); barrier(); figures[name] = len(ticks) - before
print(json.dumps(figures))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["pool"] >= 10 and figures["inline"] <= 1, figures  # inline: the old barrier, the hub held


def lean_datastore(tmp_path: Path) -> LeanDatastore:
    factory = InfrastructureFactory.construct(env=Environment("payments", store_env(Config(data_dir=tmp_path),
                                                                                    "payments")))
    assert isinstance(factory.datastore, LeanDatastore)
    with factory.datastore.transaction(commit=True) as cursor:
        cursor.execute("CREATE TABLE counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL)")
        cursor.execute("INSERT INTO counters VALUES ('a', 0)")
    return factory.datastore


def test_connections_opening_a_new_database_at_the_same_moment_all_get_it_in_wal_mode(tmp_path):
    """Two connections that find a new database in rollback mode both ask for WAL; SQLite refused one of them at
    once ("database is locked", 7% of the rounds here before the retry): the audit log's follower and a reader
    opening its view together failed a CI run so."""
    failures: list[str] = []
    for round_ in range(100):
        path = str(tmp_path / f"new-{round_}.db")
        start = threading.Barrier(3)

        def open_and_read(path: str = path, start: threading.Barrier = start) -> None:
            datastore = LeanDatastore(path, synchronous="FULL", lock_timeout=30)
            start.wait()
            try:
                with datastore.transaction(commit=False) as cursor:
                    cursor.execute("PRAGMA journal_mode")
                    assert cursor.fetchone()[0].lower() == "wal"
            except Exception as error:  # collected: an assertion in a thread would not fail the test
                failures.append(repr(error))
            finally:
                datastore.close()

        run_together(open_and_read, 3)
    assert failures == []


def wal_writer(path: Path) -> sqlite3.Connection:
    """A writer as the API worker's, but with no checkpoints of its own: whatever reaches the main file was
    copied there by someone else."""
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, body BLOB)")
    return conn


def test_background_checkpoints_copy_a_writers_commits_into_the_main_file_while_it_writes(tmp_path):
    path = tmp_path / "payments.db"
    writer = wal_writer(path)
    checkpoints = BackgroundCheckpoints(path, interval=0.005)
    stop = threading.Event()
    thread = threading.Thread(target=checkpoints.run, args=(stop,))
    thread.start()
    try:
        for i in range(300):
            writer.execute("INSERT INTO events (body) VALUES (?)", (os.urandom(3000),))
            if i % 50 == 0:
                time.sleep(0.02)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and events_in_the_main_file_alone(path, tmp_path) < 300:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert events_in_the_main_file_alone(path, tmp_path) == 300
    assert checkpoints.passes > 1
    busy, frames, copied = checkpoints.last
    assert busy == 0 and frames > 0 and copied == frames  # the whole WAL copied: the writer may start it over
    size = Path(f"{path}-wal").stat().st_size
    for _ in range(50):  # and it does: the log is written from its start again instead of growing
        writer.execute("INSERT INTO events (body) VALUES (?)", (os.urandom(3000),))
    assert Path(f"{path}-wal").stat().st_size == size
    writer.close()


def test_without_background_checkpoints_such_a_writers_commits_stay_in_the_wal(tmp_path):
    """The control of the test above: the copy in the main file is the checkpointer's doing."""
    path = tmp_path / "payments.db"
    writer = wal_writer(path)
    for _ in range(300):
        writer.execute("INSERT INTO events (body) VALUES (?)", (os.urandom(3000),))
    time.sleep(0.1)
    assert events_in_the_main_file_alone(path, tmp_path) == 0
    writer.close()


def test_background_checkpoints_wait_for_the_database_and_never_create_it(tmp_path):
    path = tmp_path / "payments.db"
    checkpoints = BackgroundCheckpoints(path, interval=0.005)
    stop = threading.Event()
    thread = threading.Thread(target=checkpoints.run, args=(stop,))
    thread.start()
    try:
        time.sleep(0.1)
        assert not path.exists() and checkpoints.passes == 0
        writer = wal_writer(path)
        writer.execute("INSERT INTO events (body) VALUES (x'00')")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and events_in_the_main_file_alone(path, tmp_path) < 1:
            time.sleep(0.01)
        assert events_in_the_main_file_alone(path, tmp_path) == 1
        writer.close()
    finally:
        stop.set()
        thread.join(5)


def test_transactions_one_after_another_share_one_connection(tmp_path):
    datastore = lean_datastore(tmp_path)
    seen = set()
    for _ in range(3):
        with datastore.get_connection(commit=False) as conn:
            seen.add(id(conn))
        with datastore.transaction(commit=True) as cursor:
            cursor.execute("UPDATE counters SET n = n + 1")
    assert len(seen) == 1 and len(datastore._idle) == 1
    with datastore.get_connection(commit=False) as first, datastore.get_connection(commit=False) as second:
        assert first is not second  # a connection serves one transaction at a time
    datastore.close()
    with pytest.raises(ConnectionPoolClosedError):
        with datastore.transaction(commit=False):
            pass


def test_the_writers_of_one_process_take_turns(tmp_path):
    """Read-then-write transactions in two threads: in WAL, one that read before the other's commit could not
    write (SQLITE_BUSY_SNAPSHOT, at once, no busy wait); taking turns on the datastore's writer lock, none fails
    and no increment is lost."""
    datastore = lean_datastore(tmp_path)
    failures: list[BaseException] = []

    def increment() -> None:
        try:
            for _ in range(30):
                with datastore.transaction(commit=True) as cursor:
                    cursor.execute("SELECT n FROM counters WHERE name = 'a'")
                    n = cursor.fetchone()[0]
                    time.sleep(0.001)  # the other thread runs meanwhile
                    cursor.execute("UPDATE counters SET n = ? WHERE name = 'a'", (n + 1,))
        except BaseException as failure:  # noqa: BLE001 - reported below
            failures.append(failure)

    run_together(increment, 2)
    assert failures == []
    with datastore.transaction(commit=False) as cursor:
        cursor.execute("SELECT n FROM counters")
        assert cursor.fetchone()[0] == 60
    datastore.close()


def test_an_aggregates_read_without_a_transaction_returns_what_the_librarys_returns(tmp_path):
    factory = InfrastructureFactory.construct(env=Environment("payments", store_env(Config(data_dir=tmp_path),
                                                                                    "payments")))
    recorder = factory.application_recorder()
    assert isinstance(recorder, LeanApplicationRecorder)
    ids = [uuid.uuid4() for _ in range(2)]
    recorder.insert_events([StoredEvent(i, v, f"topic{v}", f"state{v}".encode()) for i in ids for v in range(1, 6)])
    library = sqlite.SQLiteApplicationRecorder(sqlite.SQLiteDatastore(str(tmp_path / "payments.db")))
    for options in ({}, {"gt": 2}, {"lte": 3}, {"gt": 1, "lte": 4, "desc": True}, {"desc": True, "limit": 2},
                    {"limit": 1}, {"gt": 5}):
        for originator_id in (*ids, uuid.uuid4()):
            assert recorder.select_events(originator_id, **options) == library.select_events(originator_id,
                                                                                              **options), options
    with pytest.raises(OperationalError):  # sqlite3's errors as eventsourcing's, as in its transactions
        factory.datastore.read("SELECT * FROM no_such_table")
    library.datastore.close()
    factory.datastore.close()


def run_together(target: Callable[[], None], threads: int) -> None:
    """`target` in that many threads at once; returns when all are done."""
    started = [threading.Thread(target=target) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()


def test_bench_loads_bulk_mode_reaches_the_idle_connections_and_every_later_one(tmp_path):
    """`paywarden-bench load`'s bulk mode (`bulk_sqlite`) once tuned the library's pool, which a `LeanDatastore`
    does not use: its connections kept their synchronous level. Now through `LeanDatastore.tune`."""
    from interfaces.bench.load_projection import BULK_CACHE_KIB, bulk_sqlite

    datastore = lean_datastore(tmp_path)  # one idle connection (it created the table)
    try:
        assert [tuple(r) for r in datastore.read("PRAGMA synchronous")] == [(1,)]  # NORMAL, the payments' level
        bulk_sqlite(datastore)
        with datastore.get_connection(commit=False) as idle, datastore.get_connection(commit=False) as opened:
            for conn in (idle, opened):
                cursor = conn.sqlite.execute("PRAGMA synchronous")
                assert cursor.fetchone()[0] == 0  # OFF
                assert conn.sqlite.execute("PRAGMA cache_size").fetchone()[0] == -BULK_CACHE_KIB
    finally:
        datastore.close()


def test_a_write_transaction_that_reads_first_waits_for_another_processs_writer_instead_of_failing(tmp_path):
    """Two datastores on one file, as two processes have (the CLI beside `up`'s projection worker): a write
    transaction that reads before it writes, while the other commits a write, waits for the lock and succeeds.
    Begun deferred, its read would pin a snapshot and its write fail at once with "database is locked"
    (SQLITE_BUSY_SNAPSHOT: no busy timeout applies), which the CLI reported as a database it cannot reach."""
    mine = lean_datastore(tmp_path)
    other = LeanDatastore(mine.pool.db_name, synchronous="FULL", lock_timeout=30)
    read, written = threading.Event(), threading.Event()
    failures: list[str] = []

    def write_meanwhile() -> None:
        read.wait(5)
        try:
            with other.transaction(commit=True) as cursor:
                cursor.execute("UPDATE counters SET n = n + 1 WHERE name = 'a'")
        except Exception as error:  # collected: an assertion in a thread would not fail the test
            failures.append(repr(error))
        written.set()

    thread = threading.Thread(target=write_meanwhile)
    thread.start()
    with mine.transaction(commit=True) as cursor:
        cursor.execute("SELECT n FROM counters WHERE name = 'a'")
        (n,) = cursor.fetchone()
        read.set()
        written.wait(0.5)  # the other writer commits now, or waits for this transaction's lock
        cursor.execute("UPDATE counters SET n = ? WHERE name = 'a'", (n + 10,))
    thread.join(10)
    assert failures == []
    with mine.transaction(commit=False) as cursor:
        cursor.execute("SELECT n FROM counters WHERE name = 'a'")
        assert cursor.fetchone()[0] == 11  # both writes, one after the other: none lost
    other.close()
