"""The log follower, checkpoints and exports of the audit log.

The follower trails the writers: it reads each application's notification log after the position it has logged,
hashes each stored event's canonical entry and appends the leaf (never on the verify or settle path: it runs in
the projection worker, `paywarden project`, beside the other read models). Every
`PAYWARDEN_AUDIT_CHECKPOINT_SECONDS` (default 60) of growth it signs a checkpoint of the whole tree.

An export is what an auditor needs and nothing else: `events.jsonl` (one canonical entry per line, in log order,
exactly the leaves of the newest checkpoint), `checkpoints/<size>.txt` (every signed checkpoint), `key.pub` (the
verifier key) and `leaves.txt` (the leaf hashes the log recorded, hex, used only to name a failing event).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError

from domain import merkle
from domain.checkpoint import Checkpoint, NoteError, VerifierKey, open_note, parse_checkpoint
from domain.cosignature import parse_witnesses
from domain.log_entry import EntryError, LogEntry
from interfaces.audit.history import plain_state
from interfaces.audit.signing import CheckpointSigner, load_signer
from interfaces.audit.stores import ApplicationNames, reader
from interfaces.config import Config
from interfaces.container import build_view
from projections.audit_log import AuditLogView, SqliteAuditLogView

BATCH = 500
LEAVES_BATCH = 50_000
log = logging.getLogger("paywarden.audit")


@dataclass
class AuditLog:
    """The log's view, a reader per application, and (when configured) the checkpoint signer."""

    config: Config
    view: AuditLogView
    readers: dict[str, Application]
    _range: merkle.CompactRange | None = None  # the tree's perfect subtrees, as of the last checkpoint
    _names: ApplicationNames | None = None

    @classmethod
    def open(cls, config: Config) -> AuditLog:
        for attempt in range(3):
            try:
                view = build_view(config, "audit_log", SqliteAuditLogView)
                break
            except IntegrityError:  # another process created the tables at the same moment: theirs will do
                if attempt == 2:
                    raise
        return cls(config, view, {})

    def applications(self) -> dict[str, Application]:
        """Every application with an event store (found anew each time: applications appear over time)."""
        if self._names is None:
            self._names = ApplicationNames(self.config)
        for name in self._names():
            if name not in self.readers:
                self.readers[name] = reader(self.config, name)
        return self.readers

    def signer(self) -> CheckpointSigner:
        return load_signer(self.config.audit_signing_key, self.config.data_dir, sandbox=self.config.sandbox,
                           origin=self.config.audit_origin)

    def close(self) -> None:
        for app in self.readers.values():
            app.close()
        self.view.datastore.close()

    # -- following ------------------------------------------------------------------------------------------

    def catch_up(self) -> int:
        """Append every stored event not yet in the log; return how many. An application whose next event
        cannot be logged (its state is not JSON) stops there, named in the log, and the others go on."""
        done, stuck = 0, []
        for name, app in sorted(self.applications().items()):
            try:
                done += self._catch_up(name, app)
            except EntryError as bad:
                stuck.append(str(bad))
        if stuck:
            raise EntryError("; ".join(stuck))
        return done

    def _catch_up(self, name: str, app: Application) -> int:
        done = 0
        while True:
            position = self.view.max_tracking_id(name)
            notifications = app.recorder.select_notifications(position, BATCH, inclusive_of_start=False)
            if not notifications:
                return done
            leaves: list[bytes] = []
            unloggable: EntryError | None = None
            for n in notifications:
                try:
                    leaves.append(leaf_of(name, n.id, n.originator_id, n.originator_version, n.topic,
                                          plain_state(app, n.state)))
                except EntryError as bad:  # the events before it are logged; the application stops there
                    unloggable = bad
                    break
            try:  # the batch's leaves and tracking: one transaction
                self.view.append_all(name, [(n.id, leaf) for n, leaf in zip(notifications, leaves, strict=False)])
            except IntegrityError:
                continue  # another follower appended some of them first: nothing of ours stayed; re-read
            done += len(leaves)
            if unloggable is not None:
                raise unloggable
            if len(notifications) < BATCH:
                return done

    def checkpoint(self, signer: CheckpointSigner | None = None) -> tuple[int, str]:
        """Sign the tree as it is now; (size, note). A checkpoint of an unchanged size is returned, not re-signed.
        The root comes from a compact range kept in this object: only the leaves added since the last checkpoint
        are read. A process's first checkpoint resumes from the range kept with the latest checkpoint (`_resume`),
        so what it reads does not grow with the log's history either."""
        size = self.view.size()
        if kept := self.view.checkpoint_of(size):
            return kept
        if self._range is None or self._range.size > size:
            self._range = self._resume(size)
        for start in range(self._range.size, size, LEAVES_BATCH):
            for leaf in self.view.leaves_between(start, min(start + LEAVES_BATCH, size)):
                self._range.append(leaf)
        signer = signer or self.signer()
        note = signer.sign(Checkpoint(signer.name, size, self._range.root()))
        self.view.record_checkpoint(size, note, datetime.now(UTC).isoformat(), self._range.hashes())
        return size, note

    def _resume(self, size: int) -> merkle.CompactRange:
        """The compact range kept with the largest checkpoint of at most `size` leaves, when it gives the root
        that checkpoint's note signed; otherwise (none kept, or one that does not agree) an empty range, and
        every leaf is read again."""
        kept = self.view.latest_range(size)
        if kept is None:
            return merkle.CompactRange()
        kept_size, hashes, note = kept
        try:
            compact = merkle.CompactRange.resumed(kept_size, hashes)
            signed = parse_checkpoint(open_note(note)[0])
        except (merkle.ProofError, NoteError) as bad:
            log.warning("the compact range kept at audit checkpoint %d is unusable (%s): reading every leaf",
                        kept_size, bad)
            return merkle.CompactRange()
        if (signed.size, signed.root) != (kept_size, compact.root()):
            log.warning("the compact range kept at audit checkpoint %d does not give the root it signed: reading "
                        "every leaf", kept_size)
            return merkle.CompactRange()
        return compact

    # -- exporting ------------------------------------------------------------------------------------------

    def export(self, out: Path, key: VerifierKey, missing: list[str] | None = None) -> int:
        """Write the export of the newest checkpoint into `out` (created); return the number of events.

        An event the log holds but the store no longer does stops the export, or, given `missing`, is named
        there and left out (the live verification then reports it).
        """
        checkpoints = self.view.checkpoints()
        if not checkpoints:
            raise NoteError("no checkpoint yet: run `paywarden audit checkpoint` first")
        size = checkpoints[-1][0]
        out.mkdir(parents=True, exist_ok=True)
        (out / "checkpoints").mkdir(exist_ok=True)
        for kept_size, note, _ in checkpoints:  # each with the witnesses' cosignatures it gathered
            cosigned = "".join(line + "\n" for line in self.view.cosignatures(kept_size))
            (out / "checkpoints" / f"{kept_size}.txt").write_text(note + cosigned)
        (out / "key.pub").write_text(key.encoded() + "\n")
        entries = self.view.entries(size)
        (out / "leaves.txt").write_text("".join(f"{leaf.hex()}\n" for *_, leaf in entries))
        lines = self.entry_lines(entries)
        with (out / "events.jsonl").open("wb") as events:
            for (_, application, position, _), line in zip(entries, lines, strict=True):
                if line is None:
                    if missing is None:
                        raise EntryError(f"{application}/{position} is in the log but no longer in the event store")
                    missing.append(f"{application}/{position}")
                    continue
                events.write(line + b"\n")
        return size

    def entry_lines(self, entries: list[tuple[int, str, int, bytes]]) -> list[bytes | None]:
        """The canonical line of each logged event as the store holds it now (None: the event is gone)."""
        wanted: dict[str, set[int]] = {}
        for _, application, position, _ in entries:
            wanted.setdefault(application, set()).add(position)
        found: dict[tuple[str, int], bytes] = {}
        apps = self.applications()
        for application, positions in wanted.items():
            app = apps.get(application)
            if app is None:
                continue
            start, last = None, max(positions)
            while True:
                notifications = app.recorder.select_notifications(start, BATCH, stop=last, inclusive_of_start=False)
                for n in notifications:
                    if n.id in positions:
                        found[(application, n.id)] = LogEntry.from_stored(
                            application, n.id, n.originator_id, n.originator_version, n.topic,
                            plain_state(app, n.state)).encoded()
                if len(notifications) < BATCH:
                    break
                start = notifications[-1].id
        return [found.get((application, position)) for _, application, position, _ in entries]

    def unlogged(self) -> list[str]:
        """Stored events at or below the log's position in their application that the log does not hold."""
        positions, missing = self.view.positions(), list[str]()
        logged = {(a, p) for _, a, p, _ in self.view.entries(self.view.size())}
        for name, app in sorted(self.applications().items()):
            top = positions.get(name)
            if top is None:
                continue
            start = None
            while True:
                notifications = app.recorder.select_notifications(start, BATCH, stop=top, inclusive_of_start=False)
                missing.extend(f"{name}/{n.id}" for n in notifications if (name, n.id) not in logged)
                if len(notifications) < BATCH:
                    break
                start = notifications[-1].id
        return missing


