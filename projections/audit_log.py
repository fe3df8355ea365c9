"""The audit log: every stored event of every application, as a leaf of one RFC 6962 Merkle tree, and its signed
checkpoints.

`audit_log` holds the tree's leaves in log order (`idx` 0, 1, 2, …), each naming the event it hashes (application
and notification position); `audit_checkpoints` the signed checkpoint notes by tree size. Appending a leaf and its
tracking record is one transaction, so each event enters the tree exactly once, however many followers run. The
order of leaves across applications is the order the follower appended them: it is recorded, and it is what the
checkpoints sign.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteTrackingRecorder

from domain.merkle import HASH_SIZE
from projections.sql import SqlView, rowcount, values


class AuditLogView(SqlView):
    tables = (
        "CREATE TABLE IF NOT EXISTS audit_log (idx BIGINT PRIMARY KEY, application TEXT NOT NULL, "
        "position BIGINT NOT NULL, leaf TEXT NOT NULL, UNIQUE (application, position))",
        "CREATE TABLE IF NOT EXISTS audit_checkpoints (size BIGINT PRIMARY KEY, note TEXT NOT NULL, "
        "recorded_at TEXT NOT NULL)",
        # Beside a checkpoint, its tree's compact range (the perfect subtrees' roots, hex, largest first): a
        # process's first checkpoint resumes from it instead of reading every leaf again.
        "CREATE TABLE IF NOT EXISTS audit_ranges (size BIGINT PRIMARY KEY, hashes TEXT NOT NULL)",
        # Witnesses' cosignatures of a checkpoint (C2SP tlog-cosignature): the signature line each returned.
        "CREATE TABLE IF NOT EXISTS audit_cosignatures (size BIGINT NOT NULL, witness TEXT NOT NULL, "
        "line TEXT NOT NULL, recorded_at TEXT NOT NULL, PRIMARY KEY (size, witness))",
    )

    def append(self, tracking: Tracking, leaf: bytes) -> None:
        """The next leaf, with its tracking record (IntegrityError if another follower appended it first)."""
        self.append_all(tracking.application_name, [(tracking.notification_id, leaf)])

    def append_all(self, application: str, leaves: Sequence[tuple[int, bytes]]) -> None:
        """The next leaves, in order: (position in `application`'s log, leaf) each. One transaction with the
        tracking (`SqlView.batch`, told its first and last position): IntegrityError, and nothing appended, if
        another follower appended any of them first."""
        if not leaves:
            return
        with self.batch(Tracking(application, leaves[0][0]), Tracking(application, leaves[-1][0])) as batch:
            # The leaves are 0, 1, 2, …: the next is one past the largest (the key's index, not a count of rows),
            # read once in the batch's transaction, which the tracking record written first made a writer.
            size = int(values(batch.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM audit_log").fetchone())[0])
            batch.executemany("INSERT INTO audit_log VALUES (?, ?, ?, ?)",
                              [(size + i, application, position, leaf.hex())
                               for i, (position, leaf) in enumerate(leaves)])
            if not batch.bounded:  # multi-row tracking: a record per leaf
                for position, _ in leaves:
                    batch.track(Tracking(application, position))

    def size(self) -> int:
        return int(self.rows("SELECT COALESCE(MAX(idx) + 1, 0) FROM audit_log")[0][0])

    def leaves_between(self, start: int, end: int) -> list[bytes]:
        """The leaves `start` to `end - 1`, in log order (a range of the key: no other leaf is read)."""
        rows = self.rows("SELECT leaf FROM audit_log WHERE idx >= ? AND idx < ? ORDER BY idx", (start, end))
        return [bytes.fromhex(r[0]) for r in rows]

    def checkpoint_of(self, size: int) -> tuple[int, str] | None:
        """The kept checkpoint of this tree size, if any."""
        rows = self.rows("SELECT size, note FROM audit_checkpoints WHERE size = ?", (size,))
        return (int(rows[0][0]), rows[0][1]) if rows else None

    def entries_between(self, start: int, end: int) -> list[tuple[int, str, int, bytes]]:
        """(idx, application, position, leaf) of the leaves `start` to `end - 1`, in log order."""
        rows = self.rows("SELECT idx, application, position, leaf FROM audit_log WHERE idx >= ? AND idx < ? "
                         "ORDER BY idx", (start, end))
        return [(int(r[0]), r[1], int(r[2]), bytes.fromhex(r[3])) for r in rows]

    def latest_checkpoint(self) -> tuple[int, str] | None:
        """(size, note) of the largest kept checkpoint."""
        rows = self.rows("SELECT size, note FROM audit_checkpoints ORDER BY size DESC LIMIT 1")
        return (int(rows[0][0]), rows[0][1]) if rows else None

    def record_cosignature(self, size: int, witness: str, line: str, recorded_at: str) -> None:
        """Keep a witness's cosignature line of the checkpoint of `size` (the newest line of that witness wins)."""
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql("DELETE FROM audit_cosignatures WHERE size = ? AND witness = ?"), (size, witness))
            c.execute(self.sql("INSERT INTO audit_cosignatures VALUES (?, ?, ?, ?)"),
                      (size, witness, line, recorded_at))

    def cosigned_size(self, witness: str) -> int | None:
        """The largest checkpoint size `witness` cosigned."""
        rows = self.rows("SELECT MAX(size) FROM audit_cosignatures WHERE witness = ?", (witness,))
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def cosignatures(self, size: int) -> list[str]:
        """The witnesses' cosignature lines of the checkpoint of `size`, by witness name."""
        return [r[0] for r in self.rows("SELECT line FROM audit_cosignatures WHERE size = ? ORDER BY witness",
                                        (size,))]

    def leaves(self, size: int | None = None) -> list[bytes]:
        rows = self.rows("SELECT leaf FROM audit_log WHERE idx < ? ORDER BY idx", (self.size() if size is None
                                                                                   else size,))
        return [bytes.fromhex(r[0]) for r in rows]

    def entries(self, size: int) -> list[tuple[int, str, int, bytes]]:
        """(idx, application, position, leaf) of the first `size` leaves, in log order."""
        rows = self.rows("SELECT idx, application, position, leaf FROM audit_log WHERE idx < ? ORDER BY idx",
                         (size,))
        return [(int(r[0]), r[1], int(r[2]), bytes.fromhex(r[3])) for r in rows]

    def record_checkpoint(self, size: int, note: str, recorded_at: str, hashes: Sequence[bytes] | None = None) -> bool:
        """Keep a signed checkpoint and, when given, its tree's compact range, in one transaction; False when a
        checkpoint of that size is kept already."""
        with self.datastore.transaction(commit=True) as c:
            # The write comes first: a SQLite transaction that read first cannot write once another connection
            # has committed meanwhile ("database is locked" at once, whatever the busy timeout), and the follower
            # appends leaves to this database while `audit checkpoint` and `audit export` sign one.
            c.execute(self.sql("INSERT INTO audit_checkpoints VALUES (?, ?, ?) ON CONFLICT (size) DO NOTHING"),
                      (size, note, recorded_at))
            if not rowcount(c):
                return False
            if hashes is not None:
                c.execute(self.sql("INSERT INTO audit_ranges VALUES (?, ?)"), (size, b"".join(hashes).hex()))
        return True

    def latest_range(self, size: int) -> tuple[int, list[bytes], str] | None:
        """The largest kept checkpoint of at most `size` leaves that has its compact range: (size, the range's
        hashes, the signed note)."""
        rows = self.rows("SELECT r.size, r.hashes, c.note FROM audit_ranges r JOIN audit_checkpoints c "
                         "ON c.size = r.size WHERE r.size <= ? ORDER BY r.size DESC LIMIT 1", (size,))
        if not rows:
            return None
        raw = bytes.fromhex(rows[0][1])
        return int(rows[0][0]), [raw[i:i + HASH_SIZE] for i in range(0, len(raw), HASH_SIZE)], rows[0][2]

    def checkpoints(self) -> list[tuple[int, str, str]]:
        """(size, note, recorded_at) of every kept checkpoint, smallest first."""
        return [(int(r[0]), r[1], r[2]) for r in self.rows(
            "SELECT size, note, recorded_at FROM audit_checkpoints ORDER BY size")]

    def positions(self) -> dict[str, int]:
        """How far the log has read each application's notification log."""
        rows: Sequence[Any] = self.rows("SELECT application, MAX(position) FROM audit_log GROUP BY application")
        return {r[0]: int(r[1]) for r in rows}


class SqliteAuditLogView(AuditLogView, SQLiteTrackingRecorder):
    pass


class PostgresAuditLogView(AuditLogView, PostgresTrackingRecorder):
    paramstyle = "format"
