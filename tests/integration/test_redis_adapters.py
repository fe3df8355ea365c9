"""The Redis adapters on a real Redis: the lock per idempotency key (owner-only release, expiry), the result cache
(a miss when Redis is down), and the projection that fills the cache from the payment events."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis
from eventsourcing.persistence import IntegrityError, Tracking
from solders.keypair import Keypair

from application.errors import DuplicateRequestError
from application.outcomes import terminal_entries
from application.payment_store import PaymentStore
from application.payments import Payments
from domain.codes import Code
from domain.networks import DEVNET
from interfaces.adapters.redis import (
    RedisLocks,
    RedisResultCache,
    RedisResultCacheView,
    lock_key,
    redis_client,
    result_key,
)
from projections.results import ResultCacheProjection
from projections.runner import catch_up
from tests.conftest import USDC, make_gateway
from tests.faults import free_port, wait_until
from tests.integration.test_facilitator_http import key_of

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_url: str):
    client = redis_client(redis_url)
    yield client
    client.close()


def test_a_lock_is_exclusive_and_released_only_by_its_owner(client):
    locks = RedisLocks(client)
    with locks.hold("payment-1", 30) as held:
        assert held
        token = client.get(lock_key("payment-1")).decode()
        with locks.hold("payment-1", 30) as second:
            assert not second
        assert locks.release("payment-1", "not-the-owner") is False
        assert client.get(lock_key("payment-1")).decode() == token
        assert 0 < client.pttl(lock_key("payment-1")) <= 5_000  # a lease, renewed while held
    assert client.get(lock_key("payment-1")) is None
    with locks.hold("payment-1", 30) as again:
        assert again


def test_a_dead_owners_lock_expires_and_its_late_release_leaves_the_next_owner_alone(client):
    locks = RedisLocks(client, lease_seconds=0.3)
    dead = locks.hold("payment-2", 0.3)
    assert dead.__enter__() is True  # the owner never comes back to release it
    wait_until(lambda: client.get(lock_key("payment-2")) is None, timeout=5, what="lock expiry")
    with locks.hold("payment-2", 30) as held:
        assert held
        dead.__exit__(None, None, None)  # the first owner wakes up late and releases "its" lock
        assert client.get(lock_key("payment-2")) is not None


HOLDER = """
import sys, time
from interfaces.adapters.redis import RedisLocks, redis_client
locks = RedisLocks(redis_client(sys.argv[1]), lease_seconds=0.6, renew_seconds=0.1)
with locks.hold("payment-lease", 3600) as held:
    print("held" if held else "refused", flush=True)
    time.sleep(3600)
