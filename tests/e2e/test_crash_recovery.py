"""Nothing stranded after a crash. A stack (`paywarden serve`: supervisor, gunicorn, its workers, the projection and
webhook workers) is SIGKILLed at once, as a power cut or the OOM killer would, in the middle of a burst of
concurrent settles of distinct payments; the chain lives on in the test's own process (a localnet server), so it
survives. The stack restarts on the same store and chain, and each merchant retries as merchants do: the same body
with the same `Idempotency-Key`. Every transfer on chain has exactly one success answer (the same transaction when
given again), every success answered before the crash is given again to its key, no payment is refused as
`duplicate_request` more than 5 s after the restart, and `audit chain` and `audit rebuild --check` pass. On
SQLite (the embedded default, in-process locks) and on PostgreSQL + Redis (leased locks); and with one of two
hosts killed while the other serves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from solders.hash import Hash
from solders.keypair import Keypair

from domain.idempotency import payment_id
from domain.networks import DEVNET, KeyEnv
from domain.payment import Payment
from interfaces.adapters.signers import write_keypair
from interfaces.cli.main import main
from interfaces.config import Config
from interfaces.container import build
from interfaces.sandbox.exact_client import build_exact_payment, to_base64
from interfaces.sandbox.localnet import LocalnetThread
from tests.conftest import USDC, payment_key
from tests.faults import RpcProxy, free_port, wait_until
from tests.services import SMALL_POOLS

pytestmark = pytest.mark.slow
SETTLES = 40
AMOUNT = USDC // 100
STUCK_SECONDS = 5.0  # no duplicate_request later than this after the restart
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Stack:
    """A chain (localnet in this process, behind a proxy that answers broadcasts late), a store, and the
    `paywarden serve` processes over them, each the leader of its own process group."""

    env: dict[str, str]
    tmp: Path
    net: LocalnetThread
    rpc: RpcProxy
    config: Config
    api_key: str = ""
    fee_payer: str = ""
    servers: dict[str, tuple[subprocess.Popen, str]] = field(default_factory=dict)

    def serve(self, name: str, *args: str) -> str:
        port = free_port()
        log = (self.tmp / f"{name}.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "interfaces.cli.main", "serve", "--bind", f"127.0.0.1:{port}", *args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            assert process.poll() is None, (self.tmp / f"{name}.log").read_text()[-3000:]
            try:
                return httpx.get(f"{url}/supported", headers=self.auth, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=60, interval=0.05, what=f"{name} serving")
        self.servers[name] = (process, url)
        return url

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def power_cut(self, name: str) -> None:
        """SIGKILL every process of the server's group at once: nothing runs a handler, a finally or an atexit."""
        process, _ = self.servers.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

        def group_gone() -> bool:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_until(group_gone, timeout=10, what="every process of the stack gone")

    def stop(self, name: str) -> None:
        process, _ = self.servers.pop(name)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def payment(self, payer: Keypair, pay_to: Keypair) -> dict:
        tx = build_exact_payment(payer, fee_payer=self.fee_payer, mint=DEVNET.usdc_mint, pay_to=pay_to.pubkey(),
                                 amount=AMOUNT, blockhash=Hash.from_string(self.net.sandbox.latest_blockhash()[0]))
        requirements = {"scheme": "exact", "network": DEVNET.caip2, "amount": str(AMOUNT),
                        "asset": DEVNET.usdc_mint, "payTo": str(pay_to.pubkey()), "maxTimeoutSeconds": 60,
                        "extra": {"feePayer": self.fee_payer}}
        return {"x402Version": 2, "paymentRequirements": requirements,
                "paymentPayload": {"x402Version": 2, "payload": {"transaction": to_base64(tx)}}}


