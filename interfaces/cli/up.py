"""`paywarden up`: the whole sandbox stack in one command.

Starts the localnet (a Solana JSON-RPC server over LiteSVM, with the devnet USDC mint and a faucet), the API
(`paywarden serve`: gunicorn + the projection worker) as a child, and optionally the example merchant API. With one
API worker (the default) the worker hosts the localnet: it calls the sandbox in-process and serves its JSON-RPC on
`--rpc-port` (interfaces/sandbox/localnet_host.py); with several workers the localnet runs in this process. It
also creates the sandbox merchant, its test key and a funded payer wallet on first run; prints every address. The
`PAYWARDEN_` settings apply (an external PostgreSQL and Redis, for example). Ctrl-C stops it all.

Stopping: SIGINT or SIGTERM interrupts whatever `up` is doing (start-up included), sends SIGINT to `paywarden serve`
(which passes it to gunicorn: its quick stop, a sandbox does not wait for requests in flight, and each request
records all of its events or none; and stops its other children), SIGKILL to what is left of its process group
after `STOP_SECONDS`, and reaps every descendant (`up` is a child
subreaper on Linux, so an orphaned gunicorn master is reaped here, not left a zombie).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from domain.merchant import key_hash
from domain.networks import DEVNET, KeyEnv
from domain.proxy_service import SANDBOX_MERCHANT
from interfaces.adapters.signers import sandbox_keypair
from interfaces.config import (
    Config,
    ConfigError,
    forget_running_stack,
    load_config,
    record_running_stack,
    without_password,
)

PAYER_USDC, PAYER_SOL = 100_000_000, 1_000_000_000
FEE_PAYER_SOL = 10_000_000_000
STOP_SECONDS = 1.5  # SIGINT, then SIGKILL to what is left of the API's process group
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):  # noqa: N818 - a signal, not an error
    """SIGINT or SIGTERM arrived: unwind whatever `up` was doing, then stop the children. A BaseException, as
    KeyboardInterrupt is, so that no library's `except Exception` swallows it."""


class _Signals:
    """SIGINT/SIGTERM raise Stopped in the main thread, except while a child is being started and recorded
    (then the stop waits for the child to be on the books). Not a signal mask: children would inherit it."""

    holding = False
    pending: int | None = None
    received: int | None = None  # also checked by the main loop, should anything swallow Stopped anyway

    @classmethod
    def handler(cls, signum: int, _frame: object) -> None:
        cls.received = signum
        if cls.holding:
            cls.pending = signum
            return
        raise Stopped(signum)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8402, help="API port (default 8402)")
    p.add_argument("--rpc-port", type=int, default=8899, help="localnet JSON-RPC port (default 8899)")
    p.add_argument("--demo-port", type=int, default=8403, help="example merchant API port (default 8403)")
    p.add_argument("--console-port", type=int, default=8404, help="merchant console port (default 8404)")
    p.add_argument("--proxy-port", type=int, default=8405, help="transparent proxy port (default 8405)")
    p.add_argument("--demo-backend-port", type=int, default=8406,
                   help="the plain demo backend behind the proxy, with --demo (default 8406)")
    p.add_argument("--workers", type=int, default=1, help="API worker processes (default 1)")
    p.add_argument("--demo", action="store_true", help="also start the example merchant API")
    p.add_argument("--json", action="store_true", help="print the addresses as one JSON line on stdout")


