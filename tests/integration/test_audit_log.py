"""The tamper-evident log: checkpoints, exports verified offline, and tampering caught on an export and on the live
store (SQLite and PostgreSQL), each failure naming the first bad event by application and position."""

from __future__ import annotations

import json
import shutil

import pytest
from solders.keypair import Keypair

from domain import merkle
from domain.checkpoint import open_note, parse_checkpoint
from domain.networks import DEVNET
from interfaces.audit.log import AuditLog
from interfaces.audit.signing import CheckpointSigner
from interfaces.cli.main import main
from interfaces.config import load_config
from tests.conftest import USDC, make_gateway


@pytest.fixture(params=["embedded", "postgres"])
def logged(request, tmp_path, sandbox, monkeypatch):
    """Two settled payments, a rejected verify and a merchant; the CLI pointed at the store."""
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL",
                 "PAYWARDEN_AUDIT_SIGNING_KEY", "PAYWARDEN_AUDIT_ORIGIN"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(data))
    options = {}
    if request.param == "postgres":
        options = {"database_url": request.getfixturevalue("postgres_url")}
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", options["database_url"])
    gateway = make_gateway(data, sandbox, **options)
    for amount in (USDC // 100, USDC // 20):
        assert gateway.post("/settle", gateway.body(amount=amount)).status_code == 200
    assert gateway.post("/verify", gateway.body(payTo=str(gateway.payer.pubkey()))).status_code == 400
    yield gateway, request.param, tmp_path
    gateway.container.close()


def run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def export(capsys, tmp_path, name="export"):
    out = tmp_path / name
    assert run(capsys, "audit", "export", "--out", str(out))[0] == 0
    return out


def lines(directory):
    return (directory / "events.jsonl").read_bytes().split(b"\n")[:-1]


def write(directory, rows):
    (directory / "events.jsonl").write_bytes(b"".join(r + b"\n" for r in rows))


def confirmed_payment_lines(directory):
    return [i for i, line in enumerate(lines(directory)) if b"Payment.Confirmed" in line]


def test_an_export_verifies_offline_and_replays_to_the_settled_totals(logged, capsys):
    gateway, _, tmp_path = logged
    directory = export(capsys, tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == ["checkpoint", "checkpoints", "events.jsonl", "key.pub",
                                                         "leaves.txt", "tile"]
    status, out, _ = run(capsys, "audit", "verify", str(directory))
    assert status == 0, out
    size = len(lines(directory))
    assert f"verified: {size} events" in out
    assert f"  acme  {DEVNET.caip2}  {DEVNET.usdc_mint}  {USDC // 100 + USDC // 20}" in out
    entries = [json.loads(line) for line in lines(directory)]
    assert {e["application"] for e in entries} == {"payments", "merchants"}
    payment = next(e["originator_id"] for e in entries if e["topic"].endswith("Payment.Confirmed"))
    status, out, _ = run(capsys, "audit", "verify", str(directory), "--payment", payment)
    assert status == 0 and out.count("included: payments/") == 4


def test_the_export_says_what_it_wrote_on_stdout(logged, capsys):
    _, _, tmp_path = logged
    status, out, err = run(capsys, "audit", "export", "--out", str(tmp_path / "plain"))
    size = len(lines(tmp_path / "plain"))
    assert status == 0 and err == "" and out == f"exported {size} events, their checkpoints, the public key " \
                                                 f"and the log's tiles to {tmp_path / 'plain'}\n"
    status, out, err = run(capsys, "audit", "export", "--out", str(tmp_path / "as-json"), "--json")
    assert status == 0 and err == ""
    assert json.loads(out) == {"events": len(lines(tmp_path / "as-json")), "directory": str(tmp_path / "as-json")}


def test_one_changed_byte_in_an_exported_event_is_named(logged, capsys):
    _, _, tmp_path = logged
    directory = export(capsys, tmp_path)
    rows = lines(directory)
    i = next(i for i, line in enumerate(rows) if b'"amount":50000' in line)
    rows[i] = rows[i].replace(b'"amount":50000', b'"amount":50001')
    write(directory, rows)
    status, out, _ = run(capsys, "audit", "verify", str(directory))
    where = "{application}/{position}".format(**json.loads(rows[i]))
    assert status == 1 and f"first event that differs from the log as recorded: {where} (leaf {i})" in out


def test_a_deleted_exported_event_is_caught(logged, capsys):
    _, _, tmp_path = logged
    directory = export(capsys, tmp_path)
    rows = lines(directory)
    gone = confirmed_payment_lines(directory)[0]
    write(directory, rows[:gone] + rows[gone + 1:])
    status, out, _ = run(capsys, "audit", "verify", str(directory))
    after = "{application}/{position}".format(**json.loads(rows[gone - 1]))
    assert status == 1 and "events were deleted" in out and f"the log recorded another event at leaf {gone}, " \
        f"after {after}" in out


def test_two_swapped_exported_events_are_named(logged, capsys):
    _, _, tmp_path = logged
    directory = export(capsys, tmp_path)
    rows = lines(directory)
    rows[3], rows[4] = rows[4], rows[3]
    write(directory, rows)
    status, out, _ = run(capsys, "audit", "verify", str(directory))
    second = "{application}/{position}".format(**json.loads(rows[4]))
    assert status == 1 and "out of order" in out and f"{second}" in out


def test_an_event_appended_behind_the_checkpoints_back_is_caught(logged, capsys):
    _, _, tmp_path = logged
    directory = export(capsys, tmp_path)
    rows = lines(directory)
    extra = json.loads(rows[-1])
    extra["position"] += 1
    extra["originator_version"] += 1
    from domain.canonical import canonical

    write(directory, [*rows, canonical(extra)])
    status, out, _ = run(capsys, "audit", "verify", str(directory))
    where = "{application}/{position}".format(**extra)
    assert status == 1 and f"{where} and 0 more event(s) follow the newest checkpoint" in out


def test_a_checkpoint_signed_by_another_key_is_refused(logged, capsys):
    _, _, tmp_path = logged
    directory = export(capsys, tmp_path)
    checkpoint = next((directory / "checkpoints").glob("*.txt"))
    genuine = checkpoint.read_text()
    forger = CheckpointSigner.generate(genuine.split("\n")[0])
    forged = forger.sign_text(genuine.split("\n\n")[0] + "\n")
    checkpoint.write_text(forged)
    status, out, _ = run(capsys, "audit", "verify", str(directory))
    assert status == 1 and f"checkpoint {checkpoint.name}: no signature by a trusted key" in out


def test_a_rewritten_and_re_signed_log_fails_consistency_with_a_kept_checkpoint(logged, capsys):
    gateway, _, tmp_path = logged
    status, kept_note, _ = run(capsys, "audit", "checkpoint")
    kept = tmp_path / "kept.txt"
    kept.write_text(kept_note)
    assert gateway.post("/settle", gateway.body(amount=USDC // 10)).status_code == 200
    directory = export(capsys, tmp_path)
    status, out, _ = run(capsys, "audit", "verify", str(directory), "--checkpoint", str(kept))
    assert status == 0 and "consistent: the log of size" in out
    # The operator rewrites an early event and re-signs everything with the real key.
    rows = lines(directory)
    i = next(i for i, line in enumerate(rows) if b'"amount":10000' in line)
    rows[i] = rows[i].replace(b'"amount":10000', b'"amount":1')
    write(directory, rows)
    from domain import merkle
    from domain.checkpoint import Checkpoint

    signer = AuditLog.open(load_config()).signer()
    leaves = [merkle.leaf_hash(r) for r in rows]
    (directory / "leaves.txt").write_text("".join(f"{leaf.hex()}\n" for leaf in leaves))
    shutil.rmtree(directory / "checkpoints")
    (directory / "checkpoints").mkdir()
    (directory / "checkpoints" / f"{len(rows)}.txt").write_text(
        signer.sign(Checkpoint(signer.name, len(rows), merkle.root(leaves))))
    assert run(capsys, "audit", "verify", str(directory))[0] == 0  # alone, the rewritten export looks fine
    status, out, _ = run(capsys, "audit", "verify", str(directory), "--checkpoint", str(kept))
    assert status == 1 and "does not extend the log of size" in out


# -- the live store -------------------------------------------------------------------------------------------


class Store:
    """Direct access to the payments event table, as an intruder with database access would have."""

    def __init__(self, store, tmp_path):
        self.store, self.tmp_path = store, tmp_path
        config = load_config()
        from interfaces.audit.stores import reader

        self.app = reader(config, "payments")
        self.recorder = self.app.recorder
        self.table = "stored_events" if store == "embedded" else "payments_events"

    def execute(self, statement, params=()):
        if self.store == "embedded":
            with self.recorder.datastore.transaction(commit=True) as c:
                c.execute(statement, params)
        else:
            with self.recorder.datastore.get_connection() as conn:
                conn.execute(statement.replace("?", "%s"), params)

    def rows(self):
        return list(self.recorder.select_notifications(None, 1000))


def live_verify(capsys):
    return run(capsys, "audit", "verify", "--live")


def test_the_live_store_verifies_and_one_changed_byte_is_named(logged, capsys):
    gateway, store, tmp_path = logged
    assert run(capsys, "audit", "checkpoint")[0] == 0
    assert live_verify(capsys)[0] == 0
    db = Store(store, tmp_path)
    victim = next(n for n in db.rows() if n.topic.endswith("Payment.Received"))
    changed = victim.state.replace(b'"amount": 10000', b'"amount": 10001').replace(b'"amount":10000',
                                                                                     b'"amount":10001')
    assert changed != victim.state
    rowid = "rowid" if store == "embedded" else "notification_id"
    db.execute(f"UPDATE {db.table} SET state = ? WHERE {rowid} = ?", (changed, victim.id))
    status, out, _ = live_verify(capsys)
    assert status == 1 and f"first event that differs from the log as recorded: payments/{victim.id}" in out


def test_a_deleted_live_event_is_named(logged, capsys):
    gateway, store, tmp_path = logged
    assert run(capsys, "audit", "checkpoint")[0] == 0
    db = Store(store, tmp_path)
    victim = next(n for n in db.rows() if n.topic.endswith("Payment.Confirmed"))
    rowid = "rowid" if store == "embedded" else "notification_id"
    db.execute(f"DELETE FROM {db.table} WHERE {rowid} = ?", (victim.id,))
    status, out, _ = live_verify(capsys)
    assert status == 1 and f"payments/{victim.id} is in the log but no longer in the event store (deleted)" in out


def test_two_swapped_live_events_are_named(logged, capsys):
    gateway, store, tmp_path = logged
    assert run(capsys, "audit", "checkpoint")[0] == 0
    db = Store(store, tmp_path)
    a, b = [n for n in db.rows() if n.topic.endswith("Payment.Received")][:2]
    rowid = "rowid" if store == "embedded" else "notification_id"
    db.execute(f"UPDATE {db.table} SET state = ? WHERE {rowid} = ?", (b.state, a.id))
    db.execute(f"UPDATE {db.table} SET state = ? WHERE {rowid} = ?", (a.state, b.id))
    status, out, _ = live_verify(capsys)
    assert status == 1 and f"first event that differs from the log as recorded: payments/{a.id}" in out


def test_an_event_slipped_into_the_logged_range_of_the_live_store_is_caught(logged, capsys):
    gateway, store, tmp_path = logged
    assert run(capsys, "audit", "checkpoint")[0] == 0
    db = Store(store, tmp_path)
    rows = db.rows()
    victim = next(n for n in rows if n.topic.endswith("Payment.Confirmed"))
    # History rewritten: later events moved up, a forged event written where the genuine one stood.
    rowid = "rowid" if store == "embedded" else "notification_id"
    db.execute(f"UPDATE {db.table} SET {rowid} = {rowid} + 1000 WHERE {rowid} >= ?", (victim.id,))
    forged, originator = victim.state, victim.originator_id  # a copy of the event, as a later version
    columns = "originator_id, originator_version, topic, state"
    if store == "embedded":
        db.execute(f"INSERT INTO {db.table} (rowid, {columns}) VALUES (?, ?, ?, ?, ?)",
                   (victim.id, originator.hex, victim.originator_version + 10, victim.topic, forged))
    else:
        db.execute(f"INSERT INTO {db.table} (notification_id, {columns}) VALUES (?, ?, ?, ?, ?)",
                   (victim.id, originator, victim.originator_version + 10, victim.topic, forged))
    status, out, _ = live_verify(capsys)
    assert status == 1 and f"payments/{victim.id}" in out and "FAILED" in out


def test_the_follower_trails_the_writers_and_signs_checkpoints_on_its_interval(logged, capsys):
    import threading
    import time
    from dataclasses import replace

    gateway, _, _ = logged
    config = replace(load_config(), audit_checkpoint_seconds=1)
    stop = threading.Event()
    from interfaces.audit.log import follow

    worker = threading.Thread(target=follow, args=(config, stop), kwargs={"poll_seconds": 0.05})
    worker.start()
    audit = AuditLog.open(config)
    try:
        def stored():
            return sum(len(app.recorder.select_notifications(None, 1000)) for app in audit.applications().values())

        total = stored()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(size == total for size, *_ in audit.view.checkpoints()):
            time.sleep(0.05)
        assert any(size == total for size, *_ in audit.view.checkpoints())
        assert gateway.post("/settle", gateway.body(amount=USDC // 10)).status_code == 200
        grown = stored()
        assert grown >= total + 4  # Received, Approved, SettlementSubmitted, Confirmed (and any claims)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and audit.view.checkpoints()[-1][0] != grown:
            time.sleep(0.05)
        assert audit.view.checkpoints()[-1][0] == grown
    finally:
        stop.set()
        worker.join(timeout=10)
        audit.close()
    status, out, _ = run(capsys, "audit", "verify", str(export(capsys, gateway.container.config.data_dir.parent)))
    assert status == 0, out


def _reading(audit: AuditLog) -> list[tuple[int, int]]:
    """Records the ranges of leaves `audit` reads from its view."""
    read: list[tuple[int, int]] = []
    leaves_between = audit.view.leaves_between

    def spied(start: int, end: int) -> list[bytes]:
        read.append((start, end))
        return leaves_between(start, end)

    audit.view.leaves_between = spied  # type: ignore[method-assign]
    return read


def test_a_new_process_checkpoints_from_the_kept_range_reading_only_the_new_leaves(logged, caplog):
    gateway, _, _ = logged
    config = load_config()
    signer = CheckpointSigner.generate("paywarden.test/audit")
    first = AuditLog.open(config)
    first.catch_up()
    kept, _ = first.checkpoint(signer)
    first.close()
    assert gateway.post("/settle", gateway.body(amount=USDC // 10)).status_code == 200

    later = AuditLog.open(config)  # as the projection worker after a restart: nothing kept in memory
    later.catch_up()
    read = _reading(later)
    size, note = later.checkpoint(signer)
    assert size > kept
    assert read == [(kept, size)]  # the history before the kept checkpoint is not read again
    whole = merkle.root(later.view.leaves(size))
    assert parse_checkpoint(open_note(note)[0]).root == whole
    later.close()

    # A kept range that does not give its checkpoint's signed root is not trusted: every leaf is read again.
    assert gateway.post("/settle", gateway.body(amount=USDC // 10)).status_code == 200
    view = AuditLog.open(config).view
    with view.datastore.transaction(commit=True) as c:
        c.execute(view.sql("UPDATE audit_ranges SET hashes = ? WHERE size = ?"),
                  ("00" * 32 * bin(size).count("1"), size))
    third = AuditLog.open(config)
    third.catch_up()
    read = _reading(third)
    grown, note = third.checkpoint(signer)
    assert read[0][0] == 0 and read[-1][1] == grown > size
    assert parse_checkpoint(open_note(note)[0]).root == merkle.root(third.view.leaves(grown))
    assert "does not give the root it signed" in caplog.text
    third.close()


def test_production_without_a_signing_key_refuses_to_checkpoint_with_a_message(logged, capsys, monkeypatch):
    monkeypatch.setenv("PAYWARDEN_MODE", "production")
    monkeypatch.setenv("PAYWARDEN_FEE_PAYER_KEYS", str(list(bytes(Keypair().to_bytes()))))
    status, _, err = run(capsys, "audit", "checkpoint")
    assert status == 2 and "PAYWARDEN_AUDIT_SIGNING_KEY is required in production" in err


def test_a_configured_signing_key_signs_and_its_verifier_key_is_exported(logged, capsys, monkeypatch):
    _, _, tmp_path = logged
    status, out, err = run(capsys, "audit", "keygen", "audit.acme.example/log")
    signer = CheckpointSigner.parse(out.strip())
    assert status == 0 and f"verifier key (publish it): {signer.verifier.encoded()}" in err
    monkeypatch.setenv("PAYWARDEN_AUDIT_SIGNING_KEY", out.strip())
    directory = export(capsys, tmp_path)
    assert (directory / "key.pub").read_text().strip() == signer.verifier.encoded()
    status, out, _ = run(capsys, "audit", "verify", str(directory))
    assert status == 0 and out.startswith(f"key {signer.verifier.encoded()}")


def test_checkpoints_are_kept_while_another_process_appends_leaves(tmp_path):
    """`audit checkpoint` and `audit export` sign while the follower appends: on SQLite, a transaction that read
    before writing was refused at once ("database is locked") whenever the follower committed in between, which
    failed 349 of 400 checkpoints in a reproduction. The checkpoint's write now comes first."""
    import os
    import threading
    import time
    from datetime import UTC, datetime

    config = load_config({"PAYWARDEN_DATA_DIR": str(tmp_path)})
    follower, auditor = AuditLog.open(config), AuditLog.open(config)  # each its own connections, as two processes
    stop, appended, failures = threading.Event(), [0], []

    def follow() -> None:
        while not stop.is_set():
            follower.view.append_all("other", [(appended[0] + 1, os.urandom(32))])
            appended[0] += 1
            time.sleep(0.0005)

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        for size in range(10**6, 10**6 + 60):
            try:
                assert auditor.view.record_checkpoint(size, f"note {size}", datetime.now(UTC).isoformat())
            except Exception as failure:  # noqa: BLE001 - every failure is counted and shown
                failures.append(repr(failure))
            time.sleep(0.002)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert appended[0] > 60, "the follower must have appended while the checkpoints were kept"
    assert failures == []
    assert [size for size, *_ in auditor.view.checkpoints()] == list(range(10**6, 10**6 + 60))
    assert not auditor.view.record_checkpoint(10**6, "again", datetime.now(UTC).isoformat())  # kept once
    follower.close()
    auditor.close()
