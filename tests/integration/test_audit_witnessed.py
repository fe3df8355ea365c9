"""The audit log nobody has to take our word for: its tiles read over HTTP (and from an export) by a tlog client
written from the C2SP specs (tests/tlog_client.py), two witnesses cosigning its checkpoints, and a rewritten history
refused by a witness and by `audit verify --witness-policy` (SQLite and PostgreSQL)."""

from __future__ import annotations

import logging

import httpx
import pytest

from domain.checkpoint import parse_verifier_key
from interfaces.audit.log import AuditLog
from interfaces.audit.witness import Witness, WitnessSigner
from interfaces.config import load_config
from interfaces.http.facilitator.app import create_app
from interfaces.wiring import api_collaborators
from tests.conftest import USDC
from tests.integration import test_audit_log
from tests.integration.test_audit_log import Store, run
from tests.tlog_client import TlogClient, leaf_hash, verify_consistency, verify_inclusion
from tests.wsgi_thread import WsgiThread

logged = test_audit_log.logged  # the same stores, payments and CLI set-up as the log's own tests


def log_key(capsys):
    """The log's verifier key, as an auditor reads it (the first line `audit verify --live` prints)."""
    status, out, _ = run(capsys, "audit", "verify", "--live")
    assert status == 0, out
    return parse_verifier_key(out.splitlines()[0].removeprefix("key "))


