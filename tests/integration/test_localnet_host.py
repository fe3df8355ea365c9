"""`paywarden up`'s default: the API worker hosts the localnet. The worker's own chain is the sandbox in-process, the
same sandbox answers JSON-RPC and the faucet on the RPC listener, and every new sandbox funds the accounts `up`
names (so a restarted worker comes back with them)."""

from __future__ import annotations

import importlib
import json
import sys
import time
from typing import Any

import pytest
from falcon import testing
from solders.keypair import Keypair

from domain.exact import associated_token_address
from domain.networks import DEVNET, KeyEnv, Programs
from interfaces.adapters.chain.litesvm import LiteSvmChain
from interfaces.runtime.closing import close_worker
from interfaces.sandbox.localnet_host import HostedLocalnet, format_accounts, parse_accounts
from tests.conftest import USDC, Gateway

API, RPC = "8402", "8899"


def test_the_accounts_up_names_round_trip_through_the_environment():
    accounts = [(str(Keypair().pubkey()), 10**10, None), (str(Keypair().pubkey()), 10**9, 100 * USDC),
                (str(Keypair().pubkey()), 0, 0)]
    assert parse_accounts(format_accounts(accounts)) == accounts
    assert parse_accounts("") == []


def test_a_new_hosted_sandbox_funds_the_named_accounts_and_ticks():
    payer, merchant = str(Keypair().pubkey()), str(Keypair().pubkey())
    localnet = HostedLocalnet([(payer, 10**9, 5 * USDC), (merchant, 0, 0)], slot_ms=10)
    try:
        assert localnet.sandbox.sol_balance(payer) == 10**9
        assert localnet.sandbox.token_balance(payer) == 5 * USDC
        assert localnet.sandbox.account(merchant) is None  # no SOL: only its (empty) USDC account exists
        usdc_account = associated_token_address(merchant, DEVNET.usdc_mint, Programs.TOKEN)
        assert localnet.sandbox.account(usdc_account) is not None
        assert localnet.sandbox.token_balance(merchant) == 0
        later = localnet.sandbox.slot + 3
        deadline = time.monotonic() + 5
        while localnet.sandbox.slot < later and time.monotonic() < deadline:
            time.sleep(0.01)
        assert localnet.sandbox.slot >= later
    finally:
        localnet.stop()


@pytest.fixture
def hosted(tmp_path, monkeypatch) -> Any:
    """interfaces.http.facilitator.wsgi as gunicorn loads it in `up`'s API worker."""
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_CONSOLE_BIND"):
        monkeypatch.delenv(name, raising=False)
    fee_payer = Keypair()
    (tmp_path / "fee-payer.json").write_text(json.dumps(list(bytes(fee_payer))))
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PAYWARDEN_FEE_PAYER_KEYPAIRS", str(tmp_path / "fee-payer.json"))
    monkeypatch.setenv("PAYWARDEN_DEVNET_RPC_URL", f"http://127.0.0.1:{RPC}")  # what the other processes use
    monkeypatch.setenv("PAYWARDEN_LOCALNET_BIND", f"127.0.0.1:{RPC}")
    payer = Keypair()
    monkeypatch.setenv("PAYWARDEN_LOCALNET_ACCOUNTS", format_accounts([(str(payer.pubkey()), 10**9, 10 * USDC)]))
    sys.modules.pop("interfaces.http.facilitator.wsgi", None)
    wsgi = importlib.import_module("interfaces.http.facilitator.wsgi")
    yield wsgi, payer, fee_payer
    close_worker()  # as gunicorn's worker_exit does: the follower stops, then the stores close
    wsgi.localnet.stop()
    sys.modules.pop("interfaces.http.facilitator.wsgi", None)


def rpc(client: testing.TestClient, method: str, *params: Any) -> Any:
    answer = client.simulate_post("/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)},
                                  extras={"SERVER_PORT": RPC})
    return answer.json["result"]


def test_the_api_worker_calls_its_sandbox_in_process_and_serves_it_on_the_rpc_listener(hosted):
    wsgi, payer, fee_payer = hosted
    chain = wsgi.container.chains.for_network(DEVNET.caip2)
    while hasattr(chain, "inner"):  # the metrics and durability decorators
        chain = chain.inner
    assert isinstance(chain, LiteSvmChain) and chain._sandbox is wsgi.localnet.sandbox
    client = testing.TestClient(wsgi.application)
    assert client.simulate_get("/health", extras={"SERVER_PORT": RPC}).text == "ok"
    assert rpc(client, "getBalance", str(payer.pubkey()))["value"] == 10**9
    assert rpc(client, "getBalance", str(fee_payer.pubkey()))["value"] > 0  # the service's signer is funded

    container = wsgi.container
    container.merchants.register("acme")
    container.merchants.enable_capability("acme", DEVNET.caip2)
    api_key, _ = container.merchants.create_key("acme", KeyEnv.TEST)
    gateway = Gateway(container, client, api_key, wsgi.localnet.sandbox, str(fee_payer.pubkey()), payer=payer)
    wsgi.localnet.sandbox.mint_usdc(str(gateway.pay_to.pubkey()), 0)
    settled = gateway.post("/settle", gateway.body(amount=USDC // 100))
    assert settled.status_code == 200 and settled.json["success"] is True
    # The transfer the API made in-process is what the RPC listener reports.
    status = rpc(client, "getSignatureStatuses", [settled.json["transaction"]])["value"][0]
    assert status["confirmationStatus"] in ("confirmed", "finalized") and status["err"] is None
    assert wsgi.localnet.sandbox.token_balance(str(gateway.pay_to.pubkey())) == USDC // 100
