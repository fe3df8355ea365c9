"""Offline verification of an export: nothing but the export's files (and the checkpoints the auditor kept).

1. Every checkpoint verifies under the export's key (and so does every checkpoint the auditor kept: a log
   re-signed by another key fails here).
2. Every line of `events.jsonl` is a canonical entry; positions rise within each application and each
   aggregate's versions run 1, 2, 3 …: a swapped or deleted event is named.
3. The lines are exactly the newest checkpoint's leaves, and the recomputed root of every checkpoint's prefix equals
   its signed root; the first event whose leaf differs from the recorded one is named.
   With a witness policy (`K:KEY,…`), the newest checkpoint must carry K valid witness cosignatures.
4. An old checkpoint the auditor kept is proved consistent with the newest (RFC 6962 consistency proof).
5. Chosen payments' events are proved included (RFC 6962 inclusion proofs).
6. The events are replayed into totals: settled volume per merchant, network and asset.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain import merkle
from domain.checkpoint import Checkpoint, NoteError, VerifierKey, parse_checkpoint, parse_verifier_key, verify_note
from domain.clients import merchant_client_id
from domain.cosignature import WitnessPolicy
from domain.log_entry import EntryError, LogEntry
from interfaces.audit.signing import ed25519_verify

if TYPE_CHECKING:
    from interfaces.audit.log import AuditLog

PAYMENT = "domain.payment:Payment."
MERCHANT_REGISTERED = "domain.merchant:Merchant.Registered"


@dataclass
class Report:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    totals: dict[tuple[str, str, str], int] = field(default_factory=dict)
    size: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures

    def fail(self, message: str) -> None:
        self.failures.append(message)


def verify_export(directory: Path, kept: Sequence[Path] = (), payments: Sequence[str] = (),
                  policy: WitnessPolicy | None = None) -> Report:
    report = Report()
    try:
        key = parse_verifier_key((directory / "key.pub").read_text())
    except (OSError, NoteError) as bad:
        report.fail(f"key.pub: {bad}")
        return report
    report.notes.append(f"key {key.encoded()}")
    checkpoints = _checkpoints(sorted((directory / "checkpoints").glob("*.txt")), key, report)
    old = _checkpoints(list(kept), key, report, kept=True)
    if not checkpoints:
        report.fail("the export holds no checkpoint that verifies")
        return report
    newest = max(checkpoints, key=lambda c: c.size)
    report.size = newest.size
    if policy is not None:
        _witnessed(directory / "checkpoints" / f"{newest.size}.txt", policy, report)
    entries, leaves = _entries(directory / "events.jsonl", report)
    if entries is None:
        return report
    recorded = _recorded_leaves(directory / "leaves.txt")
    _check_sequence(entries, report)
    if len(entries) > newest.size:
        report.fail(f"{entries[newest.size].where} and {len(entries) - newest.size - 1} more event(s) follow the "
                    f"newest checkpoint (size {newest.size}): appended behind its back, no checkpoint signs them")
    elif len(entries) < newest.size:
        report.fail(f"the newest checkpoint signs {newest.size} events; the export holds {len(entries)}: "
                    f"events were deleted ({_gap(entries, leaves, recorded)})")
    for checkpoint in sorted(checkpoints, key=lambda c: c.size):
        if checkpoint.size > len(leaves):
            continue
        if merkle.root(leaves[:checkpoint.size]) != checkpoint.root:
            report.fail(f"checkpoint {checkpoint.size}: the events do not hash to its signed root; "
                        f"{_first_bad(entries, leaves, recorded, checkpoint.size)}")
            break
    for checkpoint in old:
        _consistency(checkpoint, newest, leaves, report)
    for payment in payments:
        _inclusion(payment, entries, leaves, newest, report)
    if report.ok:
        report.totals = totals(entries)
    return report


def _witnessed(note_file: Path, policy: WitnessPolicy, report: Report) -> None:
    """The newest checkpoint carries the cosignatures the auditor's witness policy asks for."""
    try:
        found = policy.check(note_file.read_text(), ed25519_verify)
    except (OSError, NoteError) as unwitnessed:
        report.fail(f"checkpoint {report.size} is not witnessed as the policy asks: {unwitnessed}")
        return
    report.notes.append(f"witnessed: checkpoint {report.size} cosigned by {', '.join(c.witness for c in found)}")


def verify_live(audit: AuditLog, key: VerifierKey, kept: Sequence[Path] = (),
                payments: Sequence[str] = (), policy: WitnessPolicy | None = None) -> Report:
    """The live store against its log and checkpoints: an export of it made now, verified as an auditor would,
    plus what only the live store shows (logged events gone from the store, events slipped into the logged range).
    """
    import shutil
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="paywarden-verify-"))
    try:
        missing: list[str] = []
        try:
            audit.export(directory, key, missing)
        except NoteError as none:
            report = Report()
            report.fail(str(none))
            return report
        report = verify_export(directory, kept, payments, policy)
        report.failures[:0] = [f"{where} is in the log but no longer in the event store (deleted)"
                               for where in missing]
        report.failures.extend(f"{where} is in the event store within the logged range but not in the log "
                               "(slipped in behind the log's back)" for where in audit.unlogged())
        logged, size = audit.view.size(), report.size
        if logged > size:
            report.notes.append(f"{logged - size} logged event(s) are not yet under a checkpoint")
        return report
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _checkpoints(paths: list[Path], key: VerifierKey, report: Report, *, kept: bool = False) -> list[Checkpoint]:
    found = []
    for path in paths:
        label = f"kept checkpoint {path}" if kept else f"checkpoint {path.name}"
        try:
            checkpoint = parse_checkpoint(verify_note(path.read_text(), [key], ed25519_verify))
        except (OSError, NoteError, UnicodeDecodeError) as bad:
            report.fail(f"{label}: {bad}")
            continue
        if checkpoint.origin != key.name:
            report.fail(f"{label}: origin {checkpoint.origin!r} is not the key's log {key.name!r}")
            continue
        found.append(checkpoint)
    return found


