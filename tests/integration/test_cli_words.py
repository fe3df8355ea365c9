"""Issue 27, findings 7-9, 11, 12 and part of 5: what the command line prints is true. Unknown merchants are an
error everywhere (exit 2), output to a closed pipe ends quietly with status 0, a missing export is a usage error,
every README variable is checked by every command, the CLI prints the addresses a running `up` serves, and the
API says what is wrong with a malformed key."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from interfaces.cli.main import main
from interfaces.config import load_config
from interfaces.container import build
from tests.integration.test_config_errors import ROOT, TESTS_ONLY, bad_values, readme_variables


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("PAYWARDEN_") and name not in TESTS_ONLY:
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["service", "list", "--merchant", "nosuch"],
    ["service", "show", "x", "--merchant", "nosuch"],
    ["route", "list", "--merchant", "nosuch", "--service", "x"],
    ["webhooks", "list", "--merchant", "nosuch"],
    ["webhooks", "list", "--merchant", "nosuch", "--json"],
    ["webhooks", "deliveries", "x", "--merchant", "nosuch"],
    ["key", "list", "--merchant", "nosuch"],
    ["capability", "list", "--merchant", "nosuch"],
    ["domain", "list", "--merchant", "nosuch"],
], ids=lambda argv: " ".join(argv[:2]) + (" --json" if "--json" in argv else ""))
def test_an_unknown_merchant_is_an_error_with_exit_2_everywhere(data_dir, capsys, argv):
    assert main(["merchant", "create", "acme"]) == 0
    capsys.readouterr()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no merchant named nosuch" in err


def test_a_missing_export_is_a_usage_error(data_dir, capsys):
    assert main(["audit", "verify", str(data_dir / "nonexistent")]) == 2
    err = capsys.readouterr().err
    assert "no export directory" in err and "FAILED" not in err


def run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "interfaces.cli.main", *argv], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_output_to_a_closed_pipe_ends_quietly_with_status_0(data_dir):
    env = {**os.environ}
    assert run("merchant", "create", "acme", env=env).returncode == 0
    for argv in (["audit", "merchant", "acme"], ["merchant", "list"], ["audit", "merchant", "acme", "--json"]):
        reader = subprocess.Popen([sys.executable, "-m", "interfaces.cli.main", *argv], env=env, cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        reader.stdout.close()  # `| head -0`: the reader is gone before anything is written
        err = reader.stderr.read().decode()
        assert reader.wait(timeout=120) == 0 and err == "", (argv, err)


# A command of each family: every one reads and checks every variable of the README's table before it acts.
COMMANDS = [["merchant", "list"], ["key", "list", "--merchant", "acme"], ["service", "list", "--merchant", "acme"],
            ["webhooks", "list", "--merchant", "acme"], ["audit", "keygen", "x.example/audit"],
            ["audit", "verify", "/nonexistent"], ["audit", "chain"], ["faucet", "11111111111111111111111111111111"],
            ["localnet", "--port", "1"], ["project"], ["webhooks"], ["up", "--port", "1"], ["serve"]]


@pytest.mark.parametrize("name", [n for n in readme_variables() if n not in TESTS_ONLY])
def test_every_readme_variable_is_checked_by_every_command(name, data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(name, bad_values(tmp_path)[name])
    for argv in COMMANDS:
        assert main(argv) == 2, (name, argv)
        out, err = capsys.readouterr()
        assert err.startswith("paywarden: ") and name in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and out == "", (argv, err)


def test_up_names_the_one_wrong_webhook_variable(data_dir):
    env = {**os.environ, "PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS": "abc"}
    done = run("up", "--port", "1", env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("paywarden: PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS must be a number")
    assert "CONCURRENCY" not in done.stderr and "SCHEDULE" not in done.stderr and "LEASE" not in done.stderr


def test_beside_a_running_up_the_cli_prints_its_proxy_and_console_addresses(data_dir, capsys):
    """What `up` records in the data directory while it runs (this process stands in for it)."""
    from interfaces.config import RUNNING_STACK

    (data_dir / RUNNING_STACK).write_text(json.dumps({
        "pid": os.getpid(), "base_url": "http://127.0.0.1:18402", "proxy_url": "http://127.0.0.1:18405",
        "console_url": "http://127.0.0.1:18404", "rpc_url": "http://127.0.0.1:18899"}))
    assert main(["merchant", "create", "acme", "--email", "owner@acme.test"]) == 0
    assert "http://127.0.0.1:18404/password?token=" in capsys.readouterr().out
    preverified = build(load_config())  # acme stands in for up's sandbox merchant: its localhost is verified
    preverified.merchants.preverify_sandbox_domain("acme")
    preverified.close()
    assert main(["merchant", "password-link", "owner@acme.test"]) == 0
    assert capsys.readouterr().out.startswith("http://127.0.0.1:18404/password?token=")
    container_config = load_config()
    assert container_config.proxy_url == ""  # the configuration itself is unchanged: only the CLI's view
    assert main(["service", "create", "--merchant", "acme", "--name", "Weather", "--domain", "localhost",
                 "--port", "9"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["gatewayUrl"].startswith("http://127.0.0.1:18405/"), created
    assert main(["service", "list", "--merchant", "acme"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["gatewayUrl"].startswith("http://127.0.0.1:18405/")


def test_a_dead_up_leaves_no_addresses_behind(data_dir, capsys, monkeypatch):
    from interfaces.config import RUNNING_STACK

    (data_dir / RUNNING_STACK).write_text(json.dumps({"pid": 2**22 + 1, "proxy_url": "http://127.0.0.1:18405",
                                                      "console_url": "http://127.0.0.1:18404"}))
    assert main(["merchant", "create", "acme", "--email", "owner@acme.test"]) == 0
    assert "http://127.0.0.1:8404/password?token=" in capsys.readouterr().out
    monkeypatch.setenv("PAYWARDEN_CONSOLE_URL", "https://console.example.com")  # configuration wins
    (data_dir / RUNNING_STACK).write_text(json.dumps({"pid": os.getpid(), "console_url": "http://127.0.0.1:18404"}))
    assert main(["merchant", "password-link", "owner@acme.test"]) == 0
    assert capsys.readouterr().out.startswith("https://console.example.com/password?token=")


def test_a_malformed_key_is_told_what_is_wrong(tmp_path, sandbox):
    from tests.conftest import make_gateway

    gateway = make_gateway(tmp_path, sandbox)
    for token, words in (("pw_test_notarealkey", "malformed API key: a pw_test_ key is pw_test_ and 40"),
                         ("pw_live_short", "malformed API key: a pw_live_ key is pw_live_ and 40"),
                         ("sk_live_abc", "not a Paywarden API key")):
        answer = gateway.client.simulate_get("/supported", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 401 and answer.json["error"] == "invalid_api_key"
        assert words in answer.json["message"] and token not in answer.json["message"], answer.json
    answer = gateway.client.simulate_get("/supported", headers={"Authorization": "Basic abc"})
    assert answer.json["message"] == "the Authorization header must be Bearer <API key>"
    gateway.container.close()
