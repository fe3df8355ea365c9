"""Issue 39, finding 1: a receiver that trickles its answer one byte a second costs only its own merchant. Two real
`paywarden webhooks` processes, the default settings shortened only in time (timeout 2 s, lease 3 s, a ten-attempt
schedule of seconds; 8 senders each, a merchant's share 2); on SQLite and on PostgreSQL + Redis.

Before: only each read was bounded, so an attempt to the trickler never ended; its lease lapsed after 3 s, the
merchant's share freed up, and its next endpoint took another sender, until the trickler held every sender of both
workers and another merchant's test waited with no attempt."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from application.webhooks import MAX_ENDPOINTS
from domain.networks import KeyEnv
from interfaces.config import Config
from interfaces.container import build
from interfaces.runtime.webhook_worker import merchant_share
from interfaces.wiring import webhook_service
from tests.integration.test_webhook_worker_process import start_worker
from tests.webhook_receiver import start_trickler

TIMEOUT, LEASE = 2.0, 3.0
SENDERS = 8  # each worker's, the default


@pytest.fixture(params=["sqlite", "postgres+redis"])
def stores(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite":
        return {"database_url": "", "redis_url": ""}
    return {"database_url": request.getfixturevalue("postgres_url"), "redis_url": request.getfixturevalue("redis_url")}


@pytest.mark.slow
def test_a_trickling_receiver_holds_only_its_merchants_share_and_another_merchant_is_served(
        tmp_path, receiver, stores):
    container = build(Config(data_dir=tmp_path, **stores))
    service = webhook_service(container)
    for merchant in ("acme", "beta"):
        container.merchants.register(merchant)
    # acme: every endpoint it may have on a receiver that answers one byte a second, and three events for each
    trickler, listener = start_trickler(pause=1.0)
    acme = [service.create("acme", trickler.url, ["key.revoked"])["id"] for _ in range(MAX_ENDPOINTS)]
    for _ in range(3):
        container.merchants.revoke_key(container.merchants.create_key("acme", KeyEnv.TEST)[1], "acme")
    beta = service.create("beta", receiver.url, ["key.revoked"])
    receiver.secrets.append(beta["secret"])
    env = {**os.environ, "PAYWARDEN_DATA_DIR": str(tmp_path), "PAYWARDEN_DATABASE_URL": stores["database_url"],
           "PAYWARDEN_REDIS_URL": stores["redis_url"], "PAYWARDEN_WEBHOOK_CA_FILE": receiver.ca_file,
           "PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS": str(TIMEOUT), "PAYWARDEN_WEBHOOK_LEASE_SECONDS": str(LEASE),
           "PAYWARDEN_WEBHOOK_SCHEDULE": "0,1,1,1,1,1,1,1,1,1"}
    for name in ("PAYWARDEN_MODE", "PAYWARDEN_WEBHOOK_CONCURRENCY"):
        env.pop(name, None)
    workers = []
    with open(tmp_path / "workers.log", "ab") as log:
        try:
            workers = [start_worker(env, log) for _ in range(2)]
            # as many requests to the trickler as both workers have senders: before, every sender was then stuck on
            # it; now each of those attempts was cut at the timeout and retried, two at a time at most
            deadline = time.monotonic() + 90
            while trickler.requests < 2 * SENDERS and time.monotonic() < deadline:
                time.sleep(0.1)
            assert trickler.requests >= 2 * SENDERS, (tmp_path / "workers.log").read_text()[-3000:]
            queued = time.monotonic()
            service.test("beta", beta["id"])
            [arrived] = receiver.wait_for(1, timeout=30)
            waited = arrived.at - queued
            stuck = trickler.most_open
        finally:
            stopped_at = time.time()
            trickler.stopping.set()  # before: the senders stuck on it kept the workers from stopping
            listener.close()
            for worker in workers:
                worker.terminate()
            for worker in workers:
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait(10)
    print(f"beta waited {waited:.2f} s; the trickler held {stuck} senders at once")
    assert arrived.payload["type"] == "webhook.test"
    assert waited < 3.0, f"beta's test waited {waited:.1f} s"
    # acme never held more than its share of the senders, counted over both workers
    assert stuck <= merchant_share(SENDERS), (tmp_path / "workers.log").read_text()[-5000:]
    # and every attempt to the trickler ended at the timeout, as a failed attempt to be retried (until the test
    # stopped the trickler: then its connections closed)
    attempts = [a for endpoint in acme for d in service.deliveries("acme", endpoint) for a in d["attempts"]
                if a["at"] < stopped_at - 1]
    assert len(attempts) >= 4
    assert all(a["status"] is None and a["outcome"] == "retry" and "timed out" in a["error"] for a in attempts)
    assert max(a["latencyMs"] for a in attempts) < (TIMEOUT + 0.5) * 1000
    container.close()