def crash_stack(tmp: Path, production: bool) -> Iterator[Stack]:
    from tests.services import clean_redis, drop_postgres_database, fresh_postgres_database

    database_url = fresh_postgres_database() if production else ""
    redis_url = clean_redis() if production else ""
    fee_payer = Keypair()
    keypair_path = write_keypair(tmp / "fee-payer.json", fee_payer)
    # The chain confirms at once (no slot ticker: blockhashes never expire while the test retries); the proxy
    # answers each broadcast late, so a crash finds settles broadcast and not yet answered.
    with LocalnetThread(slot_ms=None) as net, RpcProxy(net.url) as rpc:
        rpc.delay["sendTransaction"] = 0.4
        net.sandbox.airdrop(str(fee_payer.pubkey()), 100 * 10**9)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
        env.update({"PAYWARDEN_MODE": "sandbox", "PAYWARDEN_DEVNET_RPC_URL": rpc.url,
                    "PAYWARDEN_FEE_PAYER_KEYPAIRS": str(keypair_path), "PAYWARDEN_DATA_DIR": str(tmp / "var"),
                    "PAYWARDEN_LOG_LEVEL": "warning", "PAYWARDEN_RATE_LIMIT_PER_KEY": "100000/minute"})
        if production:
            env.update({"PAYWARDEN_DATABASE_URL": database_url, "PAYWARDEN_REDIS_URL": redis_url, **SMALL_POOLS})
        config = Config(data_dir=tmp / "var", database_url=database_url, redis_url=redis_url,
                        devnet_rpc_url=net.url, fee_payer_keypairs=(keypair_path,), database_pool_max=2)
        stack = Stack(env, tmp, net, rpc, config, fee_payer=str(fee_payer.pubkey()))
        container = build(config)
        try:
            container.merchants.register("acme")
            container.merchants.enable_capability("acme", DEVNET.caip2)
            stack.api_key, _ = container.merchants.create_key("acme", KeyEnv.TEST)
        finally:
            container.close()
        try:
            yield stack
        finally:
            for name in list(stack.servers):
                stack.power_cut(name)
            if production:
                drop_postgres_database(database_url)


@dataclass
class Merchant:
    """Settles `SETTLES` distinct payments, each under its own Idempotency-Key, and keeps every answer."""

    stack: Stack
    bodies: list[dict] = field(default_factory=list)
    payers: list[Keypair] = field(default_factory=list)
    pay_to: Keypair = field(default_factory=Keypair)
    first: dict[int, dict] = field(default_factory=dict)  # answers received during the burst
    final: dict[int, dict] = field(default_factory=dict)  # the answer each retry loop ended on
    duplicate_request_at: dict[int, float] = field(default_factory=dict)  # its last duplicate_request, monotonic

    def __post_init__(self) -> None:
        sandbox = self.stack.net.sandbox
        sandbox.mint_usdc(str(self.pay_to.pubkey()), 0)
        for _ in range(SETTLES):
            payer = Keypair()
            sandbox.mint_usdc(str(payer.pubkey()), USDC)
            self.payers.append(payer)
            self.bodies.append(self.stack.payment(payer, self.pay_to))

    def settle(self, url: str, i: int, *, key: bool = True) -> dict | None:
        headers = {**self.stack.auth, **({"Idempotency-Key": f"order-{i}"} if key else {})}
        try:
            answer = httpx.post(f"{url}/settle", json=self.bodies[i], headers=headers, timeout=30)
        except httpx.HTTPError:
            return None
        return {**answer.json(), "replayed": answer.headers.get("Idempotent-Replayed") == "true"}

    def burst(self, urls: list[str]) -> list[threading.Thread]:
        def one(i: int) -> None:
            if (answer := self.settle(urls[i % len(urls)], i)) is not None:
                self.first[i] = answer

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(SETTLES)]
        for thread in threads:
            thread.start()
        return threads

    def successes_before(self) -> dict[int, str]:
        return {i: a["transaction"] for i, a in dict(self.first).items() if a.get("success")}

    def retry_until_answered(self, url: str, timeout: float = 60) -> None:
        """Every payment retried (same body, same key) until it has a final answer, as merchants retry."""
        deadline = time.monotonic() + timeout

        def one(i: int) -> None:
            answer = self.settle(url, i)
            if answer is None or answer.get("errorReason") == "settlement_pending":
                return
            if answer.get("errorReason") == "duplicate_request":
                self.duplicate_request_at[i] = time.monotonic()
                return
            self.final[i] = answer

        with ThreadPoolExecutor(8) as pool:
            while len(self.final) < SETTLES and time.monotonic() < deadline:
                list(pool.map(one, [i for i in range(SETTLES) if i not in self.final]))
                time.sleep(0.2)  # a merchant's pause between retries (the loop's condition is above)

    def assert_every_transfer_answered_once(self, before: dict[int, str], restarted_at: float) -> None:
        sandbox = self.stack.net.sandbox
        stuck = {i: round(at - restarted_at, 1) for i, at in self.duplicate_request_at.items()
                 if at - restarted_at > STUCK_SECONDS}
        assert not stuck, f"payments refused as duplicate_request more than {STUCK_SECONDS} s after: {stuck}"
        assert len(self.final) == SETTLES, f"unanswered: {sorted(set(range(SETTLES)) - set(self.final))}"
        failures = {i: a["errorReason"] for i, a in self.final.items() if not a.get("success")}
        assert not failures, failures
        # Every payer paid exactly once, and every payment has exactly one transaction, on chain.
        for i, payer in enumerate(self.payers):
            assert sandbox.token_balance(str(payer.pubkey())) == USDC - AMOUNT, f"payer {i}"
        assert sandbox.token_balance(str(self.pay_to.pubkey())) == SETTLES * AMOUNT
        transactions = [self.final[i]["transaction"] for i in range(SETTLES)]
        assert len(set(transactions)) == SETTLES
        assert all(sandbox.transaction(tx) is not None for tx in transactions)
        # A success answered before the crash is given again to its key: the same transaction, replayed.
        for i, tx in before.items():
            assert (self.final[i]["transaction"], self.final[i]["replayed"]) == (tx, True), i
        # ...and to no one else: without the key it is duplicate_settlement naming that transaction.
        url = next(iter(self.stack.servers.values()))[1]
        for i in range(0, SETTLES, 10):
            again = self.settle(url, i, key=False)
            assert (again["errorReason"], again["transaction"]) == ("duplicate_settlement", transactions[i])


