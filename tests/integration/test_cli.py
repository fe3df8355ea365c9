"""The `paywarden` account commands, run as an operator would, against the embedded store."""

from __future__ import annotations

import pytest

from domain.merchant import key_hash, key_prefix
from domain.networks import DEVNET, MAINNET
from interfaces.cli import main
from interfaces.config import load_config
from interfaces.container import build


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    return tmp_path


def accounts():
    container = build(load_config())
    container.refresh_accounts()
    return container


def test_a_key_is_printed_once_works_at_once_and_stops_working_when_revoked(data_dir, capsys):
    assert main(["merchant", "create", "acme"]) == 0
    assert main(["key", "create", "--merchant", "acme", "--env", "test"]) == 0
    api_key = capsys.readouterr().out.strip().splitlines()[-1]
    assert api_key.startswith("pw_test_") and len(api_key) == 48
    record = accounts().accounts.get_key(key_hash(api_key))
    assert record.merchant == "acme" and record.env == "test" and not record.revoked
    assert (DEVNET.caip2, "exact", DEVNET.usdc_mint) in record.capabilities
    assert api_key not in (data_dir / "merchants.db").read_bytes().decode("latin-1")

    assert main(["key", "revoke", key_prefix(api_key)]) == 0
    assert accounts().accounts.get_key(key_hash(api_key)).revoked


def test_capabilities_and_rate_limits_reach_the_accounts_view(data_dir, capsys):
    main(["merchant", "create", "acme", "--no-devnet"])
    main(["key", "create", "--merchant", "acme", "--env", "live"])
    api_key = capsys.readouterr().out.strip().splitlines()[-1]
    assert accounts().accounts.get_key(key_hash(api_key)).capabilities == frozenset()
    assert main(["capability", "enable", "--merchant", "acme", "--network", MAINNET.caip2]) == 0
    assert main(["merchant", "set-rate-limit", "acme", "--per-minute", "5000"]) == 0
    record = accounts().accounts.get_key(key_hash(api_key))
    assert record.capabilities == {(MAINNET.caip2, "exact", MAINNET.usdc_mint)}
    assert record.rate_limit_per_minute == 5000


@pytest.mark.parametrize("argv, message", [
    (["key", "create", "--merchant", "nobody", "--env", "test"], "no merchant named nobody"),
    (["key", "revoke", "pw_test_00000000"], "no key with prefix"),
    (["capability", "enable", "--merchant", "acme", "--network", "solana:nowhere"], "not one Paywarden serves"),
    (["merchant", "create", "Not A Name"], "must be 1-63"),
])
def test_bad_commands_exit_2_with_a_clear_message(data_dir, capsys, argv, message):
    main(["merchant", "create", "acme"])
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_second_merchant_with_the_same_name_is_refused(data_dir, capsys):
    assert main(["merchant", "create", "acme"]) == 0
    assert main(["merchant", "create", "acme"]) == 2
    assert "already exists" in capsys.readouterr().err
