"""Issue 27, finding 4: one merchant cannot stall another's webhooks. A per-merchant share of the delivery worker,
a cap on endpoints per merchant and a limit on test events; on SQLite and on PostgreSQL + Redis."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from application.webhooks import MAX_ENDPOINTS
from domain.webhook import WebhookError
from interfaces.runtime.webhook_worker import DeliverySettings, DeliveryWorker, load_settings
from interfaces.wiring import webhook_service
from tests.conftest import make_gateway
from tests.services import POLL

SLOW_SECONDS = 3.0


@pytest.fixture(params=["embedded", "postgres+redis"])
def gateway(request, tmp_path, sandbox):
    options = {} if request.param == "embedded" else {
        "database_url": request.getfixturevalue("postgres_url"), "redis_url": request.getfixturevalue("redis_url")}
    gateway = make_gateway(tmp_path, sandbox, **options)
    gateway.container.merchants.register("beta")
    yield gateway
    gateway.container.close()


@pytest.fixture
def slow_receiver():
    """Plain HTTP on 127.0.0.1 (the sandbox allows it) answering 200 after SLOW_SECONDS, counting what it got."""
    got: list[float] = []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            got.append(time.monotonic())
            time.sleep(SLOW_SECONDS)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    server.shutdown()
    server.server_close()


def test_another_merchants_delivery_arrives_in_seconds_while_one_has_dozens_of_slow_ones_queued(
        gateway, slow_receiver, receiver):
    slow_url, slow_got = slow_receiver
    container, service = gateway.container, webhook_service(gateway.container)
    for _ in range(MAX_ENDPOINTS):  # acme: as many endpoints as allowed, all on a receiver taking 3 s a request
        service.create("acme", slow_url, ["payment.approved", "payment.rejected"])
    for _ in range(4):  # 40 deliveries to slow receivers: two minutes of sending for 8 senders, one at a time
        assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    beta = service.create("beta", receiver.url, ["payment.approved"])
    receiver.secrets.append(beta["secret"])
    settings = DeliverySettings(schedule=(0, 60), timeout_seconds=SLOW_SECONDS + 2, lease_seconds=120,
                                poll_seconds=0.05, ca_file=receiver.ca_file)
    assert settings.concurrency == 8 and settings.merchant_share == 2
    worker = DeliveryWorker(container, settings)
    worker.fill_outbox()
    assert container.webhooks_view.queue_stats(time.time())[0] == 4 * MAX_ENDPOINTS
    stopping = threading.Event()  # the worker's loop, as `paywarden webhooks` runs it
    loop = threading.Thread(target=worker.run, args=(stopping,), daemon=True)
    loop.start()
    try:
        deadline = time.monotonic() + 10
        while len(slow_got) < 2 and time.monotonic() < deadline:  # acme's deliveries are being sent
            time.sleep(0.02)
        assert len(slow_got) >= 2
        queued = time.monotonic()
        service.test("beta", beta["id"])
        [arrived] = receiver.wait_for(1, timeout=30)
        waited = arrived.at - queued
        assert arrived.payload["type"] == "webhook.test"
        # beta's test waited for no slow receiver of acme's (before the share: 3 s per batch of 8, about 15 s)
        assert waited < 2.0, f"beta's delivery waited {waited:.1f} s"
        # and acme never held more than its share of the senders: two requests per 3 s
        assert len(slow_got) <= 2 * (1 + int((time.monotonic() - slow_got[0]) / SLOW_SECONDS))
    finally:
        stopping.set()
        loop.join(timeout=4 * SLOW_SECONDS)


@pytest.mark.parametrize("gateway", ["embedded"], indirect=True)
def test_one_endpoints_backlog_flows_without_waiting_a_poll_between_groups(gateway, receiver):
    """An endpoint being sent to is not claimed again until its group is done; the loop now wakes when a sender is
    free. Before, a round that found the endpoint busy slept the whole poll (0.5 s): 2 deliveries per 0.5 s,
    however fast the receiver (12 took 2.5-3 s)."""
    container, service = gateway.container, webhook_service(gateway.container)
    endpoint = service.create("acme", receiver.url, ["payment.approved"])
    receiver.secrets.append(endpoint["secret"])
    for _ in range(12):
        assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    settings = DeliverySettings(schedule=(0, 60), timeout_seconds=5, lease_seconds=30, ca_file=receiver.ca_file)
    assert settings.poll_seconds == 0.5 and settings.merchant_share == 2
    worker = DeliveryWorker(container, settings)
    worker.fill_outbox()
    stopping = threading.Event()
    loop = threading.Thread(target=worker.run, args=(stopping,), daemon=True)
    loop.start()
    try:
        arrived = receiver.wait_for(12, timeout=30)
    finally:
        stopping.set()
        loop.join(timeout=10)
    spread = arrived[-1].at - arrived[0].at
    assert spread < 1.5, f"12 deliveries to one fast receiver took {spread:.2f} s"
    assert [d.payload["type"] for d in arrived] == ["payment.approved"] * 12


def test_a_merchant_has_at_most_ten_endpoints(gateway, receiver):
    service = webhook_service(gateway.container)
    made = [service.create("acme", receiver.url, ["payment.approved"]) for _ in range(MAX_ENDPOINTS)]
    with pytest.raises(WebhookError) as refused:
        service.create("acme", receiver.url, ["payment.approved"])
    assert refused.value.code == "too_many_endpoints" and str(MAX_ENDPOINTS) in refused.value.message
    service.create("beta", receiver.url, ["payment.approved"])  # another merchant is not counted against it
    service.delete("acme", made[0]["id"])
    service.create("acme", receiver.url, ["payment.approved"])  # a deleted one frees its place


def test_one_test_event_waits_per_endpoint(gateway, receiver):
    service = webhook_service(gateway.container)
    endpoint = service.create("acme", receiver.url, ["payment.approved"])
    receiver.secrets.append(endpoint["secret"])
    service.test("acme", endpoint["id"])
    with pytest.raises(WebhookError) as refused:
        service.test("acme", endpoint["id"])
    assert refused.value.code == "test_pending"
    worker = DeliveryWorker(gateway.container, DeliverySettings(schedule=(0,), timeout_seconds=2, lease_seconds=5,
                                                                ca_file=receiver.ca_file))
    worker.fill_outbox()
    worker.deliver_due(wait=True)
    receiver.wait_for(1)
    service.test("acme", endpoint["id"])  # delivered: the next may be queued


def test_the_share_follows_the_concurrency():
    assert load_settings({}).merchant_share == 2
    assert load_settings({"PAYWARDEN_WEBHOOK_CONCURRENCY": "1"}).merchant_share == 1
    assert load_settings({"PAYWARDEN_WEBHOOK_CONCURRENCY": "32"}).merchant_share == 8


def test_the_console_answers_the_limits_with_409(gateway, receiver):
    from tests.integration.console_helpers import ApiClient, add_owner, console_client

    add_owner(gateway.container, "acme", "owner@acme.test")
    console = console_client(gateway.container)
    acme = ApiClient(console)
    assert acme.login("owner@acme.test").status_code == 200
    made = [acme.request("POST", "/webhooks", json={"url": receiver.url, "events": ["payment.approved"]})
            for _ in range(MAX_ENDPOINTS + 1)]
    assert [m.status_code for m in made] == [201] * MAX_ENDPOINTS + [409]
    assert made[-1].json["error"] == "too_many_endpoints"
    endpoint_id = made[0].json["id"]
    assert acme.request("POST", f"/webhooks/{endpoint_id}/test").status_code == 202
    again = acme.request("POST", f"/webhooks/{endpoint_id}/test")
    assert again.status_code == 409 and again.json["error"] == "test_pending"
    page = console.simulate_post(f"/webhooks/{endpoint_id}/test", body=f"csrf_token={acme.csrf}",
                                 cookies={"pw_console_session": acme.session},
                                 headers={"Content-Type": "application/x-www-form-urlencoded",
                                          "Sec-Fetch-Site": "same-origin"})
    assert page.status_code == 409 and "still waiting to be delivered" in page.text
