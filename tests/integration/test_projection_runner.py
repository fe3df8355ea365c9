"""The applications can be built as eventsourcing's own runners build them, `App(env)`: a `ProjectionRunner` of
the payments list follows a live gateway's Payments on PostgreSQL (the store with subscriptions), and an
application built from its environment alone reads its log and refuses, safely, what it has no adapter for."""

from __future__ import annotations

from pathlib import Path

from eventsourcing.projection import ProjectionRunner

from application.listings import Listings
from application.merchants import Merchants
from application.payments import Payments
from application.proxy_services import ProxyServices
from application.webhooks import Webhooks
from domain.clients import ANONYMOUS_ID, Client
from domain.codes import Code
from domain.x402 import PaymentPayload, Requirements
from interfaces.container import store_env
from projections.payment_list import PaymentListProjection, PostgresPaymentListView
from tests.conftest import make_gateway
from tests.integration.test_facilitator_http import key_of


def test_a_projection_runner_builds_payments_from_its_environment_and_follows_it(tmp_path: Path, sandbox,
                                                                                  postgres_url):
    g = make_gateway(tmp_path, sandbox, database_url=postgres_url)
    env = store_env(g.container.config, "payments")
    try:
        with ProjectionRunner(application_class=Payments, projection_class=PaymentListProjection,
                              view_class=PostgresPaymentListView, env=env) as runner:
            body = g.body()
            assert g.post("/settle", body).json["success"] is True
            payment = g.container.payments.get_payment(key_of(g, body))
            runner.wait(g.container.payments.recorder.max_notification_id(), timeout=20)
            row = runner.view.get_payment(str(payment.id))
            assert row is not None and row.state == "CONFIRMED"
    finally:
        g.container.close()


def test_every_application_is_built_from_its_environment_alone_and_serves_nothing_it_cannot(tmp_path: Path):
    env = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
    for application in (Payments, Listings, Merchants, ProxyServices, Webhooks):
        application(env).close()
    payments = Payments(env)
    payload, requirements = PaymentPayload(transaction="AA=="), Requirements(
        "exact", "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", 1000, "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
        "11111111111111111111111111111111")
    refused = payments.verify(Client(id=ANONYMOUS_ID, registered=False), payload, requirements)
    assert not refused.is_valid and refused.invalid_reason == Code.INVALID_NETWORK
