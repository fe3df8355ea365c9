"""The `paywarden` account commands, run as an operator would, against the embedded store."""

from __future__ import annotations

import pytest

from domain.merchant import key_hash, key_prefix
from domain.networks import DEVNET, MAINNET
from interfaces.cli.main import main
from interfaces.config import load_config
from interfaces.container import build


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    return tmp_path


def accounts():
    return build(load_config())


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
    main(["key", "create", "--merchant", "acme", "--env", "test"])
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


def test_merchants_and_keys_are_listed_without_secrets_and_revoked_by_whole_key_or_prefix(data_dir, capsys):
    main(["merchant", "create", "acme"])
    main(["merchant", "create", "beta", "--no-devnet"])
    main(["key", "create", "--merchant", "acme", "--env", "test", "--label", "shop"])
    first = capsys.readouterr().out.strip().splitlines()[-1]
    main(["key", "create", "--merchant", "acme", "--env", "test"])
    second = capsys.readouterr().out.strip().splitlines()[-1]

    assert main(["merchant", "list"]) == 0
    listing = capsys.readouterr().out
    assert "acme" in listing and "beta" in listing
    assert main(["key", "revoke", first]) == 0  # the whole key
    assert f"key {key_prefix(first)}… of acme revoked" in capsys.readouterr().out
    assert main(["key", "revoke", key_prefix(first)]) == 0
    assert "was already revoked" in capsys.readouterr().out

    assert main(["key", "list", "--merchant", "acme"]) == 0
    keys = capsys.readouterr().out
    assert first not in keys and second not in keys and first[8:] not in keys
    lines = {line.split()[0]: line for line in keys.splitlines()[1:]}
    assert "shop" in lines[key_prefix(first)] and "never" in lines[key_prefix(first)]
    assert lines[key_prefix(second)].rstrip().endswith("-")  # not revoked
    assert lines[key_prefix(first)].rstrip()[-1] == "Z"  # revoked at a time



def test_each_account_change_says_what_changed_and_each_listing_shows_the_merchants_rows(data_dir, capsys):
    main(["merchant", "create", "acme"])
    capsys.readouterr()
    assert main(["merchant", "set-rate-limit", "acme", "--per-minute", "42"]) == 0
    assert capsys.readouterr().out == "merchant acme: 42 requests per minute per key\n"
    assert main(["merchant", "discovery", "acme", "on"]) == 0
    assert capsys.readouterr().out == "merchant acme: discovery on\n"
    assert main(["merchant", "list"]) == 0
    assert "42" in capsys.readouterr().out.splitlines()[1].split()

    assert main(["capability", "list", "--merchant", "acme"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["id", "network", "scheme", "asset", "enabled"]
    cap_id = row.split()[0]
    assert row.split()[1:3] == [DEVNET.caip2, "exact"]
    assert main(["capability", "disable", "--merchant", "acme", cap_id]) == 0
    assert capsys.readouterr().out == f"acme: capability {cap_id} disabled\n"
    assert main(["capability", "list", "--merchant", "acme"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []

    assert main(["domain", "add", "--merchant", "acme", "api.example.com"]) == 0
    assert capsys.readouterr().out.startswith("domain api.example.com added (pending)")
    assert main(["domain", "list", "--merchant", "acme"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:3] == ["domain", "status", "by"] and rows[1].split()[:3] == ["api.example.com",
                                                                                        "pending", "-"]
    assert main(["domain", "remove", "--merchant", "acme", "api.example.com"]) == 0
    assert capsys.readouterr().out == "domain api.example.com removed\n"
    assert main(["domain", "list", "--merchant", "acme"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
    assert main(["domain", "remove", "--merchant", "acme", "api.example.com"]) == 2  # refused: nothing printed
    assert capsys.readouterr().out == ""

def test_bad_capability_input_is_refused_and_an_unserved_network_warns_in_the_sandbox(data_dir, capsys):
    main(["merchant", "create", "acme"])
    assert main(["capability", "enable", "--merchant", "acme", "--network", DEVNET.caip2,
                 "--asset", "not-base58-0OIl"]) == 2
    assert "not a base58 mint address" in capsys.readouterr().err
    assert main(["capability", "enable", "--merchant", "acme", "--network", MAINNET.caip2]) == 0
    assert "warning: this deployment does not serve mainnet" in capsys.readouterr().err
    assert main(["key", "create", "--merchant", "acme", "--env", "live"]) == 2
    assert "does not serve" in capsys.readouterr().err


def test_an_unserved_network_is_refused_in_production(data_dir, capsys, monkeypatch, tmp_path):
    from solders.keypair import Keypair

    keypair = tmp_path / "fee.json"
    keypair.write_text(str(list(bytes(Keypair()))))
    monkeypatch.setenv("PAYWARDEN_MODE", "production")
    monkeypatch.setenv("PAYWARDEN_FEE_PAYER_KEYPAIRS", str(keypair))
    monkeypatch.setenv("PAYWARDEN_DEVNET_RPC_URL", "http://127.0.0.1:9")
    main(["merchant", "create", "acme"])
    assert main(["capability", "enable", "--merchant", "acme", "--network", MAINNET.caip2]) == 2
    assert "does not serve mainnet" in capsys.readouterr().err


def test_a_merchant_created_with_an_email_gets_a_password_link_or_reads_the_password(data_dir, capsys,
                                                                                         monkeypatch):
    import io

    assert main(["merchant", "create", "acme", "--email", "owner@example.com"]) == 0
    out = capsys.readouterr().out
    link = out.strip().splitlines()[-1]
    assert link.startswith("http://127.0.0.1:8404/password?token=")
    container = accounts()
    token = link.split("token=")[1]
    assert container.merchants.set_password_with_token(token, "correct horse battery") == "owner@example.com"
    monkeypatch.setattr("sys.stdin", io.StringIO("another fine password\n"))
    assert main(["merchant", "create", "beta", "--email", "b@example.com", "--password-stdin"]) == 0
    assert "password?token" not in capsys.readouterr().out
    login = accounts().accounts.get_login("b@example.com")
    assert login.merchant == "beta" and login.password_hash.startswith("$argon2id$")
