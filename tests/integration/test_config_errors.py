"""Every variable of README.md's configuration table, given one bad value, stops start-up with one line naming it.

The table is read from README.md itself: a variable added to the table without a bad value here fails
`test_every_variable_of_the_readme_table_has_a_bad_value`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import interfaces.cli.main as cli

ROOT = Path(__file__).resolve().parents[2]
TESTS_ONLY = {"PAYWARDEN_TEST_POSTGRES", "PAYWARDEN_TEST_REDIS"}  # read by tests/services.py, not by Paywarden


def readme_variables() -> list[str]:
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Configuration"):]
    names: list[str] = []
    for line in table.splitlines():
        if line.startswith("| `PAYWARDEN_"):
            names += re.findall(r"`(PAYWARDEN_[A-Z0-9_]+)`", line.split("|")[1])
    return names


def bad_values(tmp: Path) -> dict[str, str]:
    a_file = tmp / "a-file"
    a_file.write_text("not a directory")
    return {
        "PAYWARDEN_MODE": "staging",
        "PAYWARDEN_DATA_DIR": str(a_file),
        "PAYWARDEN_DATABASE_URL": "mysql://db/paywarden",
        "PAYWARDEN_DATABASE_POOL_MAX": "many",
        "PAYWARDEN_DATABASE_TIMEOUT_SECONDS": "0",
        "PAYWARDEN_REDIS_URL": "http://cache:6379",
        "PAYWARDEN_DEVNET_RPC_URL": "localhost:8899",
        "PAYWARDEN_MAINNET_RPC_URL": "ftp://mainnet",
        "PAYWARDEN_FEE_PAYER_KEYPAIRS": str(tmp / "missing.json"),
        "PAYWARDEN_FEE_PAYER_KEYS": "not-a-keypair",
        "PAYWARDEN_FEE_PAYER_MIN_LAMPORTS": "-1",
        "PAYWARDEN_ANONYMOUS": "maybe",
        "PAYWARDEN_MAX_COMPUTE_UNIT_LIMIT": "0",
        "PAYWARDEN_MAX_COMPUTE_UNIT_PRICE": "cheap",
        "PAYWARDEN_CONFIRMATION_BUDGET_MS": "soon",
        "PAYWARDEN_LOCK_MARGIN_MS": "5",
        "PAYWARDEN_RATE_LIMIT_PER_KEY": "lots",
        "PAYWARDEN_RATE_LIMIT_PER_IP": "10/fortnight",
        "PAYWARDEN_TRUSTED_PROXIES": "notanip",
        "PAYWARDEN_DISCOVERY_PUBLIC_ONLY": "sometimes",
        "PAYWARDEN_SECRET_KEY": "not-a-fernet-key",
        "PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS": "0",
        "PAYWARDEN_WEBHOOK_CONCURRENCY": "0",
        "PAYWARDEN_PROXY_URL": "proxy.example.com",
        "PAYWARDEN_PROXY_METRICS_TOKEN": "short",
        "PAYWARDEN_LOG_LEVEL": "loud",
        "PAYWARDEN_BIND": "nowhere",
        "PAYWARDEN_WORKERS": "0",
        "PAYWARDEN_AUDIT_SIGNING_KEY": "PRIVATE+KEY+nope",
        "PAYWARDEN_AUDIT_ORIGIN": "two words",
        "PAYWARDEN_AUDIT_CHECKPOINT_SECONDS": "0",
        "PAYWARDEN_AUDIT_WITNESSES": "http://witness.example not-a-witness-key",
        "PAYWARDEN_BOOKS_RECONCILE_SECONDS": "0",
        "PAYWARDEN_CONSOLE_URL": "console.example.com",
        "PAYWARDEN_SERVICE_DOMAINS": "a b.com",
        "PAYWARDEN_BLOCKED_DOMAINS": "x/y",
        "PAYWARDEN_DNS_NAMESERVERS": "dns.example",
    }


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("PAYWARDEN_") and name not in TESTS_ONLY:
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path / "data"))
    return monkeypatch


def test_every_variable_of_the_readme_table_has_a_bad_value(tmp_path):
    in_table = set(readme_variables())
    assert len(in_table) > 20 and "PAYWARDEN_TRUSTED_PROXIES" in in_table
    assert in_table - TESTS_ONLY == set(bad_values(tmp_path)), "a README variable has no bad value in this test"


@pytest.mark.parametrize("name", [n for n in readme_variables() if n not in TESTS_ONLY])
def test_one_bad_value_stops_serve_with_one_line_naming_the_variable(name, clean_env, tmp_path, capsys):
    def started(*_args, **_kwargs):
        raise AssertionError(f"serve started with {name}={bad_values(tmp_path)[name]!r}")

    clean_env.setattr("interfaces.runtime.supervisor.supervise", started)
    clean_env.setattr(os, "execvp", started)
    clean_env.setenv(name, bad_values(tmp_path)[name])
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paywarden: ") and name in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("name, value", [("PAYWARDEN_TRUSTED_PROXIES", "notanip"), ("PAYWARDEN_LOG_LEVEL", "loud")])
def test_the_issues_two_examples_stop_up_in_a_process_of_its_own(name, value, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_") or k in TESTS_ONLY}
    env.update({"PAYWARDEN_DATA_DIR": str(tmp_path), name: value})
    done = subprocess.run([sys.executable, "-m", "interfaces.cli.main", "up", "--port", "1", "--rpc-port", "2"],
                          env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.startswith(f"paywarden: {name} ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
