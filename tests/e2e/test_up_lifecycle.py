"""`paywarden up` as a process: ports in use name their option, SIGINT and SIGTERM stop everything within 3 s at
any moment (no descendant survives, not even as a zombie), and against an external chain (`paywarden localnet`
through PAYWARDEN_DEVNET_RPC_URL) the example merchant's USDC account exists, so the demo can be paid."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import requests
from solders.keypair import Keypair

from domain.exact import associated_token_address
from domain.networks import Programs
from tests.e2e.conftest import ROOT
from tests.faults import free_port
from tests.services import SMALL_POOLS

pytestmark = pytest.mark.slow
PAYWARDEN = Path(sys.executable).parent / "paywarden"  # the console script, as a newcomer runs it


def up_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """`up`'s environment: none of the suite's PAYWARDEN_ settings, the data directory, `extra`; on PostgreSQL
    small pools (tests/services.py SMALL_POOLS) unless `extra` names the size."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    if "PAYWARDEN_DATABASE_URL" in extra:
        env.update(SMALL_POOLS)
    env.update(PAYWARDEN_DATA_DIR=str(data_dir), **extra)
    return env


def start_up(env: dict[str, str], *extra: str, json_line: bool = True) -> subprocess.Popen:
    argv = [str(PAYWARDEN), "up", *(["--json"] if json_line else []), "--port", str(free_port()), "--rpc-port",
            str(free_port()), "--demo-port", str(free_port()), "--proxy-port", str(free_port()),
            "--demo-backend-port", str(free_port()), "--console-port", str(free_port()), *extra]
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def up_info(process: subprocess.Popen) -> dict:
    """The JSON line `up --json` prints once it serves; if it exits first, the failure carries what it wrote."""
    line = process.stdout.readline()
    if not line:
        code = process.wait(timeout=30)
        pytest.fail(f"`up` printed no JSON line and exited with {code}: {process.stderr.read()[-4000:]}")
    return json.loads(line)


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found[int(entry)] = (int(fields[1]), fields[0])
    return found


def descendants(pid: int) -> set[int]:
    table, found, grew = processes(), {pid}, True
    while grew:
        grew = False
        for child, (parent, _) in table.items():
            if parent in found and child not in found:
                found.add(child)
                grew = True
    return found - {pid}


def carrying(marker: str) -> set[int]:
    """Processes whose environment holds the marker: every descendant of `up`, whenever it was started."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/environ").read_bytes():
                    found.add(int(entry))
            except OSError:
                continue
    return found


def still_running(process: subprocess.Popen) -> None:
    """`up` ended before the moment a test waits for: say how, rather than wait out the timeout."""
    if process.poll() is not None:
        pytest.fail(f"up exited ({process.returncode}) early: {process.stderr.read()[-2000:]}")


def wait_for_library(process: subprocess.Popen, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        still_running(process)
        if name in Path(f"/proc/{process.pid}/maps").read_text():
            return
        time.sleep(0.005)
    pytest.fail(f"{name} never loaded")


def wait_for_file(process: subprocess.Popen, path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        still_running(process)
        time.sleep(0.005)
    pytest.fail(f"{path} never written")


def wait_for_line(stream, needle: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        if needle in line:
            return line
    pytest.fail(f"no line with {needle!r}")


def signalled(process: subprocess.Popen, sig: int) -> tuple[int, float, str]:
    """`sig` sent to `up`: its exit status, the seconds it took to exit, and what it wrote on stderr."""
    sent = time.monotonic()
    process.send_signal(sig)
    code = process.wait(timeout=30)
    took = time.monotonic() - sent
    return code, took, process.stderr.read()


@contextmanager
def killed_if_left(process: subprocess.Popen) -> Iterator[None]:
    """`up` killed at the end of the block if it still runs: a step that failed leaves no stack behind."""
    try:
        yield
    finally:
        if process.poll() is None:
            process.kill()


def assert_none_left(family: set[int], marker: str) -> None:
    """No process of `up`'s family, nor any carrying its marker (whenever started), is left, not even a zombie."""
    time.sleep(0.1)
    left = {pid: processes().get(pid) for pid in family | carrying(marker)}
    assert not {pid: state for pid, state in left.items() if state is not None}, "processes survived"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("moment", ["importing", "starting", "gunicorn-booting", "ready"])
def test_up_stops_within_3_seconds_at_any_moment_and_leaves_no_process(tmp_path, sig, moment):
    marker = f"PAYWARDEN_STOP_TEST={uuid.uuid4().hex}"
    name, _, value = marker.partition("=")
    process = start_up(up_env(tmp_path, **{name: value}), "--demo")
    with killed_if_left(process):
        if moment == "importing":  # past Python's own start-up (site), inside `interfaces.cli.main`'s imports
            wait_for_library(process, "_decimal")
        elif moment == "starting":  # past its imports: writing the sandbox's keypairs, before any child starts
            wait_for_file(process, tmp_path / "merchant-wallet.json")
        elif moment == "gunicorn-booting":
            wait_for_line(process.stderr, "Starting gunicorn")
        else:
            assert up_info(process)["demo_url"]
        family = descendants(process.pid)
        code, took, err = signalled(process, sig)
    assert took < 3.0, f"stopped {took:.2f} s after {sig.name}"
    # 0 once `up` handles the signal; 130 (main) or killed by it (default action) while Python still imports.
    assert code in (0, 130, -sig) and "Traceback" not in err, err[-2000:]
    assert_none_left(family, marker)