def run(args: argparse.Namespace) -> int:
    config = load_config()
    _become_subreaper()
    _Signals.holding, _Signals.pending, _Signals.received = False, None, None
    previous = {sig: signal.signal(sig, _Signals.handler) for sig in STOP_SIGNALS}
    servers: list[Any] = []
    children: list[subprocess.Popen] = []
    try:
        try:
            return _run(config, args, servers, children)
        except Stopped:
            return 0
    finally:
        for sig in STOP_SIGNALS:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        forget_running_stack(config)
        _stop_children(children, _Signals.received)
        for server in servers:
            server.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(config: Config, args: argparse.Namespace, servers: list[Any], children: list[subprocess.Popen]) -> int:
    _check_ports(config, args)
    fee_payer_paths = [str(p) for p in config.fee_payer_keypairs] or [str(config.data_dir / "fee-payer.json")]
    fee_payer_keys = [sandbox_keypair(Path(p)) for p in fee_payer_paths]
    fee_payers = [str(k.pubkey()) for k in fee_payer_keys]
    payer_path = config.data_dir / "payer.json"
    payer = str(sandbox_keypair(payer_path).pubkey())
    pay_to_path = config.data_dir / "merchant-wallet.json"
    pay_to = str(sandbox_keypair(pay_to_path).pubkey())
    hosted: dict[str, str] = {}
    if hosts_localnet(config, args):  # the API worker hosts the chain (interfaces/sandbox/localnet_host.py)
        from interfaces.sandbox.localnet_host import LOCALNET_ACCOUNTS, LOCALNET_BIND, format_accounts

        rpc_url = f"http://{args.host}:{args.rpc_port}"
        hosted = {LOCALNET_BIND: f"{args.host}:{args.rpc_port}",
                  LOCALNET_ACCOUNTS: format_accounts(_genesis(fee_payers, payer, pay_to))}
    else:
        rpc_url, sandbox = _chain(config, args, servers)
        _fund(rpc_url, sandbox, fee_payers, payer, pay_to)
        if sandbox is None:  # an external chain: its faucet (if any) made no token account for the merchant
            _ensure_usdc_account(rpc_url, fee_payer_keys[0], pay_to)
    config = dataclasses.replace(config, devnet_rpc_url=rpc_url)
    api_key = _sandbox_merchant(config)
    from interfaces.sandbox.console import console_login

    console_email, console_password = console_login(config, SANDBOX_MERCHANT)
    base_url = f"http://{args.host}:{args.port}"
    proxy_url = f"http://{args.host}:{args.proxy_port}"
    _spawn(children, lambda: _serve(config, args, rpc_url, fee_payer_paths, hosted))
    _wait_answer(f"{base_url}/supported", 200, children[0], f"the API on {base_url}",
                 headers={"Authorization": f"Bearer {api_key}"})
    info = {
        "base_url": base_url, "rpc_url": rpc_url, "faucet_url": f"{rpc_url}/faucet", "network": DEVNET.caip2,
        "usdc_mint": DEVNET.usdc_mint, "fee_payers": fee_payers, "fee_payer_keypair_paths": fee_payer_paths,
        "merchant": SANDBOX_MERCHANT, "api_key": api_key, "payer": payer, "payer_keypair_path": str(payer_path),
        "pay_to": pay_to, "pay_to_keypair_path": str(pay_to_path), "data_dir": str(config.data_dir),
        # an operator's PostgreSQL password is theirs: the address, never the secret, is printed
        "database_url": without_password(config.database_url) if config.database_url else f"sqlite://{config.data_dir}",
        "proxy_url": proxy_url,
        "console_url": f"http://{args.host}:{args.console_port}", "console_email": console_email,
        "console_password": console_password,
    }
    if args.demo:
        info["demo_url"] = _demo(args, base_url, api_key, pay_to, servers) + "/weather"
        info["demo_proxy_url"] = _demo_proxy(config, args, proxy_url, pay_to, servers, children[0])
    record_running_stack(config, {"base_url": base_url, "proxy_url": proxy_url,
                                  "console_url": f"http://{args.host}:{args.console_port}",
                                  "rpc_url": rpc_url})  # the CLI beside us prints what we serve
    _announce(info, args.json)
    while _Signals.received is None:
        if any(child.poll() is not None for child in children):
            print("paywarden up: the API process exited; stopping", file=sys.stderr)
            return 1
        time.sleep(0.1)  # a signal raises Stopped here
    return 0