class _NotPlain(Exception):
    pass


def _refuse(_: str) -> Any:
    raise _NotPlain


def leaf_of(application: str, position: int, originator_id: Any, originator_version: int, topic: str,
            state: bytes) -> bytes:
    """`LogEntry.from_stored(...).leaf()`, the same bytes hashed, without RFC 8785's encoder written in Python
    for the common state: no number with a fraction or exponent (and no NaN or infinity) and nothing but ASCII.
    For such a value RFC 8785 is exactly the standard library's `json.dumps` with sorted keys, no whitespace and
    ensure_ascii off (the strings are escaped by the same function; integers are written in decimal; names in
    ASCII sort the same by UTF-16 code units as by code points); anything else takes `LogEntry`."""
    try:
        value = json.loads(state.decode("utf-8"), parse_float=_refuse, parse_constant=_refuse)
        text = json.dumps({"application": application, "position": int(position),
                           "originator_id": str(originator_id), "originator_version": int(originator_version),
                           "topic": topic, "state": value}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (_NotPlain, UnicodeDecodeError, ValueError, TypeError):
        text = ""
    if not text or not text.isascii():
        return LogEntry.from_stored(application, position, originator_id, originator_version, topic, state).leaf()
    return merkle.leaf_hash(text.encode())


def follow(config: Config, stop: threading.Event, *, poll_seconds: float = 1.0) -> None:
    """Catch up and checkpoint every interval until `stop`; failures (a store starting up or down, another process
    creating the tables at the same moment) are logged and retried, never fatal."""
    from interfaces.audit.witnessing import submit

    interval = config.audit_checkpoint_seconds
    witnesses = parse_witnesses(config.audit_witnesses)
    audit: AuditLog | None = None
    signer: Any = None
    last_checkpoint = 0.0
    try:
        while not stop.is_set():
            try:
                if audit is None:
                    audit = AuditLog.open(config)
                    try:
                        signer = audit.signer()
                    except NoteError as no_key:
                        log.warning("audit checkpoints are not signed: %s", no_key)
                audit.catch_up()
                now = datetime.now(UTC).timestamp()
                if signer is not None and now - last_checkpoint >= interval:
                    size, note = audit.checkpoint(signer)
                    last_checkpoint = now
                    if witnesses:
                        submit(audit.view, witnesses, size, note)
            except Exception:
                log.exception("audit log follower failed; retrying")
            stop.wait(poll_seconds)
    finally:
        if audit is not None:
            audit.close()
