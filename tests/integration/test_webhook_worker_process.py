"""`paywarden webhooks` as a real process: killed with SIGKILL in the middle of delivering, then restarted, it
delivers every event (a duplicate only as at-least-once allows, with the same `webhook-id`); on SQLite and
PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from domain.networks import KeyEnv
from domain.webhook import message_id
from interfaces.config import Config
from interfaces.container import build

EVENTS = 30


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    return "" if request.param == "sqlite" else request.getfixturevalue("postgres_url")


def start_worker(env: dict[str, str], log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "interfaces.cli.main", "webhooks"], env=env, stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_the_worker_killed_mid_run_and_restarted_delivers_every_event(tmp_path, receiver, database_url):
    config = Config(data_dir=tmp_path, database_url=database_url)
    container = build(config)
    container.merchants.register("acme")
    endpoint, secret = container.webhooks.create("acme", receiver.url, ["key.revoked"])
    receiver.secrets.append(secret)
    prefixes = [container.merchants.create_key("acme", KeyEnv.TEST)[1] for _ in range(EVENTS)]
    for prefix in prefixes:
        container.merchants.revoke_key(prefix, "acme")
    merchant = container.merchants.get_merchant("acme")
    expected = {message_id(merchant.id, v) for v in range(EVENTS + 2, 2 * EVENTS + 2)}  # the KeyRevoked versions
    assert len(expected) == EVENTS
    receiver.answer(*[(200, 0.15)] * (3 * EVENTS))  # a slow receiver: the kill lands mid-run
    env = {**os.environ, "PAYWARDEN_DATA_DIR": str(tmp_path), "PAYWARDEN_DATABASE_URL": database_url,
           "PAYWARDEN_WEBHOOK_CA_FILE": receiver.ca_file, "PAYWARDEN_WEBHOOK_SCHEDULE": "0,0.2,0.2,0.2",
           "PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS": "2", "PAYWARDEN_WEBHOOK_LEASE_SECONDS": "3",
           "PAYWARDEN_WEBHOOK_CONCURRENCY": "4"}
    env.pop("PAYWARDEN_REDIS_URL", None)
    env.pop("PAYWARDEN_MODE", None)
    with open(tmp_path / "worker.log", "ab") as log:
        worker = start_worker(env, log)
        try:
            receiver.wait_for(8, timeout=60)
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
            at_kill = len(receiver.deliveries)
            assert at_kill < EVENTS  # it really was killed mid-run
            worker = start_worker(env, log)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if {d.headers["webhook-id"] for d in receiver.deliveries} >= expected:
                    break
                time.sleep(0.1)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(20)
    ids = [d.headers["webhook-id"] for d in receiver.deliveries]
    assert set(ids) == expected, (tmp_path / "worker.log").read_text()[-3000:]
    assert len(ids) - len(set(ids)) <= 4  # at most the batch in flight at the kill was sent twice
    assert all(d.verified_with == [secret] for d in receiver.deliveries)
    for d in receiver.deliveries:  # a duplicate is the same event: same id, same body
        assert d.payload["type"] == "key.revoked" and d.payload["data"]["merchant"] == "acme"
    by_id = {}
    for d in receiver.deliveries:
        assert by_id.setdefault(d.headers["webhook-id"], d.body) == d.body
    assert {d.payload["data"]["prefix"] for d in receiver.deliveries} == set(prefixes)
    statuses = {d["status"] for d in container.webhooks_view.list_deliveries(str(endpoint.id), limit=100)}
    assert statuses == {"delivered"}
    container.close()