def _become_subreaper() -> None:
    """Orphaned descendants (a gunicorn master whose supervisor died) are re-parented to us, and reaped."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):  # not Linux: orphans go to init, as usual
        pass


def _spawn(children: list[subprocess.Popen], start: Any) -> None:
    """Start a child with SIGINT/SIGTERM held, so a signal cannot land between its birth and its bookkeeping."""
    _Signals.holding = True
    try:
        children.append(start())
    finally:
        _Signals.holding = False
    if _Signals.pending is not None:
        raise Stopped(_Signals.pending)


def bind_error(host: str, port: int) -> OSError | None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn and our servers bind
        try:
            probe.bind((host, port))
        except OSError as busy:
            return busy
    return None


def port_error(host: str, port: int, what: str, option: str, busy: OSError) -> ConfigError:
    reason = "it is already in use" if busy.errno == errno.EADDRINUSE else busy.strerror or str(busy)
    return ConfigError(f"cannot listen on {host}:{port} for {what}: {reason}; choose another {option}")


def _check_ports(config: Config, args: argparse.Namespace) -> None:
    """Every port `up` needs, checked before anything starts, each failure naming its option."""
    wanted = [(args.port, "the API", "--port"), (args.proxy_port, "the proxy", "--proxy-port"),
              (args.console_port, "the console", "--console-port")]
    if not config.devnet_rpc_url:
        wanted.append((args.rpc_port, "the localnet", "--rpc-port"))
    if args.demo:
        wanted.append((args.demo_port, "the example merchant API", "--demo-port"))
        wanted.append((args.demo_backend_port, "the demo backend", "--demo-backend-port"))
    seen: dict[int, str] = {}
    for port, what, option in wanted:
        if port in seen:
            raise ConfigError(f"{option} and {seen[port]} are both {port}; choose another {option}")
        seen[port] = option
        busy = bind_error(args.host, port)
        if busy is not None:
            raise port_error(args.host, port, what, option, busy)


def _chain(config: Config, args: argparse.Namespace, servers: list[Any]) -> tuple[str, Any]:
    """The devnet chain: an external RPC when PAYWARDEN_DEVNET_RPC_URL is set, else our localnet."""
    if config.devnet_rpc_url:
        return config.devnet_rpc_url, None
    from interfaces.sandbox.localnet import LocalnetServer

    try:
        localnet = LocalnetServer(args.host, args.rpc_port)
    except OSError as busy:
        raise port_error(args.host, args.rpc_port, "the localnet", "--rpc-port", busy) from None
    threading.Thread(target=localnet.serve_forever, name="localnet", daemon=True).start()
    servers.append(localnet)
    return localnet.url, localnet.sandbox


def hosts_localnet(config: Config, args: argparse.Namespace) -> bool:
    """The default: one API worker and no external chain, so the worker can own the sandbox and call it
    in-process. Several workers cannot share one in-memory chain: the localnet then runs in this process."""
    return not config.devnet_rpc_url and config.sandbox and args.workers == 1


def _genesis(fee_payers: list[str], payer: str, pay_to: str) -> list[tuple[str, int, int | None]]:
    """(address, lamports, USDC atomic or None for no USDC account) funded on a new sandbox chain."""
    # the merchant's USDC account must exist (empty) to receive payments
    return [*((a, FEE_PAYER_SOL, None) for a in fee_payers), (payer, PAYER_SOL, PAYER_USDC), (pay_to, 0, 0)]


def _fund(rpc_url: str, sandbox: Any, fee_payers: list[str], payer: str, pay_to: str) -> None:
    if sandbox is not None:
        for address, lamports, usdc in _genesis(fee_payers, payer, pay_to):
            if lamports:
                sandbox.airdrop(address, lamports)
            if usdc is not None:
                sandbox.mint_usdc(address, usdc)
        return
    for address, usdc_text, sol in [*((a, "0", "10") for a in fee_payers), (payer, "100", "1"),
                                    (pay_to, "0", "0.01")]:
        try:
            answer = httpx.post(f"{rpc_url}/faucet", json={"address": address, "usdc": usdc_text, "sol": sol},
                                timeout=10)
        except httpx.HTTPError:
            answer = None
        if answer is None or answer.status_code != 200:
            print(f"paywarden up: no faucet at {rpc_url}; fund {address} yourself", file=sys.stderr)


def _ensure_usdc_account(rpc_url: str, fee_payer: Any, owner: str) -> None:
    """Create `owner`'s devnet USDC account (idempotently), paid by the fee payer, on an external chain."""
    from solana.rpc.api import Client
    from solana.rpc.commitment import Confirmed
    from solders.instruction import AccountMeta, Instruction
    from solders.message import MessageV0
    from solders.pubkey import Pubkey
    from solders.transaction import VersionedTransaction

    from domain.exact import associated_token_address
    from domain.networks import Programs

    account = associated_token_address(owner, DEVNET.usdc_mint, Programs.TOKEN)
    rpc = Client(rpc_url, timeout=10)
    try:
        if rpc.get_account_info(Pubkey.from_string(account)).value is not None:
            return
        payer = fee_payer.pubkey()
        create = Instruction(Pubkey.from_string(Programs.ASSOCIATED_TOKEN), bytes([1]), [  # CreateIdempotent
            AccountMeta(payer, True, True), AccountMeta(Pubkey.from_string(account), False, True),
            AccountMeta(Pubkey.from_string(owner), False, False),
            AccountMeta(Pubkey.from_string(DEVNET.usdc_mint), False, False),
            AccountMeta(Pubkey.from_string("11111111111111111111111111111111"), False, False),
            AccountMeta(Pubkey.from_string(Programs.TOKEN), False, False)])
        blockhash = rpc.get_latest_blockhash().value.blockhash
        tx = VersionedTransaction(MessageV0.try_compile(payer, [create], [], blockhash), [fee_payer])
        signature = rpc.send_transaction(tx).value
        rpc.confirm_transaction(signature, Confirmed, sleep_seconds=0.2)
    except Exception as failed:  # an external chain we cannot write to: say so, the stack still starts
        print(f"paywarden up: could not create the USDC account {account} of the example merchant {owner} "
              f"on {rpc_url} ({type(failed).__name__}: {failed}); payments to it will fail until it exists",
              file=sys.stderr)


