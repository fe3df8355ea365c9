"""The delivery worker through outages: PostgreSQL cut mid-run (through a TCP proxy) and Redis stopped. Nothing is
lost: every event is delivered once the database is back, a duplicate only with the same `webhook-id`."""

from __future__ import annotations

import logging
import threading

import pytest

from domain.networks import KeyEnv
from domain.webhook import message_id
from interfaces.config import Config
from interfaces.container import build
from interfaces.runtime.webhook_worker import DeliverySettings, DeliveryWorker
from tests.faults import PrivateRedis, TcpProxy, wait_until
from tests.webhook_receiver import start_receiver

EVENTS = 12


def store_failures(caplog: pytest.LogCaptureFixture) -> int:
    """What the delivery worker logged as failed: an attempt it could not record, or a round of its loop."""
    return sum(r.name == "paywarden.webhooks" and r.levelno >= logging.ERROR for r in caplog.records)


@pytest.mark.postgres
@pytest.mark.redis
def test_postgres_cut_and_redis_stopped_mid_run_lose_no_event(tmp_path, postgres_url, caplog):
    host_port, dbname = postgres_url.split("@", 1)[1].split("/", 1)
    host, port = host_port.split(":")
    receiver, server = start_receiver(tmp_path)
    with TcpProxy(host, int(port)) as proxy, PrivateRedis(tmp_path) as redis_server:
        container = build(Config(data_dir=tmp_path, database_url=f"postgresql://postgres@127.0.0.1:{proxy.port}/"
                                 f"{dbname}", redis_url=redis_server.url, database_timeout_seconds=1))
        stop = threading.Event()
        try:
            container.merchants.register("acme")
            endpoint, secret = container.webhooks.create("acme", receiver.url, ["key.revoked"])
            receiver.secrets.append(secret)
            prefixes = [container.merchants.create_key("acme", KeyEnv.TEST)[1] for _ in range(EVENTS)]
            for prefix in prefixes:
                container.merchants.revoke_key(prefix, "acme")
            merchant = container.merchants.get_merchant("acme")
            expected = {message_id(merchant.id, v) for v in range(EVENTS + 2, 2 * EVENTS + 2)}
            receiver.answer(*[(200, 0.2)] * (3 * EVENTS))
            redis_server.stop()  # the worker needs no Redis
            worker = DeliveryWorker(container, DeliverySettings(schedule=(0, 0.2, 0.2, 0.2, 0.2, 0.2),
                                                                timeout_seconds=2, lease_seconds=3, concurrency=2,
                                                                poll_seconds=0.05, ca_file=receiver.ca_file))
            thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
            thread.start()
            receiver.wait_for(3, timeout=30)
            failed_before = store_failures(caplog)
            proxy.cut()  # PostgreSQL gone mid-run: attempts finish but cannot be recorded
            at_cut = len(receiver.deliveries)
            # The worker has met the outage (an attempt it could not record, or a round that could not reach the
            # database), instead of a fixed wait: from then on it can claim nothing.
            wait_until(lambda: store_failures(caplog) > failed_before, timeout=30,
                       what="the worker failing on the cut database")
            assert len(receiver.deliveries) <= at_cut + 2  # nothing more is claimed while the database is down
            proxy.restore()
            wait_until(lambda: {d.headers["webhook-id"] for d in receiver.deliveries} >= expected, timeout=60,
                       what="every event delivered after the outage")
            wait_until(lambda: {d["status"] for d in container.webhooks_view.list_deliveries(str(endpoint.id), 100)}
                       == {"delivered"}, timeout=30, what="every delivery recorded as delivered")
        finally:
            stop.set()
            container.close()
            server.shutdown()
            server.server_close()
    ids = [d.headers["webhook-id"] for d in receiver.deliveries]
    assert set(ids) == expected and at_cut < EVENTS
    assert all(d.verified_with == [secret] for d in receiver.deliveries)
    bodies: dict[str, str] = {}
    assert all(bodies.setdefault(d.headers["webhook-id"], d.body) == d.body for d in receiver.deliveries)
