"""`paywarden` at start-up: help on every command, and a bad configuration stops it with exit status 2 and one
line naming the variable (a missing keypair file, an unreachable database or Redis), never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from interfaces.cli.main import main, parser

CONFIG_VARIABLES = ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL",
                    "PAYWARDEN_MAINNET_RPC_URL", "PAYWARDEN_FEE_PAYER_KEYPAIRS", "PAYWARDEN_FEE_PAYER_KEYS",
                    "PAYWARDEN_MODE")


def commands(p: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*prefix, name))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


@pytest.fixture
def env(tmp_path, monkeypatch):
    for name in CONFIG_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    return monkeypatch


def test_every_command_has_help(capsys):
    found = list(commands(parser(every=True)))
    assert ("serve",) in found and ("merchant", "create") in found and len(found) > 10
    for argv in found:
        with pytest.raises(SystemExit) as done:
            main([*argv, "--help"])
        out = capsys.readouterr().out
        assert done.value.code == 0 and out.startswith("usage: paywarden"), argv


def test_a_missing_keypair_file_stops_the_command_with_status_2_and_no_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in CONFIG_VARIABLES}
    env.update(PAYWARDEN_DATA_DIR=str(tmp_path), PAYWARDEN_FEE_PAYER_KEYPAIRS=str(tmp_path / "missing.json"))
    done = subprocess.run([sys.executable, "-m", "interfaces.cli.main", "merchant", "create", "acme"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("paywarden: PAYWARDEN_FEE_PAYER_KEYPAIRS names ") and "Traceback" not in done.stderr


@pytest.mark.parametrize("argv", [["merchant", "create", "acme"], ["serve", "--no-projections"]])
def test_an_unreachable_database_stops_the_command_with_status_2_naming_the_variable(env, capsys, argv):
    env.setenv("PAYWARDEN_DATABASE_URL", f"postgresql://paywarden:s3cret@127.0.0.1:{closed_port()}/paywarden")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("paywarden: cannot reach the database PAYWARDEN_DATABASE_URL=postgresql://paywarden:***@")
    assert "s3cret" not in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_serve_stops_with_status_2_when_redis_is_unreachable(env, capsys):
    env.setenv("PAYWARDEN_REDIS_URL", f"redis://127.0.0.1:{closed_port()}/0")
    assert main(["serve", "--no-projections"]) == 2
    assert capsys.readouterr().err.startswith("paywarden: cannot reach Redis at PAYWARDEN_REDIS_URL")


def test_a_file_that_is_no_keypair_is_named(env, tmp_path, capsys):
    bad = tmp_path / "fee-payer.json"
    bad.write_text("[1, 2, 3]")
    env.setenv("PAYWARDEN_FEE_PAYER_KEYPAIRS", str(bad))
    assert main(["serve"]) == 2
    assert f"paywarden: {bad} is not a Solana CLI keypair file" in capsys.readouterr().err


def test_a_data_directory_that_cannot_be_made_is_named(env, capsys):
    env.setenv("PAYWARDEN_DATA_DIR", "/proc/paywarden-data")
    assert main(["merchant", "create", "acme"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paywarden: cannot use /proc/paywarden-data") and "PAYWARDEN_DATA_DIR" in err


def test_bench_reference_says_why_paywarden_did_not_start(tmp_path):
    """Two workers on the embedded store are refused by `up`; the benchmark says so (it used to end in a traceback
    with nothing but `''`, up's reason left in a log it had deleted)."""
    ports = [str(closed_port()) for _ in range(5)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    done = subprocess.run(
        [sys.executable, "-m", "interfaces.bench", "reference", "--stack", "embedded", "--workers", "2",
         "--requests", "10", "--warmup", "0", "--rounds", "1", "--reference-port", ports[0], "--port", ports[1],
         "--rpc-port", ports[2], "--proxy-port", ports[3], "--console-port", ports[4]],
        env={**env, "PAYWARDEN_DATA_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=180)
    assert done.returncode == 1
    assert "paywarden up did not start" in done.stderr and "PAYWARDEN_REDIS_URL" in done.stderr
    assert "Traceback" not in done.stderr


def test_bench_reference_compares_settles_side_by_side(tmp_path):
    """`paywarden-bench reference --op settle`: both facilitators co-sign, broadcast and confirm every payment on their
    sandbox chains, every answer a success, with each side's CPU per settle."""
    ports = [str(closed_port()) for _ in range(5)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    done = subprocess.run(
        [sys.executable, "-m", "interfaces.bench", "reference", "--op", "settle", "--stack", "embedded",
         "--requests", "40", "--warmup", "0", "--rounds", "1", "--concurrency", "4", "--json",
         "--reference-port", ports[0], "--port", ports[1], "--rpc-port", ports[2], "--proxy-port", ports[3],
         "--console-port", ports[4]],
        env={**env, "PAYWARDEN_DATA_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["op"] == "settle"
    assert [(run["side"], run["answers"]) for run in summary["runs"]] == [
        ("reference", {"200 success": 40}), ("paywarden", {"200 success": 40})]
    assert all(run["cpu_ms_per_request_total"] > 0 for run in summary["runs"])
    assert "CPU per settle" in done.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_paywarden_localnet_stops_on_a_signal_even_when_started_with_sigint_ignored(sig):
    """A background job of a script starts with SIGINT ignored (POSIX shells do so without job control); the
    localnet handles SIGINT and SIGTERM itself, so either stops it cleanly (it used to run on, ignoring SIGINT)."""
    port = closed_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "interfaces.cli.main", "localnet", "--port", str(port)], stdout=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert "localnet listening" in (process.stdout.readline() if process.stdout else "")
        process.send_signal(sig)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