def _sandbox_merchant(config: Config) -> str:
    """The sandbox merchant and its test key, made on first run; the key is kept in the data directory."""
    from application.merchants import MerchantExistsError
    from interfaces.container import build

    container = build(config)
    try:
        try:
            container.merchants.register(SANDBOX_MERCHANT)
            container.merchants.enable_capability(SANDBOX_MERCHANT, DEVNET.caip2)
        except MerchantExistsError:
            pass
        container.merchants.preverify_sandbox_domain(SANDBOX_MERCHANT)  # docs/console.md
        key_file = config.data_dir / "sandbox-api-key"
        if key_file.is_file():
            api_key = key_file.read_text().strip()
            record = container.accounts.get_key(key_hash(api_key))
            if record is not None and not record.revoked:
                return api_key
        api_key, _ = container.merchants.create_key(SANDBOX_MERCHANT, KeyEnv.TEST)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(api_key + "\n")
        return api_key
    finally:
        container.close()


def _serve(config: Config, args: argparse.Namespace, rpc_url: str, keypairs: list[str],
           hosted: dict[str, str]) -> subprocess.Popen:
    env = {**os.environ, "PAYWARDEN_DEVNET_RPC_URL": rpc_url, "PAYWARDEN_FEE_PAYER_KEYPAIRS": ",".join(keypairs),
           "PAYWARDEN_DATA_DIR": str(config.data_dir), **hosted}
    env.setdefault("PAYWARDEN_PROXY_URL", f"http://{args.host}:{args.proxy_port}")
    argv = [sys.executable, "-m", "interfaces.cli.entry", "interfaces.cli.main", "serve",
            "--bind", f"{args.host}:{args.port}",
            "--workers", str(args.workers), "--proxy-bind", f"{args.host}:{args.proxy_port}",
            "--console-bind", f"{args.host}:{args.console_port}"]
    from interfaces.runtime.supervisor import _die_with_parent

    # Its own process group (Ctrl-C reaches `up` only); SIGTERM from the kernel should `up` itself be SIGKILLed.
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_die_with_parent)  # noqa: PLW1509 - only a prctl call