def _entries(path: Path, report: Report) -> tuple[list[LogEntry] | None, list[bytes]]:
    entries, leaves = [], []
    try:
        raw = path.read_bytes()
    except OSError as bad:
        report.fail(f"events.jsonl: {bad}")
        return None, []
    for number, line in enumerate(raw.split(b"\n")[:-1] if raw.endswith(b"\n") else raw.split(b"\n"), 1):
        try:
            entry = LogEntry.from_line(line)
        except EntryError as bad:
            report.fail(f"events.jsonl line {number}: {bad}")
            return None, []
        entries.append(entry)
        leaves.append(merkle.leaf_hash(line))
    return entries, leaves


def _recorded_leaves(path: Path) -> list[bytes]:
    try:
        return [bytes.fromhex(line) for line in path.read_text().split()]
    except (OSError, ValueError):
        return []


def _check_sequence(entries: list[LogEntry], report: Report) -> None:
    last: dict[str, int] = {}
    for entry in entries:
        if entry.position <= last.get(entry.application, 0):
            report.fail(f"{entry.where} comes after {entry.application}/{last[entry.application]} in the log: "
                        "events are out of order (swapped or re-inserted)")
            return
        last[entry.application] = entry.position
    versions: dict[str, int] = {}
    for entry in entries:
        expected = versions.get(entry.originator_id, 0) + 1
        if entry.originator_version != expected:
            report.fail(f"{entry.where}: version {entry.originator_version} of {entry.originator_id} follows "
                        f"version {expected - 1}: an event of it is missing or out of order")
            return
        versions[entry.originator_id] = expected


def _first_bad(entries: list[LogEntry], leaves: list[bytes], recorded: list[bytes], size: int) -> str:
    for i in range(min(size, len(leaves))):
        if i >= len(recorded) or leaves[i] != recorded[i]:
            return f"first event that differs from the log as recorded: {entries[i].where} (leaf {i})"
    return "the recorded leaves were changed too: the failing event lies within this checkpoint"


def _gap(entries: list[LogEntry], leaves: list[bytes], recorded: list[bytes]) -> str:
    for i, leaf in enumerate(leaves):
        if i >= len(recorded) or leaf != recorded[i]:
            before = f", after {entries[i - 1].where}" if i else ""
            return f"the log recorded another event at leaf {i}{before}, where the export has {entries[i].where}"
    return f"the last {len(recorded) - len(leaves)} logged event(s) are missing" if recorded else "no leaves recorded"


def _consistency(old: Checkpoint, newest: Checkpoint, leaves: list[bytes], report: Report) -> None:
    if old.size > newest.size:
        report.fail(f"the kept checkpoint of size {old.size} is larger than the newest ({newest.size}): the log "
                    "shrank")
        return
    if newest.size > len(leaves):
        return
    try:
        proof = merkle.consistency_proof(old.size, leaves[:newest.size])
        merkle.verify_consistency(old.size, newest.size, old.root, newest.root, proof)
    except merkle.ProofError as bad:
        report.fail(f"kept checkpoint {old.size} → newest {newest.size}: {bad}")
        return
    report.notes.append(f"consistent: the log of size {newest.size} extends the kept checkpoint of size "
                        f"{old.size} ({len(proof)}-hash proof)")


def _inclusion(payment: str, entries: list[LogEntry], leaves: list[bytes], newest: Checkpoint,
               report: Report) -> None:
    found = [i for i, e in enumerate(entries[:newest.size]) if e.originator_id == payment]
    if not found:
        report.fail(f"payment {payment}: no event of it is in the log")
        return
    top = leaves[:newest.size]
    for i in found:
        proof = merkle.inclusion_proof(i, top)
        try:
            merkle.verify_inclusion(i, newest.size, leaves[i], proof, newest.root)
        except merkle.ProofError as bad:
            report.fail(f"payment {payment}: {entries[i].where}: {bad}")
            continue
        report.notes.append(f"included: {entries[i].where} {entries[i].topic.rpartition('.')[2]} at leaf {i} of "
                            f"{newest.size} ({len(proof)}-hash proof)")


def totals(entries: list[LogEntry]) -> dict[tuple[str, str, str], int]:
    """Settled (CONFIRMED) volume in atomic units per (merchant, network, asset), replayed from the events."""
    merchants: dict[str, str] = {}
    received: dict[str, dict[str, Any]] = {}
    volume: dict[tuple[str, str, str], int] = defaultdict(int)
    for e in entries:
        if e.topic == MERCHANT_REGISTERED:
            merchants[merchant_client_id(e.originator_id)] = str(e.state.get("name"))
        elif e.topic == PAYMENT + "Received":
            received[e.originator_id] = e.state
        elif e.topic == PAYMENT + "Confirmed" and e.originator_id in received:
            p = received[e.originator_id]
            client = str(p.get("client_id"))
            volume[(merchants.get(client, client), str(p.get("network")), str(p.get("asset")))] += int(p["amount"])
    return dict(volume)
