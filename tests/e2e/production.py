"""A production-shaped stack for end-to-end tests: `paywarden serve` processes over one PostgreSQL database, one
Redis and one localnet, reached through a JSON-RPC proxy that can hold the answer to a broadcast
(`tests.faults.RpcProxy`).

`production_stack()` is a generator for a module-scoped fixture (see test_production_stack.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from solders.keypair import Keypair

from domain.networks import DEVNET, KeyEnv
from interfaces.adapters.signers import write_keypair
from interfaces.config import Config
from interfaces.container import Container, build
from tests.conftest import USDC
from tests.faults import RpcProxy, free_port, wait_until
from tests.services import SMALL_POOLS


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@dataclass
class Server:
    """One `paywarden serve` process."""

    env: dict[str, str]
    log: Path
    args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, api_key: str) -> Server:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "interfaces.cli.main", "serve", "--bind", f"127.0.0.1:{self.port}", *self.args],
            env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, cwd=Path(__file__).parents[2])
        headers = {"Authorization": f"Bearer {api_key}"}

        def ready() -> bool:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                return httpx.get(f"{self.url}/supported", headers=headers, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=60, interval=0.1, what=f"server on port {self.port}")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@dataclass
class ProductionStack:
    net: object
    rpc: RpcProxy
    container: Container
    env: dict[str, str]
    api_key: str
    tmp: Path
    servers: list[Server] = field(default_factory=list)

    def serve(self, *args: str, api_key: str | None = None, **env: str) -> Server:
        server = Server({**self.env, **env}, self.tmp / f"serve-{len(self.servers)}.log", args)
        self.servers.append(server.start(api_key or self.api_key))
        return server

    def key(self, merchant: str, per_minute: int | None = None) -> str:
        self.container.merchants.register(merchant)
        self.container.merchants.enable_capability(merchant, DEVNET.caip2)
        api_key, _ = self.container.merchants.create_key(merchant, KeyEnv.TEST)
        if per_minute:
            self.container.merchants.set_rate_limit(merchant, per_minute)
        return api_key


def production_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProductionStack]:
    from interfaces.sandbox.localnet import LocalnetThread
    from tests.services import clean_redis, drop_postgres_database, fresh_postgres_database

    tmp = tmp_path_factory.mktemp("stack")
    database_url, redis_url = fresh_postgres_database(), clean_redis()
    fee_payer = Keypair()
    keypair_path = write_keypair(tmp / "fee-payer.json", fee_payer)
    with LocalnetThread(slot_ms=None) as net:
        net.sandbox.airdrop(str(fee_payer.pubkey()), 100 * 10**9)
        rpc = RpcProxy(net.url)
        env = {**os.environ, "PAYWARDEN_MODE": "sandbox", "PAYWARDEN_DATABASE_URL": database_url,
               "PAYWARDEN_REDIS_URL": redis_url, "PAYWARDEN_DEVNET_RPC_URL": rpc.url,
               "PAYWARDEN_FEE_PAYER_KEYPAIRS": str(keypair_path), "PAYWARDEN_DATA_DIR": str(tmp / "var"),
               "PAYWARDEN_CONFIRMATION_BUDGET_MS": "2000", "PAYWARDEN_LOCK_MARGIN_MS": "1000",
               "PAYWARDEN_LOG_LEVEL": "warning", **SMALL_POOLS}
        config = Config(data_dir=tmp / "var", database_url=database_url, redis_url=redis_url,
                        devnet_rpc_url=net.url, fee_payer_keypairs=(keypair_path,), database_pool_max=2)
        container = build(config)
        stack = ProductionStack(net, rpc, container, env, "", tmp)
        stack.api_key = stack.key("acme")
        try:
            yield stack
        finally:
            for server in stack.servers:
                server.stop()
            rpc.close()
            container.close()
            drop_postgres_database(database_url)


def fund(stack: ProductionStack, payer: Keypair, pay_to: Keypair, usdc: int = 10 * USDC) -> None:
    stack.net.sandbox.mint_usdc(str(payer.pubkey()), usdc)
    stack.net.sandbox.mint_usdc(str(pay_to.pubkey()), 0)