def audits_pass(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the read models have caught up, the stack stopped: the books agree with the chain and every read
    model equals its rebuild from the events (the CLI's commands, run in this process on the stack's settings)."""
    for name in [n for n in os.environ if n.startswith("PAYWARDEN_") and n not in stack.env]:
        monkeypatch.delenv(name)
    for name, value in stack.env.items():
        if name.startswith("PAYWARDEN_"):
            monkeypatch.setenv(name, value)
    for check in (["audit", "chain"], ["audit", "rebuild", "--check"]):
        assert main(check) == 0, " ".join(check)


def crash_mid_burst(stack: Stack, merchant: Merchant, urls: list[str], killed: str) -> dict[int, str]:
    """The burst, and a power cut of `killed` once some settles are answered and most are not."""
    threads = merchant.burst(urls)
    wait_until(lambda: len(merchant.successes_before()) >= 5, timeout=60, interval=0.01, what="five answers")
    before = merchant.successes_before()
    stack.power_cut(killed)
    for thread in threads:
        thread.join(35)
    assert SETTLES - len(before) >= 10, f"the crash came too late to prove anything ({len(before)} answered)"
    return before


def caught_up_with_one_success_each(stack: Stack, merchant: Merchant) -> None:
    """The payments read model shows every payment CONFIRMED (the projection worker has caught up), and the event
    store records exactly one success answer for each (`Confirmed` answered, or `SuccessAnswered`)."""
    container = build(stack.config)
    try:
        wait_until(lambda: len(container.payment_list.get_page(state="CONFIRMED", limit=200).items) == SETTLES,
                   timeout=30, interval=0.2, what="the payments read model caught up")
        store = container.payments.repository.event_store
        for i, body in enumerate(merchant.bodies):
            events = store.get(payment_id(payment_key(container, stack.api_key, body)))
            answers = [e for e in events if isinstance(e, Payment.SuccessAnswered)
                       or (isinstance(e, Payment.Confirmed) and e.answered)]
            assert len(answers) == 1, f"payment {i}: {len(answers)} success answers recorded"
    finally:
        container.close()


@pytest.mark.parametrize("production", [
    pytest.param(False, id="embedded"),
    pytest.param(True, id="postgres-redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
])
def test_a_power_cut_mid_burst_strands_nothing_and_every_success_is_given_again_to_its_key(tmp_path, production,
                                                                                          monkeypatch):
    for stack in crash_stack(tmp_path, production):
        url = stack.serve("stack", "--workers", "2" if production else "1")
        merchant = Merchant(stack)
        before = crash_mid_burst(stack, merchant, [url], killed="stack")
        url = stack.serve("stack", "--workers", "2" if production else "1")  # the same store, the same chain
        restarted_at = time.monotonic()
        merchant.retry_until_answered(url)
        merchant.assert_every_transfer_answered_once(before, restarted_at)
        caught_up_with_one_success_each(stack, merchant)
        stack.stop("stack")
        audits_pass(stack, monkeypatch)


@pytest.mark.postgres
@pytest.mark.redis
def test_one_of_two_hosts_killed_mid_burst_strands_nothing_while_the_other_serves(tmp_path, monkeypatch):
    for stack in crash_stack(tmp_path, production=True):
        a = stack.serve("a", "--workers", "1")  # with the projection worker
        b = stack.serve("b", "--workers", "1", "--no-projections")
        merchant = Merchant(stack)
        before = crash_mid_burst(stack, merchant, [a, b], killed="b")
        killed_at = time.monotonic()
        merchant.retry_until_answered(a)  # the load balancer sends everything to the host that lives
        merchant.assert_every_transfer_answered_once(before, killed_at)
        caught_up_with_one_success_each(stack, merchant)
        stack.stop("a")
        audits_pass(stack, monkeypatch)