def test_up_killed_with_sigkill_leaves_no_process_behind(tmp_path):
    marker = f"PAYWARDEN_STOP_TEST={uuid.uuid4().hex}"
    name, _, value = marker.partition("=")
    process = start_up(up_env(tmp_path, **{name: value}), "--demo")
    try:
        assert up_info(process)["demo_url"]
        family = descendants(process.pid)
        assert family
    finally:
        process.kill()
        process.wait(timeout=30)
    deadline = time.monotonic() + 20  # the kernel's SIGTERM to `serve`: a graceful stop of the API
    while time.monotonic() < deadline and carrying(marker):
        time.sleep(0.1)
    assert not carrying(marker), "processes survived up's SIGKILL"


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize("option", ["--port", "--rpc-port", "--demo-port"])
def test_a_port_in_use_names_the_option_to_change(tmp_path, busy_port, option):
    process = start_up(up_env(tmp_path), "--demo", option, str(busy_port))
    out, err = process.communicate(timeout=120)
    assert process.returncode == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert f"127.0.0.1:{busy_port}" in err and "already in use" in err and f"choose another {option}" in err


@pytest.fixture
def localnet() -> Iterator[str]:
    """`paywarden localnet`, the external chain."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "interfaces.cli.main", "localnet", "--port", str(port)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    try:
        wait_for_line(process.stdout, "localnet listening")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def test_up_against_an_external_chain_creates_the_demo_merchants_usdc_account(tmp_path, localnet):
    from x402 import x402ClientSync
    from x402.http.clients import wrapRequestsWithPayment
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    process = start_up(up_env(tmp_path, PAYWARDEN_DEVNET_RPC_URL=localnet), "--demo")
    try:
        info = up_info(process)
        assert info["rpc_url"] == localnet
        account = associated_token_address(info["pay_to"], info["usdc_mint"], Programs.TOKEN)
        answer = httpx.post(localnet, json={"jsonrpc": "2.0", "id": 1, "method": "getTokenAccountBalance",
                                            "params": [account]}).json()
        assert answer["result"]["value"]["amount"] == "0", answer

        payer = Keypair.from_bytes(bytes(json.loads(Path(info["payer_keypair_path"]).read_text())))
        client = x402ClientSync()
        client.register("solana:*", ExactSvmScheme(KeypairSigner(payer), rpc_url=localnet))
        paid = wrapRequestsWithPayment(requests.Session(), client).get(info["demo_url"], timeout=60)
        assert paid.status_code == 200 and paid.json()["forecast"] == "sunny", paid.text
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def test_up_on_postgresql_prints_the_database_address_without_its_password(tmp_path, postgres_url, redis_url):
    """The operator's PostgreSQL password (trust auth ignores it here; a real server would need it) is not in what
    `up` prints, in its JSON line or its text: the address is, with `***` in the password's place."""
    secret = f"pw-{uuid.uuid4().hex}"
    with_password = postgres_url.replace("postgresql://postgres@", f"postgresql://postgres:{secret}@", 1)
    assert secret in with_password
    env = up_env(tmp_path, PAYWARDEN_DATABASE_URL=with_password, PAYWARDEN_REDIS_URL=redis_url)
    for json_line in (True, False):
        process = start_up(env, json_line=json_line)
        try:
            printed = wait_for_line(process.stdout, "database_url")
        finally:
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=30)
        assert secret not in printed + out + err
        assert with_password.replace(secret, "***") in printed


def test_up_with_two_workers_stops_within_3_seconds_with_its_localnet_in_use(tmp_path, postgres_url, redis_url):
    """With two API workers the localnet runs in `up`'s own process (interfaces/sandbox/http11.py on a thread of
    its own): a client's kept-alive connection to it is closed by the stop, and nothing is left behind. One signal:
    `up` stops the same way on SIGINT and SIGTERM (both at every moment above); a stack on PostgreSQL takes ~9 s."""
    sig = signal.SIGTERM
    marker = f"PAYWARDEN_STOP_TEST={uuid.uuid4().hex}"
    name, _, value = marker.partition("=")
    env = up_env(tmp_path, PAYWARDEN_DATABASE_URL=postgres_url, PAYWARDEN_REDIS_URL=redis_url, **{name: value})
    process = start_up(env, "--workers", "2")
    with killed_if_left(process):
        rpc_url = up_info(process)["rpc_url"]
        host, port = rpc_url.removeprefix("http://").split(":")
        kept = socket.create_connection((host, int(port)), timeout=10)
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: localnet\r\n\r\n")
        assert kept.recv(4096).startswith(b"HTTP/1.1 200 OK")
        family = descendants(process.pid)
        code, took, err = signalled(process, sig)
    assert took < 3.0, f"stopped {took:.2f} s after {sig.name}"
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert kept.recv(1) == b""  # closed, not left hanging
    kept.close()
    assert_none_left(family, marker)
