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
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from domain.networks import DEVNET
from domain.proxy_service import SANDBOX_MERCHANT
from interfaces.adapters.signers import sandbox_keypair
from interfaces.cli.up_stack import (
    bind_error,
    chain,
    ensure_usdc_account,
    fund,
    genesis,
    hosts_localnet,
    port_error,
    sandbox_merchant,
)
from interfaces.config import (
    Config,
    ConfigError,
    forget_running_stack,
    load_config,
    record_running_stack,
    without_password,
)

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
                  LOCALNET_ACCOUNTS: format_accounts(genesis(fee_payers, payer, pay_to))}
    else:
        rpc_url, sandbox = chain(config, args, servers)
        fund(rpc_url, sandbox, fee_payers, payer, pay_to)
        if sandbox is None:  # an external chain: its faucet (if any) made no token account for the merchant
            ensure_usdc_account(rpc_url, fee_payer_keys[0], pay_to)
    config = dataclasses.replace(config, devnet_rpc_url=rpc_url)
    api_key = sandbox_merchant(config)
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
        info["demo_proxy_url"], info["demo_backend_url"] = _demo_proxy(config, args, proxy_url, pay_to, servers,
                                                                       children[0])
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
                child: subprocess.Popen) -> tuple[str, str]:
    """The plain demo backend, registered as the sandbox merchant's proxied service with a priced GET /weather;
    the paid gateway URL of that route (made once: a rerun finds the same service), and the backend's own URL."""
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
    return url, f"http://{args.host}:{httpd.server_port}"


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
