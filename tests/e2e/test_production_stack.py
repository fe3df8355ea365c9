"""The production stack end to end: two `paywarden serve` processes on different ports over one PostgreSQL
database, one Redis and one localnet. Nothing settles twice, rate limits are shared, a worker killed between
broadcast and confirmation is reconciled by signature, `serve` stops its children, and `paywarden bench` runs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from solders.hash import Hash
from solders.keypair import Keypair

from domain.idempotency import payment_id
from domain.merchant import key_prefix
from domain.networks import DEVNET
from interfaces.adapters.accounts_cache import CHANNEL
from interfaces.adapters.signers import write_keypair
from interfaces.sandbox.exact_client import build_exact_payment, to_base64
from projections.results import ResultCacheProjection
from tests.conftest import USDC, payment_key
from tests.e2e.production import ProductionStack, Server, alive, children, fund, production_stack
from tests.faults import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]
AMOUNT = USDC // 100


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    yield from production_stack(tmp_path_factory)


@pytest.fixture(scope="module")
def servers(production: ProductionStack) -> tuple[Server, Server]:
    # A runs as operators run it (a supervisor with the projection worker); B is gunicorn alone.
    return production.serve("--workers", "2"), production.serve("--no-projections")


def payment(stack: ProductionStack, payer: Keypair, pay_to: Keypair, amount: int = AMOUNT) -> dict:
    fee_payer = str(stack.container.fee_payers.addresses()[0])
    tx = build_exact_payment(payer, fee_payer=fee_payer, mint=DEVNET.usdc_mint, pay_to=pay_to.pubkey(),
                             amount=amount, blockhash=Hash.from_string(stack.net.sandbox.latest_blockhash()[0]))
    requirements = {"scheme": "exact", "network": DEVNET.caip2, "amount": str(amount), "asset": DEVNET.usdc_mint,
                    "payTo": str(pay_to.pubkey()), "maxTimeoutSeconds": 60, "extra": {"feePayer": fee_payer}}
    return {"x402Version": 2, "paymentRequirements": requirements,
            "paymentPayload": {"x402Version": 2, "payload": {"transaction": to_base64(tx)}}}


def events_of(stack: ProductionStack, body: dict, api_key: str) -> list[str]:
    key = payment_key(stack.container, api_key, body)
    return [type(e).__name__ for e in stack.container.payments.repository.event_store.get(payment_id(key))]


def post(server: Server, path: str, body: dict, api_key: str) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, headers={"Authorization": f"Bearer {api_key}"}, timeout=30)


def test_50_concurrent_settles_of_one_payment_over_two_servers_transfer_once(production, servers):
    payer, pay_to = Keypair(), Keypair()
    fund(production, payer, pay_to)
    body, sandbox = payment(production, payer, pay_to), production.net.sandbox
    before = sandbox.transaction_count, sandbox.token_balance(str(payer.pubkey())), len(production.rpc.sends)
    start, answers = threading.Barrier(50), [None] * 50

    def settle(i: int) -> None:
        start.wait()
        answers[i] = post(servers[i % 2], "/settle", body, production.api_key)

    threads = [threading.Thread(target=settle, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    successes = [a for a in answers if a.status_code == 200]
    assert len(successes) == 1 and successes[0].json()["success"] is True  # one paid answer
    others = Counter(a.json()["errorReason"] for a in answers if a.status_code != 200)
    assert set(others) <= {"duplicate_request", "duplicate_settlement"}, others
    assert len(successes) + others["duplicate_request"] + others["duplicate_settlement"] == 50
    assert all(a.json()["transaction"] == successes[0].json()["transaction"] for a in answers
               if a.status_code != 200 and a.json()["errorReason"] == "duplicate_settlement")
    # Exactly one transfer on chain, one broadcast, one Confirmed event.
    assert sandbox.transaction_count == before[0] + 1
    assert sandbox.token_balance(str(payer.pubkey())) == before[1] - AMOUNT
    assert sandbox.token_balance(str(pay_to.pubkey())) == AMOUNT
    assert len(production.rpc.sends) == before[2] + 1
    # Either the retry saw the confirmation itself, or the follow-up recorded it unanswered (Confirmed with
    # answered=false) and the retry's success is then recorded as the one answered success.
    assert events_of(production, body, production.api_key) in (
        ["Received", "Approved", "SettlementSubmitted", "Confirmed"],
        ["Received", "Approved", "SettlementSubmitted", "Confirmed", "SuccessAnswered"])


def test_the_101st_request_in_a_minute_is_429_across_both_servers_and_other_keys_are_unaffected(production,
                                                                                                  servers):
    limited, other = production.key("globex"), production.key("initech")
    headers = {"Authorization": f"Bearer {limited}"}
    statuses = [httpx.get(f"{servers[i % 2].url}/supported", headers=headers, timeout=10).status_code
                for i in range(100)]
    assert statuses == [200] * 100
    over = httpx.get(f"{servers[1].url}/supported", headers=headers, timeout=10)
    assert over.status_code == 429 and over.json()["error"] == "rate_limited"
    assert 1 <= int(over.headers["Retry-After"]) <= 60
    assert httpx.get(f"{servers[0].url}/supported", headers=headers, timeout=10).status_code == 429
    for server in servers:
        assert httpx.get(f"{server.url}/supported", headers={"Authorization": f"Bearer {other}"},
                         timeout=10).status_code == 200


def test_a_worker_killed_between_broadcast_and_confirmation_is_reconciled_by_signature(production, servers):
    server = servers[1]  # gunicorn itself: its children are the workers
    payer, pay_to = Keypair(), Keypair()
    fund(production, payer, pay_to)
    body, sandbox = payment(production, payer, pay_to), production.net.sandbox
    sends = len(production.rpc.sends)
    production.rpc.hold_broadcast()
    lost: list[object] = []
    request = threading.Thread(target=lambda: lost.append(_settle_or_error(server, body, production.api_key)))
    request.start()
    assert production.rpc.broadcast.wait(30), "the settle never broadcast"
    signature = production.rpc.sends[-1]
    # The transaction is on chain; the worker dies before it learns so.
    workers = children(server.process.pid)
    for pid in workers:
        subprocess.run(["kill", "-KILL", str(pid)], check=True)
    production.rpc.release.set()
    request.join(30)
    assert lost and isinstance(lost[0], Exception), lost
    # The projection worker's follow-up may already have seen the transaction confirmed (docs/facilitator.md).
    assert events_of(production, body, production.api_key) in (
        ["Received", "Approved", "SettlementSubmitted"], ["Received", "Approved", "SettlementSubmitted", "Confirmed"])
    wait_until(lambda: children(server.process.pid) and set(children(server.process.pid)) != set(workers),
               timeout=30, what="gunicorn's new worker")

    # The retry waits out the dead worker's lock (its expiry), then asks the chain about the recorded signature.
    retried: list[httpx.Response] = []
    wait_until(lambda: retried.append(_settle_or_error(server, body, production.api_key)) or (
        isinstance(retried[-1], httpx.Response) and retried[-1].json().get("errorReason") != "duplicate_request"),
        timeout=30, interval=0.2, what="the retry past the dead worker's lock")
    answer = retried[-1]
    assert answer.status_code == 200 and answer.json()["success"] is True
    assert answer.json()["transaction"] == signature
    assert len(production.rpc.sends) == sends + 1  # never broadcast twice
    assert sandbox.token_balance(str(pay_to.pubkey())) == AMOUNT
    # Either the retry saw the confirmation itself, or the follow-up recorded it unanswered (Confirmed with
    # answered=false) and the retry's success is then recorded as the one answered success.
    assert events_of(production, body, production.api_key) in (
        ["Received", "Approved", "SettlementSubmitted", "Confirmed"],
        ["Received", "Approved", "SettlementSubmitted", "Confirmed", "SuccessAnswered"])


def test_a_settle_waiting_on_the_chain_does_not_hold_up_the_other_requests_of_its_worker(production, servers):
    server = servers[1]  # one gevent worker
    payer, pay_to = Keypair(), Keypair()
    fund(production, payer, pay_to, usdc=2 * USDC)
    slow, quick = payment(production, payer, pay_to), payment(production, payer, pay_to)
    production.rpc.hold_broadcast()
    settled: list[object] = []
    request = threading.Thread(target=lambda: settled.append(_settle_or_error(server, slow, production.api_key)))
    request.start()
    try:
        assert production.rpc.broadcast.wait(30)
        # The settle's greenlet waits on the RPC answer; the same worker serves a verify meanwhile.
        answer = post(server, "/verify", quick, production.api_key)
        assert answer.status_code == 200 and answer.json()["isValid"] is True
        assert request.is_alive()
    finally:
        production.rpc.release.set()
        request.join(30)
    assert isinstance(settled[0], httpx.Response) and settled[0].json()["success"] is True


def _settle_or_error(server: Server, body: dict, api_key: str) -> httpx.Response | Exception:
    try:
        return post(server, "/settle", body, api_key)
    except httpx.HTTPError as failed:
        return failed


@pytest.mark.parametrize("op, expected", [("verify", "200 valid"), ("settle", "200 success")])
def test_bench_signs_real_payments_drives_them_and_reports_every_answer(production, servers, tmp_path: Path,
                                                                        op, expected):
    api_key = production.key(f"bench-{op}", per_minute=1_000_000)
    keypair = write_keypair(tmp_path / "payer.json", Keypair())
    run = subprocess.run(
        [sys.executable, "-m", "interfaces.cli.main", "bench", "--base-url", servers[0].url, "--api-key", api_key,
         "--rpc-url", production.net.url, "--payer-keypair", str(keypair), "--op", op, "--requests", "40",
         "--concurrency", "4", "--warmup", "4", "--json"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["answers"] == {expected: 40} and report["requests"] == 40
    assert 0 < report["p50_ms"] <= report["p95_ms"] <= report["p99_ms"] and report["throughput"] > 0
    assert "p99" in run.stdout and "40/40" in run.stderr  # the report, and the progress bar on stderr


def _statuses(servers: tuple[Server, Server], api_key: str, each: int = 8) -> list[tuple[int, str]]:
    """`each` requests to every server, each on a new connection (so both workers of A are asked)."""
    answers = []
    for server in servers:
        for _ in range(each):
            r = httpx.get(f"{server.url}/supported", headers={"Authorization": f"Bearer {api_key}"}, timeout=10)
            answers.append((r.status_code, r.json().get("error", "") if r.status_code != 200 else ""))
    return answers


def _change_subscribers(production: ProductionStack) -> int:
    return dict(production.container.redis.pubsub_numsub(CHANNEL))[CHANNEL.encode()]


def test_a_key_revoked_through_the_cli_is_refused_by_every_worker_on_the_very_next_request(production, servers):
    api_key = production.key("hooli")
    assert set(_statuses(servers, api_key)) == {(200, "")}  # every worker now holds the key in its cache
    assert _change_subscribers(production) >= 3  # A's two workers and B's one listen for account changes
    revoke = subprocess.run([sys.executable, "-m", "interfaces.cli.main", "key", "revoke", api_key],
                            env=production.env, capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert revoke.returncode == 0, revoke.stderr
    assert set(_statuses(servers, api_key)) == {(401, "revoked_api_key")}


def test_with_the_change_channel_cut_workers_read_the_accounts_view_and_never_serve_a_revoked_key(production,
                                                                                                  servers):
    api_key = production.key("pied-piper")
    assert set(_statuses(servers, api_key)) == {(200, "")}
    redis = production.container.redis
    db = redis.connection_pool.connection_kwargs.get("db", 0)
    killed = [c["id"] for c in redis.client_list(_type="pubsub") if int(c.get("db", 0)) == db]
    assert killed
    for client_id in killed:  # as if Redis had dropped them: the workers cannot hear of the revocation
        redis.client_kill_filter(_id=client_id)
    assert set(_statuses(servers, api_key)) == {(200, "")}  # still served: from the view, per request
    production.container.merchants.revoke_key(key_prefix(api_key), "pied-piper")
    assert set(_statuses(servers, api_key)) == {(401, "revoked_api_key")}
    # The workers subscribe again (at most once a second) and go back to their caches.
    other = production.key("pied-piper-2")
    wait_until(lambda: _statuses(servers, other, 2) and _change_subscribers(production) >= 3, timeout=20,
               what="the workers to subscribe again")


def test_zz_serve_stops_the_server_and_the_projection_worker_on_sigterm(production, servers):
    server = servers[0]
    tree = children(server.process.pid)
    commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ") for pid in tree}
    assert any(b"gunicorn" in c for c in commands.values()) and any(b" project " in c for c in commands.values())
    # The projection worker filled the result cache: its tracking position in Redis is the newest payment event.
    recorder, redis = production.container.payments.recorder, production.container.redis
    newest = recorder.select_notifications(start=None, limit=100_000, topics=ResultCacheProjection.topics)[-1].id
    wait_until(lambda: int(redis.get("paywarden:result_cache:tracking:Payments") or 0) == newest, timeout=20,
               what="the result cache projection")
    descendants = tree + [pid for parent in tree for pid in children(parent)]
    assert server.stop(signal.SIGTERM) == 0
    wait_until(lambda: not any(alive(pid) for pid in descendants), timeout=20, what="every child to exit")