def test_a_spec_client_fetches_entries_and_proves_inclusion_and_consistency_from_the_served_tiles(logged, capsys):
    gateway, _, tmp_path = logged
    assert run(capsys, "audit", "checkpoint")[0] == 0
    key = log_key(capsys)
    with WsgiThread(create_app(api_collaborators(gateway.container))) as api:
        def fetch(path: str) -> bytes:
            answer = httpx.get(f"{api.url}/audit/log/{path}")
            assert answer.status_code == 200, (path, answer.text)
            return answer.content

        client = TlogClient(fetch, key.name, key.public_key)
        old_size, old_root, _ = client.checkpoint()
        assert old_size > 5 and client.mth(0, old_size, old_size) == old_root
        for index in range(old_size):
            entry = client.entry(index, old_size)
            assert b'"application":' in entry  # the canonical entry of a stored event
            assert verify_inclusion(index, old_size, leaf_hash(entry), client.inclusion_proof(index, old_size),
                                    old_root)
        tile = httpx.get(f"{api.url}/audit/log/tile/0/000.p/{old_size}")
        assert tile.headers["content-type"] == "application/octet-stream"
        assert "immutable" in tile.headers["cache-control"]
        assert "max-age=5" in httpx.get(f"{api.url}/audit/log/checkpoint").headers["cache-control"]
        beyond = httpx.get(f"{api.url}/audit/log/tile/0/000.p/{old_size + 1}")
        assert beyond.status_code == 404 and beyond.json()["error"] == "no_such_tile"
        assert httpx.get(f"{api.url}/audit/log/tile/0/x000/000").status_code == 404

        assert gateway.post("/settle", gateway.body(amount=USDC // 10)).status_code == 200
        assert run(capsys, "audit", "checkpoint")[0] == 0
        client.tiles.clear()  # a client keeps only full tiles; the partial ones grew
        size, root, _ = client.checkpoint()
        assert size > old_size
        proof = client.consistency_proof(old_size, size)
        assert verify_consistency(old_size, size, old_root, root, proof)
        assert not verify_consistency(old_size, size, old_root, root, [*proof[:-1], b"\x00" * 32])

    out = tmp_path / "export"
    assert run(capsys, "audit", "export", "--out", str(out))[0] == 0
    offline = TlogClient(lambda path: (out / path).read_bytes(), key.name, key.public_key)
    size, root, _ = offline.checkpoint()
    assert offline.mth(0, size, size) == root
    last = offline.entry(size - 1, size)
    assert verify_inclusion(size - 1, size, leaf_hash(last), offline.inclusion_proof(size - 1, size), root)


@pytest.fixture
def witnesses(logged, tmp_path, monkeypatch, capsys):
    """Two witnesses on real listeners, each with its key and state file, knowing the log's key; Paywarden
    configured to ask both."""
    gateway, _, _ = logged
    assert run(capsys, "audit", "checkpoint")[0] == 0
    key = log_key(capsys)
    signers = [WitnessSigner.generate(f"witness.example/w{i}") for i in (1, 2)]
    apps = [Witness(s, [key], tmp_path / f"w{i}.json") for i, s in enumerate(signers)]
    with WsgiThread(apps[0]) as one, WsgiThread(apps[1]) as two:
        monkeypatch.setenv("PAYWARDEN_AUDIT_WITNESSES",
                           f"{one.url} {signers[0].key.encoded()}, {two.url} {signers[1].key.encoded()}")
        policy = "2:" + ",".join(s.key.encoded() for s in signers)
        yield gateway, signers, policy


def test_two_witnesses_cosign_each_checkpoint_and_the_export_meets_a_two_of_two_policy(witnesses, capsys, tmp_path):
    gateway, signers, policy = witnesses
    status, note, err = run(capsys, "audit", "checkpoint")
    assert status == 0 and "refused" not in err
    assert all(f"\u2014 {s.name} " in note for s in signers)
    assert gateway.post("/settle", gateway.body(amount=USDC // 10)).status_code == 200  # grows: a proof is sent
    status, note, err = run(capsys, "audit", "checkpoint")
    assert status == 0 and "refused" not in err and all(f"\u2014 {s.name} " in note for s in signers)
    out = tmp_path / "export"
    assert run(capsys, "audit", "export", "--out", str(out))[0] == 0
    assert all(f"\u2014 {s.name} " in (out / "checkpoint").read_text() for s in signers)
    status, report, _ = run(capsys, "audit", "verify", str(out), "--witness-policy", policy)
    assert status == 0 and "witnessed: checkpoint" in report
    with WsgiThread(create_app(api_collaborators(gateway.container))) as api:
        served = httpx.get(f"{api.url}/audit/log/checkpoint").text
    assert all(f"\u2014 {s.name} " in served for s in signers)


def test_a_rewritten_history_is_refused_by_the_witness_and_by_audit_verify_with_a_witness_policy(
        witnesses, logged, capsys, tmp_path, caplog):
    gateway, signers, policy = witnesses
    _, store, _ = logged
    assert run(capsys, "audit", "checkpoint")[0] == 0  # both witnesses cosign the true history
    # The operator rewrites an early payment in the store and rebuilds the whole log from it, re-signed with the
    # log's own key: alone, the rewritten log is consistent with itself.
    db = Store(store, tmp_path)
    victim = next(n for n in db.rows() if n.topic.endswith("Payment.Received"))
    changed = victim.state.replace(b'"amount": 10000', b'"amount": 1').replace(b'"amount":10000', b'"amount":1')
    assert changed != victim.state
    rowid = "rowid" if store == "embedded" else "notification_id"
    db.execute(f"UPDATE {db.table} SET state = ? WHERE {rowid} = ?", (changed, victim.id))
    audit = AuditLog.open(load_config())
    with audit.view.datastore.transaction(commit=True) as c:
        for table in ("audit_log", "audit_checkpoints", "audit_ranges", "audit_cosignatures"):
            c.execute(f"DELETE FROM {table}")
        c.execute("DELETE FROM " + getattr(audit.view, "tracking_table_name", "tracking"))  # the log's own
    audit.close()
    with caplog.at_level(logging.ERROR, logger="paywarden.witness"):
        status, note, err = run(capsys, "audit", "checkpoint")
    assert status == 0
    assert all(f"witness {s.name} refused checkpoint" in err for s in signers)
    assert all(f"\u2014 {s.name} " not in note for s in signers)
    assert "INCONSISTENT checkpoint" in caplog.text  # the witness says so loudly
    out = tmp_path / "rewritten"
    assert run(capsys, "audit", "export", "--out", str(out))[0] == 0
    assert run(capsys, "audit", "verify", str(out))[0] == 0  # without a policy, it looks fine
    status, report, _ = run(capsys, "audit", "verify", str(out), "--witness-policy", policy)
    assert status == 1 and "is not witnessed as the policy asks" in report and "0 of the 2" in report


def test_a_witness_refuses_an_unknown_log_a_forged_signature_and_a_stale_old_size(logged, capsys, tmp_path):
    assert run(capsys, "audit", "checkpoint")[0] == 0
    key = log_key(capsys)
    _, note, _ = run(capsys, "audit", "checkpoint")
    witness = Witness(WitnessSigner.generate("witness.example/w"), [key], tmp_path / "state.json")
    assert witness.add_checkpoint(f"old 0\n\n{note}".encode()).status == 200
    stale = witness.add_checkpoint(f"old 0\n\n{note}".encode())
    assert (stale.status, stale.content_type) == (409, "text/x.tlog.size")
    size = int(note.splitlines()[1])
    assert stale.body == f"{size}\n"
    assert witness.add_checkpoint(f"old {size}\n\n{note}".encode()).status == 200  # the same tree again
    forged = note.replace(note.splitlines()[2], "A" * 43 + "=")
    assert witness.add_checkpoint(f"old {size}\n\n{forged}".encode()).status == 403
    other = Witness(WitnessSigner.generate("witness.example/x"), [], tmp_path / "other.json")
    assert other.add_checkpoint(f"old 0\n\n{note}".encode()).status == 404
    assert witness.add_checkpoint(b"old 01\n\n" + note.encode()).status == 400
    assert witness.add_checkpoint(f"old {size + 1}\n\n{note}".encode()).status == 400


def test_paywarden_witness_keygen_and_serve_cosign_over_http(logged, capsys, tmp_path):
    """The witness as an operator runs it: `paywarden witness keygen` then `paywarden witness serve`."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.faults import free_port

    assert run(capsys, "audit", "checkpoint")[0] == 0
    key = log_key(capsys)
    _, note, _ = run(capsys, "audit", "checkpoint")
    paywarden = [str(Path(sys.executable).with_name("paywarden"))]
    made = subprocess.run([*paywarden, "witness", "keygen", "witness.example/cli"], capture_output=True, text=True,
                          check=True)
    (tmp_path / "witness.key").write_text(made.stdout)
    witness_key = made.stderr.strip().rsplit(" ", 1)[-1]
    port = free_port()
    server = subprocess.Popen([*paywarden, "witness", "serve", "--listen", f"127.0.0.1:{port}", "--key-file",
                               str(tmp_path / "witness.key"), "--state", str(tmp_path / "state.json"), "--log",
                               key.encoded()], stdout=subprocess.PIPE, text=True)
    try:
        assert f"listening on http://127.0.0.1:{port}" in server.stdout.readline()
        deadline = time.monotonic() + 10
        while True:
            try:
                answer = httpx.post(f"http://127.0.0.1:{port}/add-checkpoint", content=f"old 0\n\n{note}".encode())
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert answer.status_code == 200
        from domain.cosignature import cosignatures, parse_witness_key
        from interfaces.audit.signing import ed25519_verify

        assert [c.witness for c in cosignatures(note + answer.text, [parse_witness_key(witness_key)],
                                                 ed25519_verify)] == ["witness.example/cli"]
        assert httpx.get(f"http://127.0.0.1:{port}/add-checkpoint").status_code == 405
    finally:
        server.terminate()
        server.wait(timeout=10)
