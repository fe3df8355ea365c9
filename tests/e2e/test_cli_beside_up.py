"""Issue 27, findings 5, 6 and 10 with a real `paywarden up` on non-default ports: the CLI beside it prints the
proxy and console addresses it serves, `audit chain` checks the payments against its localnet, and it stops
within 2 s of SIGTERM without SIGKILL. Finding 3: the console password `up` prints logs in, whichever store the
data directory was used with before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from solana.rpc.api import Client
from solders.keypair import Keypair

from interfaces.config import RUNNING_STACK
from interfaces.sandbox.exact_client import build_exact_payment, to_base64
from tests.e2e.test_up_lifecycle import PAYWARDEN, killed_if_left, signalled, start_up, up_env, up_info

pytestmark = pytest.mark.slow


def paywarden(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PAYWARDEN), *argv], env=env, capture_output=True, text=True, timeout=120)


def settle_one(info: dict) -> None:
    payer = Keypair.from_bytes(bytes(json.loads(Path(info["payer_keypair_path"]).read_text())))
    fee_payer = info["fee_payers"][0]
    blockhash = Client(info["rpc_url"]).get_latest_blockhash().value.blockhash
    tx = build_exact_payment(payer, fee_payer=fee_payer, mint=info["usdc_mint"], pay_to=info["pay_to"],
                             amount=10_000, blockhash=blockhash)
    body = {"x402Version": 2, "paymentPayload": {"x402Version": 2, "payload": {"transaction": to_base64(tx)}},
            "paymentRequirements": {"scheme": "exact", "network": info["network"], "amount": "10000",
                                    "asset": info["usdc_mint"], "payTo": info["pay_to"],
                                    "extra": {"feePayer": fee_payer}}}
    answer = httpx.post(f"{info['base_url']}/settle", json=body, timeout=60,
                        headers={"Authorization": f"Bearer {info['api_key']}"})
    assert answer.status_code == 200 and answer.json()["success"] is True, answer.text


def console_logs_in(info: dict) -> bool:
    answer = httpx.post(f"{info['console_url']}/api/v1/session", timeout=30,
                        json={"email": info["console_email"], "password": info["console_password"]})
    return answer.status_code == 200


def test_the_cli_beside_up_prints_what_up_serves_and_up_stops_within_2_seconds(tmp_path):
    env = up_env(tmp_path)
    process = start_up(env)
    with killed_if_left(process):
        info = up_info(process)
        assert (tmp_path / RUNNING_STACK).is_file()
        # the gateway URLs name the proxy's port, the password links the console's: those of this `up`
        created = paywarden(env, "service", "create", "--merchant", "sandbox", "--name", "Beside",
                            "--domain", "localhost", "--port", "9")
        assert created.returncode == 0, created.stderr
        assert json.loads(created.stdout)["gatewayUrl"].startswith(info["proxy_url"] + "/")
        listed = paywarden(env, "service", "list", "--merchant", "sandbox")
        assert all(s["gatewayUrl"].startswith(info["proxy_url"] + "/") for s in json.loads(listed.stdout))
        link = paywarden(env, "merchant", "password-link", "sandbox@paywarden.localhost")
        assert link.stdout.startswith(info["console_url"] + "/password?token="), link.stdout
        # `audit chain` checks the settled payment against the localnet of this `up`
        settle_one(info)
        chain = paywarden(env, "audit", "chain")
        assert chain.returncode == 0 and "no RPC endpoint" not in chain.stdout, chain.stdout + chain.stderr
        assert "1 settled payment(s) checked against the chain; 0 problem(s)" in chain.stdout
        # the password link above replaced no password: the printed one still logs in
        assert console_logs_in(info)
        code, took, err = signalled(process, signal.SIGTERM)
    assert code == 0 and took < 2.0, f"stopped {took:.2f} s after SIGTERM"
    assert "SIGKILL" not in err, err[-1000:]
    assert not (tmp_path / RUNNING_STACK).exists()  # gone with it: the CLI no longer prints its addresses
    link = paywarden(env, "merchant", "password-link", "sandbox@paywarden.localhost")
    assert link.stdout.startswith("http://127.0.0.1:8404/password?token=")


def test_the_console_password_belongs_to_the_store_it_was_set_in(tmp_path, postgres_url, redis_url):
    """One data directory, the embedded store, then PostgreSQL, then the embedded store again: each time the
    printed password logs in."""
    stores = [up_env(tmp_path), up_env(tmp_path, PAYWARDEN_DATABASE_URL=postgres_url, PAYWARDEN_REDIS_URL=redis_url),
              up_env(tmp_path)]
    printed = []
    for env in stores:
        process = start_up(env)
        try:
            info = up_info(process)
            assert console_logs_in(info), info["database_url"]
            printed.append(info["console_password"])
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    assert printed[0] == printed[2] != printed[1]  # each store keeps its own
    files = sorted(p.name for p in tmp_path.glob("sandbox-console-password*"))
    assert len(files) == 2 and all(os.stat(tmp_path / f).st_mode & 0o077 == 0 for f in files)