"""


def test_a_live_holder_keeps_its_lease_renewed_and_a_killed_holders_lock_is_free_within_one_lease(client,
                                                                                                  redis_url):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, redis_url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        # Alive, it renews: the lock's remaining time goes up again and again, past several leases.
        renewals, last = [], [client.pttl(lock_key("payment-lease"))]

        def renewed_three_times() -> bool:
            now = client.pttl(lock_key("payment-lease"))
            assert now > 0, "a live holder's lock expired"
            if now > last[-1]:
                renewals.append(now)
            last.append(now)
            return len(renewals) >= 3

        wait_until(renewed_three_times, timeout=10, interval=0.02, what="lease renewals")
        with RedisLocks(client).hold("payment-lease", 30) as second:
            assert not second
        # Killed (no release, no finally): its lock is free within one lease, not after the hour it asked for.
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        killed = time.monotonic()
        wait_until(lambda: client.get(lock_key("payment-lease")) is None, timeout=5, interval=0.02,
                   what="the dead holder's lease to lapse")
        assert time.monotonic() - killed <= 0.6 + 0.2
        with RedisLocks(client).hold("payment-lease", 30) as taken:
            assert taken
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_lease_found_taken_by_another_holder_is_reported_lost_and_no_longer_renewed(client):
    locks = RedisLocks(client, lease_seconds=30, renew_seconds=3600)
    with locks.hold("payment-stale", 30) as held:
        assert held
        client.set(lock_key("payment-stale"), "another-holder", px=30_000)  # our lease lapsed; someone took it
        assert locks.renew_held() == [lock_key("payment-stale")]
        assert client.get(lock_key("payment-stale")) == b"another-holder"
        assert locks.renew_held() == []  # not renewed again
    assert client.get(lock_key("payment-stale")) == b"another-holder"  # nor released: it is not ours


def test_with_redis_unreachable_the_cache_misses_and_the_lock_refuses():
    down = redis_client(f"redis://127.0.0.1:{free_port()}/0", timeout_seconds=0.2)
    cache = RedisResultCache(down)
    assert cache.get("key", "verify") is None
    with pytest.raises(redis.ConnectionError), RedisLocks(down).hold("key", 30):
        pass


def test_the_way_in_takes_the_redis_lock_first_and_reads_the_cache_only_while_another_request_holds_it(client):
    """`Payments`' way in on Redis (application/payment_store.py): the lease first (one round trip); the terminal
    result cache is read only when another request holds the lock."""
    store = PaymentStore(Payments({"PERSISTENCE_MODULE": "eventsourcing.popo"}), RedisLocks(client),
                         RedisResultCache(client))
    client.set(result_key("payment-3", "settle"), '{"terms": "t", "outcome": {"success": true}}')
    with store.admitted("payment-3", "settle", 30) as cached:
        assert cached is None  # the lock was free: its holder reads the event store, not the cache
        assert 0 < client.pttl(lock_key("payment-3")) <= 5_000
        with store.admitted("payment-3", "settle", 30) as again:
            assert again == {"terms": "t", "outcome": {"success": True}}  # held elsewhere: a terminal result answers
        with pytest.raises(DuplicateRequestError, match="in progress"), store.admitted(
                "payment-3", "settle", 30, usable=lambda cached: False):
            pass  # a result this request may not replay
        with pytest.raises(DuplicateRequestError, match="in progress"), store.admitted("payment-3", "verify", 30):
            pass  # another operation's result is not this one's
        with RedisLocks(client).hold("payment-3", 30) as third:
            assert not third  # the same lock as RedisLocks'
    assert client.get(lock_key("payment-3")) is None  # released on exit
    down = redis_client(f"redis://127.0.0.1:{free_port()}/0", timeout_seconds=0.2)
    with pytest.raises(redis.ConnectionError), PaymentStore(Payments({"PERSISTENCE_MODULE": "eventsourcing.popo"}),
                                                            RedisLocks(down), RedisResultCache(down)).admitted(
            "key", "settle", 30):
        pass


def test_a_verify_makes_no_redis_round_trip_and_a_settle_two_its_lock_and_its_release(client):
    """Issue 32's budget on the Payments side: a verify takes no lock and reads no cache (docs/facilitator.md); a
    settle takes the lease (SET NX PX) and releases it (one script), and reads the cache only when the lock is held."""
    from interfaces.adapters.signers import KeypairFeePayers
    from tests.unit.application.test_payments import CLIENT, FEE_PAYER, FakeChain, FakeChains, FakeClock, payment

    sent: list[str] = []
    execute = client.execute_command
    client.execute_command = lambda *args, **options: sent.append(str(args[0])) or execute(*args, **options)
    payments = Payments({"PERSISTENCE_MODULE": "eventsourcing.popo"}, chains=FakeChains(FakeChain()),
                        fee_payers=KeypairFeePayers([FEE_PAYER]), locks=RedisLocks(client, renew_seconds=3600),
                        cache=RedisResultCache(client), clock=FakeClock())
    assert payments.settle(CLIENT, *payment()).success  # loads the release script into Redis once
    payload, requirements = payment()
    sent.clear()
    assert payments.verify(CLIENT, payload, requirements).is_valid and sent == []
    assert payments.settle(CLIENT, payload, requirements).success and sent == ["SET", "EVALSHA"]


def test_the_cache_projection_writes_exactly_what_payments_replays(tmp_path: Path, sandbox, postgres_url, redis_url,
                                                                    client):
    g = make_gateway(tmp_path, sandbox, database_url=postgres_url, redis_url=redis_url)
    try:
        poor = Keypair()
        sandbox.mint_usdc(str(poor.pubkey()), 1)
        chain = g.container.chains.by_network[DEVNET.caip2]
        send = chain.send
        bodies = {
            "approved then confirmed": g.body(),
            "simulation failed": g.body(g.transaction(payer=poor)),
            "recipient mismatch, then settled": g.body(g.transaction(pay_to=Keypair().pubkey())),
            "settled, submission failed": g.body(amount=USDC // 50),
        }
        assert g.post("/verify", bodies["approved then confirmed"]).status_code == 200
        assert g.post("/settle", bodies["approved then confirmed"]).status_code == 200
        assert g.post("/verify", bodies["simulation failed"]).json["invalidReason"] == Code.SIMULATION_FAILED
        assert g.post("/verify", bodies["recipient mismatch, then settled"]).status_code == 400
        assert g.post("/settle", bodies["recipient mismatch, then settled"]).status_code == 400

        def send_late(transaction: bytes, **flags: bool) -> str:
            sandbox.advance(200)  # the blockhash expires between simulation and broadcast
            return send(transaction, **flags)

        chain.send = send_late
        assert g.post("/settle", bodies["settled, submission failed"]).json["errorReason"] == Code.SUBMISSION_FAILED
        chain.send = send

        # Only the projection fills the Redis cache: nothing is cached yet.
        assert list(client.scan_iter("paywarden:result:*")) == []
        view = RedisResultCacheView(client)
        # 4 Received, 2 Approved, 2 Rejected, 1 Confirmed, 2 Failed (SettlementSubmitted is not its topic)
        assert catch_up(g.container.payments, ResultCacheProjection(view)) == 11
        assert catch_up(g.container.payments, ResultCacheProjection(RedisResultCacheView(client))) == 0

        # The projection writes what the application's own rule (terminal_entries) says, and nothing else:
        # a settled payment's success and the duplicate_settlement of its verifies, rejections, failures; an
        # approval that may still be settled is not final, so it is not cached.
        payments, expected = g.container.payments, {}
        for body in bodies.values():
            payment = payments.get_payment(key_of(g, body))
            for operation, entry in terminal_entries(payment).items():
                expected[result_key(payment.idempotency_key, operation)] = entry
        cached = {key.decode(): RedisResultCache(client).get(*_split(key.decode()))
                  for key in client.scan_iter("paywarden:result:*")}
        assert cached == expected and len(cached) == 6

        # A verify takes no lock and reads no cache (docs/facilitator.md): the event store answers it, as recorded.
        settled = bodies["approved then confirmed"]
        assert g.post("/verify", settled).json["invalidReason"] == Code.DUPLICATE_SETTLEMENT
        for name in ("simulation failed", "recipient mismatch, then settled"):
            replay = g.post("/verify", bodies[name])
            assert replay.headers.get("Idempotent-Replayed") == "true"
        # A duplicate settle that finds its payment's lock held is answered from the cache alone: the event store is
        # not even asked.
        with ExitStack() as held:
            for body in bodies.values():
                assert held.enter_context(payments._locks.hold(key_of(g, body), 30))
            payments.repository.get = _no_event_store
            assert g.post("/settle", settled).json["errorReason"] == Code.DUPLICATE_SETTLEMENT
            for name in ("recipient mismatch, then settled", "settled, submission failed"):
                replay = g.post("/settle", bodies[name])
                assert replay.status_code == 400 and replay.headers.get("Idempotent-Replayed") == "true"
    finally:
        g.container.close()


def _no_event_store(*_, **__):
    raise AssertionError("a cached result must not read the event store")


def _split(key: str) -> tuple[str, str]:
    _, _, operation, idempotency_key = key.split(":")
    return idempotency_key, operation


def test_a_batch_of_the_cache_projection_is_one_script_all_or_nothing(client, monkeypatch):
    """The runner applies a batch of notifications at a time: the Redis view keeps its writes in memory (a payment's
    facts are read there first) and one script writes them with the last position, refusing the whole batch when
    another runner applied its first notification already."""
    view = RedisResultCacheView(client)
    view.record(Tracking("warm-up", 1))  # the script loaded once, before counting
    sent: list[str] = []
    execute = client.execute_command
    monkeypatch.setattr(client, "execute_command", lambda *args, **kw: sent.append(args[0]) or execute(*args, **kw))

    with view.batch(Tracking("payments", 5), Tracking("payments", 7)):
        view.record(Tracking("payments", 5), payment_id="p1", payment={"state": "RECEIVED"})
        assert view.payment("p1") == {"state": "RECEIVED"}  # from the batch: no read
        view.record(Tracking("payments", 6), payment_id="p1", payment={"state": "APPROVED"})
        view.record(Tracking("payments", 7), payment_id="p2", payment={"state": "FAILED"},
                    results={("key-2", "settle"): {"outcome": "failed"}})
    assert sent == ["EVALSHA"]
    assert view.max_tracking_id("payments") == 7
    assert view.payment("p1") == {"state": "APPROVED"} and view.payment("p2") == {"state": "FAILED"}
    assert RedisResultCache(client).get("key-2", "settle") == {"outcome": "failed"}

    with pytest.raises(IntegrityError), view.batch(Tracking("payments", 7), Tracking("payments", 8)):
        view.record(Tracking("payments", 7), payment_id="p3", payment={"state": "RECEIVED"})
        view.record(Tracking("payments", 8), payment_id="p3", payment={"state": "APPROVED"})
    with pytest.raises(RuntimeError), view.batch(Tracking("payments", 8), Tracking("payments", 9)):
        view.record(Tracking("payments", 8), payment_id="p4", payment={"state": "RECEIVED"})
        raise RuntimeError("the projection failed mid-batch")
    assert view.max_tracking_id("payments") == 7
    assert view.payment("p3") is None and view.payment("p4") is None


def test_rate_limits_on_redis_are_shared_by_every_process_and_the_window_resets(redis_url):
    from interfaces.http.common.ratelimit import RateLimited, RateLimiter

    # Two limiters on one Redis: two worker processes, or two hosts.
    first, second = (RateLimiter(redis_url, "2/second", "60/minute") for _ in range(2))
    first.check_key("merchant:acme", None)
    second.check_key("merchant:acme", None)
    with pytest.raises(RateLimited) as limited:
        first.check_key("merchant:acme", None)
    assert limited.value.retry_after == 1
    second.check_key("merchant:globex", None)  # another key is unaffected

    def allowed() -> bool:
        try:
            second.check_key("merchant:acme", None)
        except RateLimited:
            return False
        return True

    wait_until(allowed, timeout=3, what="the next window")
