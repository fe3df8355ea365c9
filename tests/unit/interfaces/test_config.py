"""Configuration: every bad value stops start-up with a message naming its variable."""

from __future__ import annotations

import json

import pytest
from solders.keypair import Keypair

from interfaces.adapters.signers import write_keypair
from interfaces.config import ConfigError, load_config, without_password
from interfaces.container import build_fee_payers


@pytest.mark.parametrize("name, value", [
    ("PAYWARDEN_MODE", "staging"),
    ("PAYWARDEN_DATABASE_URL", "mysql://x"),
    ("PAYWARDEN_REDIS_URL", "http://x"),
    ("PAYWARDEN_DEVNET_RPC_URL", "ftp://x"),
    ("PAYWARDEN_MAX_COMPUTE_UNIT_LIMIT", "many"),
    ("PAYWARDEN_MAX_COMPUTE_UNIT_PRICE", "-1"),
    ("PAYWARDEN_RATE_LIMIT_PER_KEY", "100 per minute"),
    ("PAYWARDEN_ANONYMOUS", "perhaps"),
    ("PAYWARDEN_FEE_PAYER_KEYPAIRS", "/nonexistent/keypair.json"),
])
def test_a_bad_value_names_its_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        load_config({name: value})


def test_production_requires_fee_payers_and_turns_the_anonymous_identity_off(tmp_path):
    with pytest.raises(ConfigError, match="PAYWARDEN_FEE_PAYER_KEYPAIRS"):
        load_config({"PAYWARDEN_MODE": "production"})
    path = write_keypair(tmp_path / "fee.json", Keypair())
    config = load_config({"PAYWARDEN_MODE": "production", "PAYWARDEN_FEE_PAYER_KEYPAIRS": str(path)})
    assert not config.anonymous and not config.sandbox
    assert load_config({}).anonymous and load_config({}).sandbox


def test_fee_payers_come_from_keypair_files_and_from_the_environment(tmp_path):
    in_file, as_json, as_base58 = Keypair(), Keypair(), Keypair()
    path = write_keypair(tmp_path / "fee.json", in_file)
    config = load_config({"PAYWARDEN_FEE_PAYER_KEYPAIRS": str(path),
                          "PAYWARDEN_FEE_PAYER_KEYS": f"{json.dumps(list(bytes(as_json)))};{as_base58}"})
    signers = build_fee_payers(config)
    assert signers.addresses() == tuple(str(k.pubkey()) for k in (in_file, as_json, as_base58))
    message = b"message"
    assert signers.sign(str(as_base58.pubkey()), message) == bytes(as_base58.sign_message(message))


def test_a_malformed_keypair_file_is_a_configuration_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2, 3]")
    with pytest.raises(ConfigError, match="not a Solana CLI keypair"):
        build_fee_payers(load_config({"PAYWARDEN_FEE_PAYER_KEYPAIRS": str(bad)}))


def test_console_settings_are_read_and_bad_ones_name_their_variable():
    import pytest as _pytest

    from interfaces.config import ConfigError as _ConfigError
    from interfaces.config import load_config as _load

    config = _load({"PAYWARDEN_CONSOLE_URL": "https://console.example.com/", "PAYWARDEN_BLOCKED_DOMAINS":
                    "Evil.example, bad.test.", "PAYWARDEN_DNS_NAMESERVERS": "127.0.0.1:5353,::1"})
    assert config.console_url == "https://console.example.com"
    assert config.blocked_domains == ("evil.example", "bad.test")
    assert config.dns_nameservers == ("127.0.0.1:5353", "::1")
    for name, bad in (("PAYWARDEN_CONSOLE_URL", "ftp://x"), ("PAYWARDEN_BLOCKED_DOMAINS", "a b.com"),
                      ("PAYWARDEN_SERVICE_DOMAINS", "x/y"), ("PAYWARDEN_DNS_NAMESERVERS", "dns.example"),
                      ("PAYWARDEN_DNS_NAMESERVERS", "127.0.0.1:99999")):
        with _pytest.raises(_ConfigError, match=name):
            _load({name: bad})


@pytest.mark.parametrize(("url", "printed"), [
    ("postgresql://app:s3cret@db.internal:5432/paywarden", "postgresql://app:***@db.internal:5432/paywarden"),
    ("postgresql://app:p%40ss@db.internal/paywarden", "postgresql://app:***@db.internal/paywarden"),
    ("postgresql://app@/paywarden?host=/var/run/postgresql&password=s3cret",
     "postgresql://app@/paywarden?host=/var/run/postgresql&password=***"),
    ("redis://:s3cret@cache.internal:6379/0", "redis://:***@cache.internal:6379/0"),
    ("postgresql://app@db.internal/paywarden", "postgresql://app@db.internal/paywarden"),
    ("unix:///run/redis.sock?db=2", "unix:///run/redis.sock?db=2"),
])
def test_a_url_is_printed_without_its_password_wherever_libpq_or_redis_would_read_one(url, printed):
    assert without_password(url) == printed