def _wait_answer(url: str, status: int, child: subprocess.Popen, what: str,
                 headers: dict[str, str] | None = None) -> None:
    """Poll `url` until it answers `status`, 60 s at most; a signal stops the wait, the child `what` runs in exiting
    ends it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _Signals.received is None:
        if child.poll() is not None:
            raise ConfigError(f"{what} exited at start-up with status {child.returncode}")
        try:
            if httpx.get(url, headers=headers, timeout=2).status_code == status:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    if _Signals.received is not None:
        raise Stopped(_Signals.received)
    raise ConfigError(f"{what} did not answer within 60 s")


def _demo(args: argparse.Namespace, base_url: str, api_key: str, pay_to: str, servers: list[Any]) -> str:
    from wsgiref.simple_server import make_server

    from interfaces.sandbox.demo import create_demo_app
    from interfaces.sandbox.localnet import QuietHandler, ThreadingServer

    app = create_demo_app(base_url, api_key, DEVNET.caip2, DEVNET.usdc_mint, pay_to)
    try:
        httpd = make_server(args.host, args.demo_port, app, ThreadingServer, QuietHandler)
    except OSError as busy:
        raise port_error(args.host, args.demo_port, "the example merchant API", "--demo-port", busy) from None
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="demo", daemon=True).start()
    servers.append(httpd)
    return f"http://{args.host}:{httpd.server_port}"


def _demo_proxy(config: Config, args: argparse.Namespace, proxy_url: str, pay_to: str, servers: list[Any],
                child: subprocess.Popen) -> str:
    """The plain demo backend, registered as the sandbox merchant's proxied service with a priced GET /weather;
    the paid gateway URL of that route (made once: a rerun finds the same service)."""
    from wsgiref.simple_server import make_server

    from domain.proxy_service import ProxyServiceConflictError
    from interfaces.container import build
    from interfaces.sandbox.demo import PRICE
    from interfaces.sandbox.demo_backend import demo_backend
    from interfaces.sandbox.localnet import QuietHandler, ThreadingServer

    try:
        httpd = make_server(args.host, args.demo_backend_port, demo_backend, ThreadingServer, QuietHandler)
    except OSError as busy:
        raise port_error(args.host, args.demo_backend_port, "the demo backend", "--demo-backend-port",
                         busy) from None
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="demo-backend",
                     daemon=True).start()
    servers.append(httpd)
    container = build(config)
    try:
        service = container.proxies.create_service(SANDBOX_MERCHANT, "Demo weather", "localhost",
                                                   port=httpd.server_port, token=f"demo-{httpd.server_port}")
        try:
            container.proxies.add_route(SANDBOX_MERCHANT, str(service.id), method="GET", path="/weather",
                                        price=int(PRICE), pay_to=pay_to, description="Today's weather (demo)",
                                        mime_type="application/json")
        except ProxyServiceConflictError:
            pass  # registered on an earlier run
        slug = service.slug
    finally:
        container.close()
    url = f"{proxy_url}/{slug}/weather"
    _wait_answer(url, 402, child, f"the proxy on {proxy_url}")
    return url


def _announce(info: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(info), flush=True)
        return
    width = max(map(len, info))
    print("Paywarden sandbox is up (Ctrl-C stops it):")
    for name, value in info.items():
        print(f"  {name.ljust(width)}  {', '.join(value) if isinstance(value, list) else value}")
    sys.stdout.flush()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap() -> None:
    """Collect every exited descendant re-parented to us (we are a subreaper) and our own children."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stop_children(children: list[subprocess.Popen], received: int | None = None) -> None:
    """SIGINT to each child (it stops its own children); SIGKILL to what is left of its process group after
    STOP_SECONDS; reap everything. `received`: the signal that stopped `up`, for the message."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_SECONDS
    for child in children:
        while _group_alive(child.pid) and time.monotonic() < deadline:
            child.poll()
            _reap()
            time.sleep(0.05)
        if _group_alive(child.pid):
            why = f"on {signal.Signals(received).name}" if received else "after the API exited"
            print(f"paywarden up: stopping {why}: the API had not exited {STOP_SECONDS:g} s after it was asked to "
                  "(SIGINT, its quick stop); stopped it with SIGKILL", file=sys.stderr)
            os.killpg(child.pid, signal.SIGKILL)
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and any(_group_alive(c.pid) for c in children):
        _reap()
        time.sleep(0.02)
    _reap()
