"""What makes the embedded SQLite stores durable and keeps their disk work out of the requests' way: the barrier
that fsyncs the payments store before any transaction leaves for the chain (`DurableSends`, `fsync_database`,
`GroupFsync`), and the WAL checkpoints run beside the API (`BackgroundCheckpoints`). The stores themselves, and the
`synchronous` level each runs at, are in interfaces/adapters/sqlite.py.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from application.ports import SignatureStatus, Simulation

if TYPE_CHECKING:  # probes.py imports this module
    from interfaces.runtime.probes import ProbedChain


def fsync_database(db_path: Path) -> Callable[[], None]:
    """A barrier: fsync the database's WAL and main file, so every commit made before it survives a power cut.

    With `synchronous=NORMAL` a commit is in the WAL file but maybe not yet on the disk; `fsync` on the WAL file
    is exactly what `synchronous=FULL` would have done at that commit (and covers every earlier commit, the WAL
    being written in order). The main file is synced too, for frames a checkpoint has already moved into it.

    Concurrent callers share the work (`GroupFsync`), and in a gevent worker the fsync runs on the hub's thread
    pool: the disk's wait (~0.2 ms per file here) no longer stops every other request of the worker.
    """
    paths = (Path(f"{db_path}-wal"), db_path)

    def fsync_files() -> None:
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # no WAL: everything is in the main file, synced by the checkpoint that removed it
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    return GroupFsync(fsync_files)


class GroupFsync:
    """A durability barrier shared by concurrent callers (group commit's second half).

    A caller has committed before it calls; it returns once an fsync that *started after its call* has finished,
    which covers its commit. One caller at a time runs the fsync, and before starting it takes note of every call
    made so far: the callers that queued behind it while the disk worked return without an fsync of their own
    when it ends. So N concurrent settles cost one or two fsyncs instead of N, and no caller returns early.
    """

    def __init__(self, fsync: Callable[[], None], run: Callable[[Callable[[], None]], None] | None = None) -> None:
        self._fsync, self._run = fsync, run or off_the_event_loop
        self._sync = threading.Lock()  # a greenlet's lock once gevent has patched threading (the API worker)
        self._count = threading.Lock()
        self._called = 0  # calls so far
        self._covered = 0  # every call numbered up to this one is durable
        self.fsyncs = 0

    def __call__(self) -> None:
        with self._count:
            self._called += 1
            mine = self._called
        with self._sync:
            if self._covered >= mine:
                return  # an fsync that started after this call has finished
            with self._count:
                upto = self._called  # all of these committed before the fsync below starts
            self._run(self._fsync)
            self.fsyncs += 1
            self._covered = upto


def off_the_event_loop(fn: Callable[[], None]) -> None:
    """Run a blocking call (an fsync) on gevent's thread pool when this process is a gevent worker, so the other
    greenlets run meanwhile; a plain call anywhere else."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        import gevent  # type: ignore[import-untyped]

        gevent.get_hub().threadpool.apply(fn)
    else:
        fn()


class BackgroundCheckpoints:
    """A SQLite database's WAL copied back into its main file by another process, so that the writer's own
    checkpoints find almost nothing left to do.

    SQLite checkpoints in the commit that takes the WAL past `wal_autocheckpoint` pages (1,000 by default), in the
    committing connection: in the API worker, on the gevent hub, every request of the worker waiting. What a
    checkpoint costs grows with the history: the payments' `(originator_id, originator_version)` index is keyed by
    random UUIDs, so on a store of a million events the pages a thousand WAL frames hold are a thousand pages
    scattered over the file, each written and synced (docs/performance.md, "Cost with history"). Here a thread of every
    projection worker runs a PASSIVE checkpoint every `interval` seconds on a connection of its own: PASSIVE blocks
    neither writers nor readers (it copies the frames no reader still needs, then syncs the file), so the pages are
    written and synced out of every request's way. The writer's automatic checkpoint stays, every 20,000 pages on
    the payments store (container.py, `PAYMENTS_WAL_AUTOCHECKPOINT`): the safety valve, and the one that lets
    SQLite start the WAL over (a log is restarted only once a checkpoint has copied all of it, which a checkpointer
    racing a busy writer rarely does). It copies only the frames appended since the last pass, and comes seldom:
    each of its fsyncs holds the hub, and queues behind whatever the read models are writing to the same disk.

    Durability is unchanged: a checkpoint at `synchronous=NORMAL` syncs the WAL before copying and the main file
    after, as the writer's own does, and a checkpoint never loses or reorders a commit.
    """

    def __init__(self, db_path: Path, interval: float = 0.02) -> None:
        self.db_path, self.interval = Path(db_path), interval
        self.passes = 0  # checkpoints run
        self.last: tuple[int, int, int] | None = None  # the last one's (busy, frames in the WAL, frames copied)

    def run(self, stop: threading.Event) -> None:
        """Until `stop`: a checkpoint every `interval`. A database not made yet is waited for; an error is logged,
        and the next pass tries again on a new connection."""
        conn: sqlite3.Connection | None = None
        try:
            while not stop.wait(self.interval):
                try:
                    conn = conn or self._connect()
                    if conn is not None:
                        self.last = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                        self.passes += 1
                except sqlite3.Error:
                    logging.getLogger("paywarden.checkpoints").exception("checkpointing %s failed", self.db_path)
                    if conn is not None:
                        conn.close()
                    conn = None
                    stop.wait(1.0)  # a broken database is not retried fifty times a second
        finally:
            if conn is not None:
                conn.close()

    def _connect(self) -> sqlite3.Connection | None:
        if not self.db_path.exists():
            return None  # never create the database: it is the writer's to make
        conn = sqlite3.connect(f"{self.db_path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=0)
        conn.execute("PRAGMA synchronous=NORMAL")  # a checkpoint syncs the WAL, then the main file
        return conn


class DurableSends:
    """Implements `Chain` (and the probes' `health`/`sol_balance`) over another adapter: before a transaction is
    sent, the barrier makes the payments store durable.

    Payments records a broadcast (`SettlementSubmitted`, with the settle-once claims) in one save and only then calls
    `send`; a re-send (application/reconciling.py, `resend`) sends the same recorded bytes again. So when `send`
    runs, the record that forbids a second broadcast is on the disk, whatever the store's synchronous level: no
    power cut can make Paywarden forget a transaction it sent. Every other call goes to the adapter unchanged.
    """

    def __init__(self, inner: ProbedChain, barrier: Callable[[], None]) -> None:
        self.inner, self._barrier = inner, barrier

    def send(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        self._barrier()
        return self.inner.send(transaction, signatures_verified=signatures_verified)

    def simulate(self, transaction: bytes, *, signatures_verified: bool = False) -> Simulation:
        return self.inner.simulate(transaction, signatures_verified=signatures_verified)

    def signature_status(self, signature: str) -> SignatureStatus:
        return self.inner.signature_status(signature)

    def is_blockhash_valid(self, blockhash: str) -> bool:
        return self.inner.is_blockhash_valid(blockhash)

    def account_exists(self, address: str) -> bool:
        return self.inner.account_exists(address)

    def lookup_table_addresses(self, table: str) -> Sequence[str]:
        return self.inner.lookup_table_addresses(table)

    def health(self) -> None:
        self.inner.health()

    def sol_balance(self, address: str) -> int:
        return self.inner.sol_balance(address)


def durable_sends(by_network: dict[str, ProbedChain], db_path: Path) -> None:
    """Wrap each adapter of a `Chains`' `by_network` mapping in place; idempotent."""
    barrier = fsync_database(db_path)
    for caip2, chain in list(by_network.items()):
        if not isinstance(chain, DurableSends):
            by_network[caip2] = DurableSends(chain, barrier)
