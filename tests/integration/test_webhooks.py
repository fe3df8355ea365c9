"""Webhooks end to end inside one process: real payments on the sandbox chain, the outbox projections, the delivery
worker, and a real HTTPS receiver that verifies every delivery with `standardwebhooks`; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from solders.keypair import Keypair

from application.listings import VerifiedPayment
from application.proxy_services import ProxyServices
from application.webhooks import Webhooks
from domain.merchant import merchant_id
from domain.webhook import WebhookError, message_id
from interfaces.adapters.resolver import GetaddrinfoResolver
from interfaces.adapters.sqlite import LeanDatastore
from interfaces.adapters.webhook_sender import post
from interfaces.container import build_secrets, store_env
from interfaces.runtime.webhook_service import ping_message
from interfaces.runtime.webhook_worker import DeliverySettings, DeliveryWorker
from projections.runner import catch_up
from projections.webhook_outbox import PaymentWebhooksProjection
from tests.conftest import Gateway, make_gateway

FAST = (0.0, 0.2, 0.2, 0.2, 0.2)


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest) -> dict[str, str]:
    return {} if request.param == "sqlite" else {"database_url": request.getfixturevalue("postgres_url")}


@pytest.fixture
def gateway(tmp_path, sandbox, stores) -> Gateway:
    gateway = make_gateway(tmp_path, sandbox, **stores)
    yield gateway
    gateway.container.close()


def worker(gateway: Gateway, receiver: Any, **settings: Any) -> DeliveryWorker:
    options = dict(schedule=FAST, timeout_seconds=2.0, lease_seconds=5.0, poll_seconds=0.05,
                   ca_file=receiver.ca_file)
    options.update(settings)
    return DeliveryWorker(gateway.container, DeliverySettings(**options))


def run_until(w: DeliveryWorker, done, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        w.fill_outbox()
        w.deliver_due(wait=True)
        if done():
            return
        time.sleep(0.05)
    raise AssertionError("the worker did not get there in time")


def nothing_pending(gateway: Gateway) -> bool:
    """No delivery is pending in the outbox, so none is scheduled for another attempt (what waiting out the retry
    schedule showed, without the wait)."""
    return gateway.container.webhooks_view.queue_stats(time.time())[0] == 0


def counted_as_the_tables(view: Any) -> tuple[dict[str, int], dict[str, int]]:
    """`counts()` (SQLite: kept by triggers; PostgreSQL: counted) is what counting the tables gives."""
    attempts, deliveries = view.counts()
    assert {k: n for k, n in attempts.items() if n} == dict(view.rows(
        "SELECT outcome, COUNT(*) FROM webhook_attempts GROUP BY outcome"))
    assert {k: n for k, n in deliveries.items() if n} == dict(view.rows(
        "SELECT status, COUNT(*) FROM webhook_deliveries GROUP BY status"))
    return attempts, deliveries


def endpoint(gateway: Gateway, receiver: Any, events: list[str]) -> str:
    created, secret = gateway.container.webhooks.create("acme", receiver.url, events)
    receiver.secrets.append(secret)
    return str(created.id)


def test_a_settle_is_heard_as_approved_submitted_confirmed_in_order_signed_and_public(gateway, receiver):
    endpoint(gateway, receiver, ["payment.approved", "payment.settlement_submitted", "payment.confirmed",
                                 "payment.failed"])
    body = gateway.body()
    settled = gateway.post("/settle", body).json
    assert settled["success"] is True
    w = worker(gateway, receiver)
    run_until(w, lambda: len(receiver.deliveries) >= 3)
    # Every delivery recorded and none pending: no retry or fourth event can come; another round sends nothing.
    assert nothing_pending(gateway)
    w.fill_outbox()
    w.deliver_due(wait=True)
    deliveries = receiver.deliveries
    assert [d.payload["type"] for d in deliveries] == [
        "payment.approved", "payment.settlement_submitted", "payment.confirmed"]
    assert all(d.verified_with == receiver.secrets for d in deliveries)  # standardwebhooks verified each one
    confirmed = deliveries[2].payload["data"]
    assert confirmed["transaction"] == settled["transaction"] and confirmed["payer"] == settled["payer"]
    assert confirmed["amount"] == body["paymentRequirements"]["amount"]
    assert confirmed["payTo"] == body["paymentRequirements"]["payTo"] and confirmed["status"] == "confirmed"
    assert confirmed["network"] == body["paymentRequirements"]["network"]
    for d in deliveries:
        assert body["paymentPayload"]["payload"]["transaction"] not in d.body  # never the transaction bytes
        assert "whsec_" not in d.body and len(d.body.encode()) < 20 * 1024
        assert d.headers["webhook-id"].startswith("msg_") and d.headers["content-type"] == "application/json"
    # The webhook-id is derived from the event: the confirmed event's (originator, version) gives the same one.
    payment = gateway.container.payments.repository.get(_uuid(confirmed["id"]))
    assert deliveries[2].headers["webhook-id"] == message_id(payment.id, payment.version)


def _uuid(text: str) -> UUID:
    return UUID(text)


def test_a_receiver_failing_twice_gets_the_event_three_times_then_never_again(gateway, receiver):
    endpoint_id = endpoint(gateway, receiver, ["payment.approved"])
    receiver.answer(500, 500)
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    w = worker(gateway, receiver)
    run_until(w, lambda: len(receiver.deliveries) >= 3)
    assert nothing_pending(gateway)  # the third answer was recorded: no retry is scheduled, nothing more may come
    for _ in range(5):
        w.fill_outbox()
        w.deliver_due(wait=True)
    assert len(receiver.deliveries) == 3
    assert len({d.headers["webhook-id"] for d in receiver.deliveries}) == 1
    assert len({d.headers["webhook-timestamp"] for d in receiver.deliveries}) >= 1
    [delivery] = gateway.container.webhooks_view.list_deliveries(endpoint_id)
    assert delivery["status"] == "delivered"
    assert [(a["status"], a["outcome"]) for a in delivery["attempts"]] == [
        (500, "retry"), (500, "retry"), (200, "delivered")]
    assert all(a["latencyMs"] >= 0 for a in delivery["attempts"]) and "try later" in delivery["attempts"][0]["response"]


def test_a_receiver_that_always_fails_is_tried_on_the_whole_schedule_then_failed(gateway, receiver):
    endpoint_id = endpoint(gateway, receiver, ["payment.approved"])
    receiver.answer(*([503] * 10))
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    w = worker(gateway, receiver)
    run_until(w, lambda: gateway.container.webhooks_view.list_deliveries(endpoint_id)[0]["status"] == "failed")
    assert len(receiver.deliveries) == len(FAST)
    assert gateway.container.webhooks_view.queue_stats(time.time())[0] == 0
    attempts, deliveries = counted_as_the_tables(gateway.container.webhooks_view)
    assert attempts == {"retry": len(FAST) - 1, "failed": 1} and deliveries["failed"] == 1


def test_a_410_disables_the_endpoint_and_nothing_more_is_sent_to_it(gateway, receiver):
    endpoint_id = endpoint(gateway, receiver, ["payment.approved", "payment.rejected"])
    receiver.answer(410)
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    w = worker(gateway, receiver)
    run_until(w, lambda: not gateway.container.webhooks_view.get_endpoint(endpoint_id).enabled)
    aggregate = gateway.container.webhooks.get_endpoint(endpoint_id, "acme")
    assert aggregate.enabled is False and "410" in aggregate.disabled_reason
    assert gateway.container.webhooks_view.list_deliveries(endpoint_id)[0]["status"] == "failed"
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True  # a second event
    for _ in range(5):
        w.fill_outbox()
        w.deliver_due(wait=True)
    assert len(receiver.deliveries) == 1
    counted_as_the_tables(gateway.container.webhooks_view)


def test_a_hanging_receiver_hits_the_timeout_and_is_retried(gateway, receiver):
    endpoint_id = endpoint(gateway, receiver, ["payment.approved"])
    receiver.answer((200, 3.0))  # answers only after 3 s
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    w = worker(gateway, receiver, timeout_seconds=0.5)
    started = time.monotonic()
    run_until(w, lambda: gateway.container.webhooks_view.list_deliveries(endpoint_id)[0]["status"] == "delivered")
    first, second = gateway.container.webhooks_view.list_deliveries(endpoint_id)[0]["attempts"]
    assert first["status"] is None and "timed out" in first["error"] and 400 <= first["latencyMs"] < 2000
    assert second["status"] == 200 and time.monotonic() - started < 3.0


def test_rotation_signs_with_both_secrets_during_the_overlap(gateway, receiver):
    endpoint_id = endpoint(gateway, receiver, ["payment.approved"])
    old = receiver.secrets[0]
    new = gateway.container.webhooks.rotate(endpoint_id, "acme")
    assert new != old and new.startswith("whsec_")
    receiver.secrets.append(new)
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    run_until(worker(gateway, receiver), lambda: len(receiver.deliveries) >= 1)
    [delivery] = receiver.deliveries
    assert delivery.headers["webhook-signature"].count("v1,") == 2
    assert delivery.verified_with == [old, new]


def test_the_test_event_resend_and_replay_of_failures(gateway, receiver):
    endpoint_id = endpoint(gateway, receiver, ["payment.approved"])
    view = gateway.container.webhooks_view
    receiver.answer(*([500] * len(FAST)))
    w = worker(gateway, receiver)
    w.sync_endpoints()
    since = time.time()
    msg_id, body = ping_message(view.get_endpoint(endpoint_id), since)
    view.enqueue_test(view.get_endpoint(endpoint_id), body, msg_id, since)
    run_until(w, lambda: view.list_deliveries(endpoint_id)[0]["status"] == "failed")
    assert receiver.deliveries[0].payload["type"] == "webhook.test"
    assert counted_as_the_tables(view)[1]["failed"] == 1
    assert view.replay_failed([endpoint_id], since - 1, time.time()) == 1
    assert {k: n for k, n in counted_as_the_tables(view)[1].items() if n} == {"pending": 1}
    run_until(w, lambda: view.list_deliveries(endpoint_id)[0]["status"] == "delivered")
    assert view.resend(endpoint_id, msg_id, time.time()) is True
    run_until(w, lambda: len(receiver.deliveries) == len(FAST) + 2)
    assert {d.headers["webhook-id"] for d in receiver.deliveries} == {msg_id}
    attempts, deliveries = counted_as_the_tables(view)
    assert attempts["delivered"] == 2 and {k: n for k, n in deliveries.items() if n} == {"delivered": 1}


def test_two_workers_never_send_one_attempt_twice(gateway, receiver):
    endpoint(gateway, receiver, ["payment.approved"])
    view = gateway.container.webhooks_view
    receiver.answer(*[(200, 0.05)] * 20)
    a, b = worker(gateway, receiver), worker(gateway, receiver)
    a.sync_endpoints()
    for _ in range(20):
        now = time.time()
        msg_id, body = ping_message(view.list_endpoints("acme")[0], now)
        view.enqueue_test(view.list_endpoints("acme")[0], body, msg_id, now)
    threads = [threading.Thread(target=lambda x=x: [x.deliver_due(wait=True) for _ in range(30)]) for x in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [d.headers["webhook-id"] for d in receiver.deliveries]
    assert len(ids) == 20 and len(set(ids)) == 20


def test_production_refuses_an_endpoint_on_a_private_address(gateway, receiver):
    production = Webhooks(None, cipher=_Clear(), resolver=GetaddrinfoResolver(), production=True)
    for url in ("https://127.0.0.1/hook", "https://10.1.2.3/hook", "https://169.254.169.254/latest",
                "https://localhost/hook", receiver.url, "http://hooks.example.com/"):
        with pytest.raises(WebhookError) as refused:
            production.create("acme", url, ["payment.approved"])
        assert refused.value.code in ("private_address", "https_required")
    with pytest.raises(WebhookError) as refused:  # a public-looking name that resolves to a private address
        Webhooks(None, cipher=_Clear(), resolver=_Resolves("10.0.0.7"), production=True).create(
            "acme", "https://hooks.acme.com/x", ["payment.approved"])
    assert refused.value.code == "private_address"
    # At delivery time too: the worker resolves again and refuses before connecting.
    answer = post(receiver.url, b"{}", {}, timeout=1.0, production=True, resolver=GetaddrinfoResolver(),
                  ca_file=receiver.ca_file)
    assert answer.status is None and answer.error.startswith("refused") and receiver.deliveries == []


class _Clear:
    def seal(self, plaintext: str) -> str:
        return plaintext

    def open(self, sealed: str) -> str:
        return sealed


class _Resolves:
    def __init__(self, address: str) -> None:
        self.address = address

    def resolve(self, hostname: str) -> list[str]:
        return [self.address]


def test_secrets_are_sealed_in_the_event_store(gateway, receiver):
    endpoint_id = endpoint(gateway, receiver, ["payment.approved"])
    secret = receiver.secrets[0]
    stored = gateway.container.webhooks.recorder.select_events(_uuid(endpoint_id))
    assert stored and all(secret.encode() not in e.state and secret.removeprefix("whsec_").encode() not in e.state
                          for e in stored)
    assert json.dumps(gateway.container.webhooks_view.list_endpoints("acme")[0].public()).find("whsec_") == -1


class Crash(Exception):
    pass


class CrashingPaymentWebhooksProjection(PaymentWebhooksProjection):
    def _enqueue(self, c, e, merchant, kind, data) -> int:
        super()._enqueue(c, e, merchant, kind, data)
        raise Crash  # after writing the message and its deliveries, before the transaction commits


def test_each_event_is_enqueued_exactly_once_per_subscribed_endpoint_even_after_a_crash(gateway, receiver):
    first = endpoint(gateway, receiver, ["payment.approved"])
    second = endpoint(gateway, receiver, ["payment.approved", "payment.rejected"])
    other = endpoint(gateway, receiver, ["payment.confirmed"])
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    late = endpoint(gateway, receiver, ["payment.approved"])  # created after the event: does not hear it
    container, view = gateway.container, gateway.container.webhooks_view
    with pytest.raises(Crash):
        catch_up(container.payments, CrashingPaymentWebhooksProjection(view))
    assert all(view.list_deliveries(e) == [] for e in (first, second, other, late))  # the crash left nothing
    # Received and Approved: the crash rolled back the whole batch they were read in (projections/runner.py)
    assert catch_up(container.payments, PaymentWebhooksProjection(view)) == 2
    assert catch_up(container.payments, PaymentWebhooksProjection(view)) == 0
    assert [len(view.list_deliveries(e)) for e in (first, second, other, late)] == [1, 1, 0, 0]
    assert view.list_deliveries(first)[0]["id"] == view.list_deliveries(second)[0]["id"]
    assert view.queue_stats(time.time())[0] == 2


def test_a_429_with_retry_after_is_not_retried_sooner_than_asked(gateway, receiver):
    endpoint(gateway, receiver, ["payment.approved"])
    receiver.answer((429, 0.0, {"Retry-After": "1"}))
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    run_until(worker(gateway, receiver), lambda: len(receiver.deliveries) >= 2)
    first, second = receiver.deliveries
    assert second.at - first.at >= 1.0  # the schedule alone would have retried after 0.2 s
    assert first.headers["webhook-id"] == second.headers["webhook-id"]


def test_a_rejected_payment_is_heard_with_its_reason(gateway, receiver):
    endpoint(gateway, receiver, ["payment.rejected"])
    rejected = gateway.post("/verify", gateway.body(gateway.transaction(pay_to=Keypair().pubkey()))).json
    assert rejected["isValid"] is False
    run_until(worker(gateway, receiver), lambda: len(receiver.deliveries) >= 1)
    [delivery] = receiver.deliveries
    data = delivery.payload["data"]
    assert delivery.payload["type"] == "payment.rejected" and data["status"] == "rejected"
    assert data["reason"] == rejected["invalidReason"] and data["message"]
    assert delivery.verified_with == receiver.secrets


def test_a_listing_registered_for_the_merchant_is_heard(gateway, receiver):
    endpoint(gateway, receiver, ["listing.registered", "listing.updated"])
    info = {"title": "Weather", "tags": ["weather"], "type": "http"}
    gateway.container.listings.register_from_payment(VerifiedPayment(
        uuid4(), f"merchant:{merchant_id('acme')}", {"bazaar": {"info": info}},
        {"url": "http://localhost:8080/weather"}, "solana:devnet", "MINT", 10_000, "WALLET", datetime.now(UTC)))
    run_until(worker(gateway, receiver), lambda: len(receiver.deliveries) >= 1)
    [delivery] = receiver.deliveries
    assert delivery.payload["type"] == "listing.registered"
    assert delivery.payload["data"]["resource"] == "http://localhost:8080/weather"  # the sandbox lists loopback URLs
    assert delivery.payload["data"]["method"] == "GET" and delivery.verified_with == receiver.secrets


def test_a_deactivated_proxy_service_is_heard(gateway, receiver):
    container = gateway.container
    container.proxies.close()
    container.proxies = ProxyServices(store_env(container.config, "proxy_services"), merchants=container.merchants,
                                      secrets=build_secrets(container.config), sandbox=True,
                                      domains=lambda merchant: {"backend.test"})
    endpoint(gateway, receiver, ["service.deactivated"])
    service = container.proxies.create_service("acme", "Weather", "backend.test", subdomain="api")
    container.proxies.set_active("acme", str(service.id), False)
    run_until(worker(gateway, receiver), lambda: len(receiver.deliveries) >= 1)
    [delivery] = receiver.deliveries
    assert delivery.payload["type"] == "service.deactivated" and delivery.verified_with == receiver.secrets
    assert delivery.payload["data"] == {"id": str(service.id), "name": "Weather", "slug": service.slug,
                                        "status": "deactivated"}


def test_a_database_made_before_the_counts_gets_them_from_its_tables(tmp_path):
    """An embedded outbox written before the counts existed: they are filled from its rows once, when the view is
    made, and kept from then on."""
    from projections.webhooks import SqliteWebhooksView

    def view() -> SqliteWebhooksView:
        made = SqliteWebhooksView(LeanDatastore(str(tmp_path / "webhooks.db")))
        made.create_table()
        return made

    old = view()
    with old.datastore.transaction(commit=True) as c:
        for name in ("webhook_attempt_counted", "webhook_delivery_counted", "webhook_delivery_recounted",
                     "webhook_delivery_uncounted"):
            c.execute(f"DROP TRIGGER {name}")
        c.execute("DROP TABLE webhook_counts")
        for i, status in enumerate(["delivered", "delivered", "failed", "pending"]):
            c.execute("INSERT INTO webhook_deliveries VALUES (?, 'ep', ?, 1, 0, NULL, NULL, 0, NULL)",
                      (f"m{i}", status))
            c.execute("INSERT INTO webhook_attempts VALUES (?, ?, 'ep', 0, 200, ?, 1, '', '', 0)",
                      (f"a{i}", f"m{i}", "delivered" if status == "delivered" else "retry"))
    old.datastore.close()
    again = view()
    assert counted_as_the_tables(again) == ({"delivered": 2, "retry": 2}, {"delivered": 2, "failed": 1, "pending": 1})
    with again.datastore.transaction(commit=True) as c:
        c.execute("UPDATE webhook_deliveries SET status = 'delivered' WHERE msg_id = 'm3'")
        c.execute("DELETE FROM webhook_deliveries WHERE msg_id = 'm2'")
    assert counted_as_the_tables(again)[1] == {"delivered": 3, "failed": 0, "pending": 0}
    again.datastore.close()
    assert counted_as_the_tables(view())[1]["delivered"] == 3  # made again: filled once only, not twice
