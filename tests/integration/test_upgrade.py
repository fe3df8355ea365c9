"""A store written by an earlier release, opened by this one. tests/fixtures/wave1/ was written by the end-of-wave-1
release (ec5dcc6, by its make_store.py): a settled, a verified and a rejected payment of merchant `acme`, under
idempotency keys derived from the client's signature and without claims. Its chain is the sandbox's: the settled
transaction is landed again, byte for byte, on a fresh localnet (the chain as it was).

After `paywarden upgrade` (which `serve` runs at start): the old API key works, the old settled payment sent again
is `duplicate_settlement` naming its transaction (not a new payment refused by the chain), and the audit tools
(`audit rebuild --check`, an export verified offline, `audit chain`) pass."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from falcon import testing

from domain.codes import Code
from domain.solana_tx import decode_transaction
from interfaces.cli.main import main
from interfaces.config import Config
from interfaces.container import build
from interfaces.http.facilitator.app import create_app
from interfaces.sandbox.chain import Sandbox
from interfaces.sandbox.localnet import LocalnetThread
from interfaces.wiring import api_collaborators
from tests.conftest import USDC

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "wave1"


def chain_as_it_was(wave1: dict) -> Sandbox:
    """A fresh sandbox where the wave-1 settlement is on chain again: the same signed bytes, so the same signature."""
    sandbox = Sandbox()
    sandbox.airdrop(wave1["fee_payer"], 10 * 10**9)
    sandbox.mint_usdc(wave1["payer"], 10 * USDC)
    sandbox.mint_usdc(wave1["pay_to"], 0)
    sandbox._blockhashes[wave1["settled_blockhash"]] = sandbox.slot  # the old blockhash, still recent here
    landed = sandbox.send(decode_transaction(wave1["settled_transaction"]))
    assert landed.ok and landed.signature == wave1["answers"]["settled"]["transaction"], landed
    return sandbox


@pytest.fixture
def upgraded(tmp_path, monkeypatch):
    wave1 = json.loads((FIXTURE / "wave1.json").read_text())
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "store", data)
    shutil.copy(FIXTURE / "fee-payer.json", tmp_path / "fee-payer.json")
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_AUDIT_SIGNING_KEY",
                 "PAYWARDEN_AUDIT_ORIGIN", "PAYWARDEN_MAINNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(data))
    monkeypatch.setenv("PAYWARDEN_FEE_PAYER_KEYPAIRS", str(tmp_path / "fee-payer.json"))
    sandbox = chain_as_it_was(wave1)
    with LocalnetThread(sandbox, slot_ms=None) as localnet:
        monkeypatch.setenv("PAYWARDEN_DEVNET_RPC_URL", localnet.url)
        assert main(["upgrade"]) == 0
        container = build(Config(data_dir=data, devnet_rpc_url=localnet.url,
                                 fee_payer_keypairs=(tmp_path / "fee-payer.json",)))
        try:
            yield wave1, testing.TestClient(create_app(api_collaborators(container))), sandbox, tmp_path
        finally:
            container.close()


def post(client: testing.TestClient, wave1: dict, path: str, body: dict, **headers: str) -> testing.Result:
    return client.simulate_post(path, json=body, headers={"Authorization": f"Bearer {wave1['api_key']}", **headers})


def test_a_wave_1_store_keeps_its_key_its_settled_payment_and_its_audit_trail(upgraded, capsys):
    wave1, client, sandbox, tmp_path = upgraded
    old_tx = wave1["answers"]["settled"]["transaction"]
    # The old API key works.
    assert client.simulate_get("/supported", headers={"Authorization": f"Bearer {wave1['api_key']}"}).status == \
        "200 OK"
    # The old settled payment, sent again, is recognised: duplicate_settlement naming its transaction, with or
    # without an Idempotency-Key (wave 1 took none, so no key can have its success again), and at /verify.
    for headers in ({}, {"Idempotency-Key": "order-1"}):
        again = post(client, wave1, "/settle", wave1["bodies"]["settled"], **headers)
        assert (again.status_code, again.json["errorReason"], again.json["transaction"]) == \
            (400, Code.DUPLICATE_SETTLEMENT, old_tx), again.json
    verified = post(client, wave1, "/verify", wave1["bodies"]["settled"])
    assert verified.json["invalidReason"] == Code.DUPLICATE_SETTLEMENT and old_tx in verified.json["invalidMessage"]
    assert sandbox.token_balance(wave1["pay_to"]) == int(wave1["bodies"]["settled"]["paymentRequirements"]["amount"])
    # Nothing was paid for the one that was only verified: it settles now, once.
    settled = post(client, wave1, "/settle", wave1["bodies"]["verified"])
    assert settled.json["success"] is True, settled.json
    assert post(client, wave1, "/settle", wave1["bodies"]["verified"]).json["errorReason"] == \
        Code.DUPLICATE_SETTLEMENT
    # The audit tools read the old events beside the new.
    assert main(["audit", "rebuild", "--check"]) == 0, capsys.readouterr()
    assert main(["audit", "export", "--out", str(tmp_path / "export")]) == 0, capsys.readouterr()
    assert main(["audit", "verify", str(tmp_path / "export")]) == 0, capsys.readouterr()
    assert main(["audit", "chain"]) == 0, capsys.readouterr()


def test_the_upgrade_claims_each_old_transaction_once_and_a_second_run_adds_nothing(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "store", data)
    monkeypatch.delenv("PAYWARDEN_DATABASE_URL", raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(data))
    assert main(["upgrade"]) == 0
    assert "1 claim(s) added" in capsys.readouterr().err
    assert main(["upgrade"]) == 0
    assert "0 claim(s) added" in capsys.readouterr().err

