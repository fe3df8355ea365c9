"""The first hour's command-line mistakes: each ends in one line saying what to change, never a traceback; one
store whatever the working directory; `--version` and help on every argument."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from wsgiref.simple_server import make_server

import pytest
from solders.keypair import Keypair

from interfaces.cli.main import main, parser
from interfaces.config import default_data_dir, load_config
from interfaces.http.facilitator.app import create_app
from interfaces.sandbox.chain import Sandbox
from interfaces.wiring import api_collaborators
from tests.conftest import make_gateway
from tests.faults import free_port
from tests.services import POLL

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = {"--exit-with-parent"}  # internal: `paywarden serve` passes it to the projection worker it starts


def subparsers(p: argparse.ArgumentParser,
               path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subparsers(sub, (*path, name))


def env_without_paywarden(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_") or k.startswith("PAYWARDEN_TEST_")}
    env.update(extra)
    return env


def paywarden(*argv: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "interfaces.cli.main", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr.strip()


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


# -- 12: --version, help on every argument ------------------------------------------------------------------------


def test_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"paywarden {version('paywarden')}"


def test_every_argument_of_every_command_has_help():
    missing = []
    for path, p in subparsers(parser(every=True)):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [(*path, choice.dest) for choice in action._choices_actions if not choice.help]
            elif action.help is None or (action.help == argparse.SUPPRESS and not set(action.option_strings) & HIDDEN):
                missing.append((*path, action.dest))
    assert not missing, f"arguments without help: {missing}"


# -- 3: one store whatever the working directory ----------------------------------------------------------------


def test_the_default_data_directory_does_not_depend_on_the_working_directory(tmp_path):
    home = {"HOME": str(tmp_path / "home")}
    assert default_data_dir(home) == tmp_path / "home" / ".local" / "share" / "paywarden"
    assert default_data_dir({**home, "XDG_DATA_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg" / "paywarden"
    assert default_data_dir({**home, "XDG_DATA_HOME": "relative"}).is_absolute()  # XDG says: ignore a relative one
    os.chdir(tmp_path)
    try:
        relative = load_config({"PAYWARDEN_DATA_DIR": "some/dir", "PAYWARDEN_FEE_PAYER_KEYPAIRS": ""})
        assert relative.data_dir == tmp_path / "some" / "dir"  # a relative setting is made absolute once
        assert load_config({"PAYWARDEN_DATABASE_URL": "sqlite://db"}).database_url == f"sqlite://{tmp_path}/db"
    finally:
        os.chdir(ROOT)


def test_commands_run_from_two_folders_use_one_store_and_name_it(tmp_path):
    env = env_without_paywarden(HOME=str(tmp_path / "home"), XDG_DATA_HOME="")
    store = tmp_path / "home" / ".local" / "share" / "paywarden"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert paywarden("merchant", "create", "acme", cwd=tmp_path / "a", env=env).returncode == 0
    again = paywarden("merchant", "create", "acme", cwd=tmp_path / "b", env=env)
    assert "already exists" in one_line(again) and str(store) in again.stderr
    unknown = one_line(paywarden("merchant", "set-rate-limit", "nobody", "--per-minute", "5", cwd=tmp_path / "b",
                                 env=env))
    assert "nobody" in unknown and f"data directory: {store}" in unknown
    assert (store / "merchants.db").is_file() and not (tmp_path / "a" / "var").exists()
    help_text = paywarden("merchant", "create", "--help", cwd=tmp_path / "b", env=env).stdout
    assert f"data directory: {store}" in " ".join(help_text.split())


# -- 5: no tracebacks ---------------------------------------------------------------------------------------------


def test_project_with_an_unknown_name_lists_the_known_ones(capsys):
    assert main(["project", "accounts", "nope"]) == 2
    err = capsys.readouterr().err
    known = "accounts, service_scopes, listings, catalog, payment_list, payment_volume, paid_access, result_cache"
    assert err.strip() == f"paywarden: no projection named nope; known: {known}"


def test_localnet_on_a_port_in_use_names_the_option(busy_port):
    line = one_line(paywarden("localnet", "--port", str(busy_port)))
    assert f"127.0.0.1:{busy_port}" in line and "already in use" in line and "choose another --port" in line


def test_serve_on_a_port_in_use_names_the_option(busy_port, tmp_path):
    line = one_line(paywarden("serve", "--bind", f"127.0.0.1:{busy_port}",
                              env=env_without_paywarden(PAYWARDEN_DATA_DIR=str(tmp_path))))
    assert "already in use" in line and "choose another --bind" in line


@pytest.fixture
def payer_file(tmp_path) -> Path:
    path = tmp_path / "payer.json"
    path.write_text(json.dumps(list(bytes(Keypair()))))
    return path


def test_bench_against_an_unreachable_api_says_so_in_one_line(payer_file):
    line = one_line(paywarden("bench", "--base-url", f"http://127.0.0.1:{free_port()}", "--api-key", "pw_test_x",
                              "--rpc-url", f"http://127.0.0.1:{free_port()}", "--payer-keypair", str(payer_file)))
    assert line.startswith("paywarden bench: cannot reach the Paywarden API at --base-url http://127.0.0.1:")


def test_bench_against_an_unreachable_chain_says_so_in_one_line(payer_file, tmp_path):
    gateway = make_gateway(tmp_path / "gw", Sandbox())  # a real API over a sandbox chain, on a free port
    httpd = make_server("127.0.0.1", 0, create_app(api_collaborators(gateway.container)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    try:
        rpc = f"http://127.0.0.1:{free_port()}"
        line = one_line(paywarden("bench", "--base-url", f"http://127.0.0.1:{httpd.server_port}", "--api-key",
                                  gateway.api_key, "--rpc-url", rpc, "--payer-keypair", str(payer_file)))
    finally:
        httpd.shutdown()
        gateway.container.close()
    assert line.startswith(f"paywarden bench: cannot use the chain at --rpc-url {rpc}: ")


@pytest.mark.parametrize("option", ["--requests", "--concurrency"])
def test_bench_with_zero_requests_explains_itself(option, payer_file):
    done = paywarden("bench", "--up", "up.json", option, "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"argument {option}: must be at least 1, got 0" in done.stderr


def test_bench_without_its_addresses_names_what_is_missing():
    line = one_line(paywarden("bench", "--base-url", "http://127.0.0.1:1"))
    assert "missing --api-key, --rpc-url, --payer-keypair" in line and "--up FILE" in line
