"""`paywarden up`: the whole sandbox stack in one command.

Starts the localnet (a Solana JSON-RPC server over LiteSVM, with the devnet USDC mint and a faucet) in this
process, the API (`paywarden serve`: gunicorn + the projection worker) as a child, and optionally the example
merchant API; creates the sandbox merchant, its test key and a funded payer wallet on first run; prints every
address. The `PAYWARDEN_` settings apply (an external PostgreSQL and Redis, for example). Ctrl-C stops it all.
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

from domain.merchant import key_hash
from domain.networks import DEVNET, KeyEnv
from interfaces.config import Config, ConfigError, load_config
from interfaces.signers import sandbox_keypair

SANDBOX_MERCHANT = "sandbox"
PAYER_USDC, PAYER_SOL = 100_000_000, 1_000_000_000
FEE_PAYER_SOL = 10_000_000_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8402, help="API port (default 8402)")
    p.add_argument("--rpc-port", type=int, default=8899, help="localnet JSON-RPC port (default 8899)")
    p.add_argument("--demo-port", type=int, default=8403, help="example merchant API port (default 8403)")
    p.add_argument("--proxy-port", type=int, default=8405, help="transparent proxy port (default 8405)")
    p.add_argument("--demo-backend-port", type=int, default=8406,
                   help="the plain demo backend behind the proxy, with --demo (default 8406)")
    p.add_argument("--workers", type=int, default=1, help="API worker processes (default 1)")
    p.add_argument("--demo", action="store_true", help="also start the example merchant API")
    p.add_argument("--json", action="store_true", help="print the addresses as one JSON line on stdout")


def run(args: argparse.Namespace) -> int:
    config = load_config()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    servers: list[Any] = []
    children: list[subprocess.Popen] = []
    try:
        rpc_url, sandbox = _chain(config, args, servers)
        config = dataclasses.replace(config, devnet_rpc_url=rpc_url)
        fee_payer_paths = [str(p) for p in config.fee_payer_keypairs] or [str(config.data_dir / "fee-payer.json")]
        fee_payers = [str(sandbox_keypair(Path(p)).pubkey()) for p in fee_payer_paths]
        payer_path = config.data_dir / "payer.json"
        payer = str(sandbox_keypair(payer_path).pubkey())
        pay_to_path = config.data_dir / "merchant-wallet.json"
        pay_to = str(sandbox_keypair(pay_to_path).pubkey())
        _fund(rpc_url, sandbox, fee_payers, payer, pay_to)
        api_key = _sandbox_merchant(config)
        base_url = f"http://{args.host}:{args.port}"
        proxy_url = f"http://{args.host}:{args.proxy_port}"
        children.append(_serve(config, args, rpc_url, fee_payer_paths))
        _wait_ready(base_url, api_key, children[0], stop)
        info = {
            "base_url": base_url, "rpc_url": rpc_url, "faucet_url": f"{rpc_url}/faucet", "network": DEVNET.caip2,
            "usdc_mint": DEVNET.usdc_mint, "fee_payers": fee_payers, "fee_payer_keypair_paths": fee_payer_paths,
            "merchant": SANDBOX_MERCHANT, "api_key": api_key, "payer": payer, "payer_keypair_path": str(payer_path),
            "pay_to": pay_to, "database_url": config.database_url or f"sqlite:///{config.data_dir.resolve()}",
            "proxy_url": proxy_url,
        }
        if args.demo:
            info["demo_url"] = _demo(args, base_url, api_key, pay_to, servers) + "/weather"
            info["demo_proxy_url"] = _demo_proxy(config, args, proxy_url, pay_to, servers, children[0], stop)
        _announce(info, args.json)
        while not stop.is_set():
            if any(child.poll() is not None for child in children):
                print("paywarden up: the API process exited; stopping", file=sys.stderr)
                return 1
            stop.wait(0.5)
        return 0
    finally:
        for child in children:
            _terminate(child)
        for server in servers:
            server.shutdown()


def _chain(config: Config, args: argparse.Namespace, servers: list[Any]) -> tuple[str, Any]:
    """The devnet chain: an external RPC when PAYWARDEN_DEVNET_RPC_URL is set, else our localnet."""
    if config.devnet_rpc_url:
        return config.devnet_rpc_url, None
    from interfaces.localnet import LocalnetServer

    try:
        localnet = LocalnetServer(args.host, args.rpc_port)
    except OSError as busy:
        raise ConfigError(f"cannot listen on {args.host}:{args.rpc_port} for the localnet ({busy}); "
                          "choose another --rpc-port") from None
    threading.Thread(target=localnet.serve_forever, name="localnet", daemon=True).start()
    servers.append(localnet)
    return localnet.url, localnet.sandbox


def _fund(rpc_url: str, sandbox: Any, fee_payers: list[str], payer: str, pay_to: str) -> None:
    if sandbox is not None:
        for address in fee_payers:
            sandbox.airdrop(address, FEE_PAYER_SOL)
        sandbox.airdrop(payer, PAYER_SOL)
        sandbox.mint_usdc(payer, PAYER_USDC)
        sandbox.mint_usdc(pay_to, 0)  # the merchant's USDC account must exist to receive payments
        return
    for address, usdc, sol in [*((a, "0", "10") for a in fee_payers), (payer, "100", "1"), (pay_to, "0", "0.01")]:
        try:
            httpx.post(f"{rpc_url}/faucet", json={"address": address, "usdc": usdc, "sol": sol}, timeout=10)
        except httpx.HTTPError:
            print(f"paywarden up: no faucet at {rpc_url}; fund {address} yourself", file=sys.stderr)


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
        key_file = config.data_dir / "sandbox-api-key"
        container.refresh_accounts()
        if key_file.is_file():
            api_key = key_file.read_text().strip()
            record = container.accounts.get_key(key_hash(api_key))
            if record is not None and not record.revoked:
                return api_key
        api_key, _ = container.merchants.create_key(SANDBOX_MERCHANT, KeyEnv.TEST)
        container.refresh_accounts()
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(api_key + "\n")
        return api_key
    finally:
        container.close()


def _serve(config: Config, args: argparse.Namespace, rpc_url: str, keypairs: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PAYWARDEN_DEVNET_RPC_URL": rpc_url, "PAYWARDEN_FEE_PAYER_KEYPAIRS": ",".join(keypairs),
           "PAYWARDEN_DATA_DIR": str(config.data_dir)}
    env.setdefault("PAYWARDEN_PROXY_URL", f"http://{args.host}:{args.proxy_port}")
    argv = [sys.executable, "-m", "interfaces.cli", "serve", "--bind", f"{args.host}:{args.port}",
            "--workers", str(args.workers), "--proxy-bind", f"{args.host}:{args.proxy_port}"]
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True)


def _wait_ready(base_url: str, api_key: str, child: subprocess.Popen, stop: threading.Event) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not stop.is_set():
        if child.poll() is not None:
            raise ConfigError(f"the API exited at start-up with status {child.returncode}")
        try:
            if httpx.get(f"{base_url}/supported", headers={"Authorization": f"Bearer {api_key}"},
                         timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise ConfigError(f"the API did not answer on {base_url} within 60 s")


def _demo(args: argparse.Namespace, base_url: str, api_key: str, pay_to: str, servers: list[Any]) -> str:
    from wsgiref.simple_server import make_server

    from interfaces.demo import create_demo_app
    from interfaces.localnet import QuietHandler, ThreadingServer

    app = create_demo_app(base_url, api_key, DEVNET.caip2, DEVNET.usdc_mint, pay_to)
    httpd = make_server(args.host, args.demo_port, app, ThreadingServer, QuietHandler)
    threading.Thread(target=httpd.serve_forever, name="demo", daemon=True).start()
    servers.append(httpd)
    return f"http://{args.host}:{httpd.server_port}"


def _demo_proxy(config: Config, args: argparse.Namespace, proxy_url: str, pay_to: str, servers: list[Any],
                child: subprocess.Popen, stop: threading.Event) -> str:
    """The plain demo backend, registered as the sandbox merchant's proxied service with a priced GET /weather;
    the paid gateway URL of that route (made once: a rerun finds the same service)."""
    from wsgiref.simple_server import make_server

    from domain.proxy_service import ProxyServiceConflictError
    from interfaces.container import build
    from interfaces.demo import PRICE
    from interfaces.demo_backend import demo_backend
    from interfaces.localnet import QuietHandler, ThreadingServer

    httpd = make_server(args.host, args.demo_backend_port, demo_backend, ThreadingServer, QuietHandler)
    threading.Thread(target=httpd.serve_forever, name="demo-backend", daemon=True).start()
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
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not stop.is_set() and child.poll() is None:
        try:
            if httpx.get(url, timeout=2).status_code == 402:
                return url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise ConfigError(f"the proxy did not answer on {proxy_url} within 60 s")


def _announce(info: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(info), flush=True)
        return
    width = max(map(len, info))
    print("Paywarden sandbox is up (Ctrl-C stops it):")
    for name, value in info.items():
        print(f"  {name.ljust(width)}  {', '.join(value) if isinstance(value, list) else value}")
    sys.stdout.flush()


def _terminate(child: subprocess.Popen) -> None:
    if child.poll() is None:
        os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
