"""Read models that keep a batch's writes in memory and write each row once at its end (the payments list, the
result cache, the webhook outbox) leave exactly the rows that applying every event in its own transaction leaves,
however the events fall into batches; the position is recorded at the batch's two ends. On SQLite and PostgreSQL
(the reference, event by event, is always a SQLite copy fed the same events)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import Tracking
from solders.signature import Signature

import projections.runner as runner
from domain.claims import Claim, ClaimKind
from domain.networks import DEVNET
from domain.payment import Payment
from interfaces.config import Config
from interfaces.container import build_view
from projections.payment_list import PaymentListProjection, SqlitePaymentListView
from projections.results import ResultCacheProjection, SqliteResultCacheView
from projections.runner import catch_up
from projections.webhook_outbox import PaymentWebhooksProjection, WebhookEndpointsProjection
from projections.webhooks import SqliteWebhooksView
from tests.conftest import Gateway, make_gateway

WRITE = re.compile(r"^(INSERT INTO|UPDATE) (\w+)")
KINDS = ["payment.approved", "payment.rejected", "payment.settlement_submitted", "payment.confirmed",
         "payment.failed"]


@pytest.fixture(params=["embedded", "postgres"])
def gateway(request: pytest.FixtureRequest, tmp_path: Path, sandbox: Any) -> Gateway:
    stores = {} if request.param == "embedded" else {"database_url": request.getfixturevalue("postgres_url")}
    gateway = make_gateway(tmp_path / "live", sandbox, **stores)
    yield gateway
    gateway.container.close()


def _address() -> str:
    return str(Signature.from_bytes(os.urandom(64)))[:44]


def _payment(client_id: str, n: int) -> Payment:
    digest = hashlib.sha256(f"{n}".encode() + os.urandom(8)).hexdigest()
    return Payment(idempotency_key=digest, client_id=client_id, network=DEVNET.caip2, asset=DEVNET.usdc_mint,
                   amount=1000 + n, pay_to=_address(), terms_digest=digest,
                   client_signature=str(Signature.from_bytes(os.urandom(64))), extensions={},
                   resource={"url": f"https://shop.example/{n}", "description": "d", "mimeType": "text/plain"},
                   max_timeout_seconds=60, message_hash=digest)


def record_history(gateway: Gateway) -> None:
    """Payments of every shape, their events saved as the facilitator saves them (a verify's Received and
    Approved together, a settle's steps later), interleaved across payments."""
    app, merchant = gateway.container.payments, f"merchant:{gateway.container.merchants.get_merchant('acme').id}"
    payments = [_payment(merchant if n % 5 else "anonymous", n) for n in range(20)]
    for n, p in enumerate(payments):  # the verify of each
        if n % 7 == 3:
            p.reject("insufficient_funds", "the payer's balance is lower than the amount", _address(), {"a": [1]})
        else:
            p.approve(_address(), _address(), _address())
        app.save(p)
    for n, p in enumerate(payments):  # the settle of the approved ones: submitted with its claims
        if p.state.value == "APPROVED" and n % 4:
            p.submit(str(Signature.from_bytes(os.urandom(64))), _address(), _address(), "dHJhbnNhY3Rpb24=")
            app.save(p, Claim(kind=ClaimKind.TRANSACTION, subject=p.message_hash, payment_id=str(p.id)))
    for n, p in enumerate(payments):  # confirmed (answered or not), failed
        if p.state.value == "SUBMITTED":
            if n % 3 == 0:
                p.fail("submission_failed", "the transaction failed on chain")
            else:
                p.confirm(answered=n % 3 == 1, request_key="k1" if n % 3 == 1 else None)
            app.save(p)
    for p in payments:  # a later settle answers the unanswered confirmations
        if p.state.value == "CONFIRMED" and not p.success_answered:
            p.answer_success("k2")
            app.save(p)


def event_by_event(app: Any, projection: Any) -> None:
    """The reference: every event in its own transaction with its own tracking record."""
    for n in app.recorder.select_notifications(start=None, limit=10_000, topics=projection.topics):
        projection.process_event(app.mapper.to_domain_event(n), Tracking(app.name, n.id))


def payment_list_rows(view: Any) -> Any:
    return view.get_rows()


def result_cache_rows(view: Any) -> Any:
    return (sorted(tuple(r) for r in view.rows("SELECT payment_id, facts FROM result_cache_payments")),
            sorted(tuple(r) for r in view.rows("SELECT idempotency_key, operation, entry FROM result_cache_results")))


def outbox_rows(view: Any) -> Any:
    # the delivery rows' times are the moment they were written; every other column is the event's
    return (sorted(tuple(r) for r in view.rows("SELECT subject_id, merchant_id, data FROM webhook_subjects")),
            sorted(tuple(r) for r in view.rows("SELECT msg_id, merchant_id, type, created_at, payload "
                                                "FROM webhook_messages")),
            sorted(tuple(r) for r in view.rows("SELECT msg_id, endpoint_id, status, attempts "
                                                "FROM webhook_deliveries")))


@pytest.mark.parametrize("batch", [1, 2, 3, 7, 500])
def test_batched_read_models_leave_the_rows_of_one_transaction_per_event(gateway, tmp_path, monkeypatch, batch):
    c = gateway.container
    reference = Config(data_dir=tmp_path / "reference")
    c.webhooks.create("acme", "https://hooks.example/paywarden", KINDS)
    catch_up(c.webhooks, WebhookEndpointsProjection(c.webhooks_view))
    record_history(gateway)

    ref_webhooks = build_view(reference, "webhooks", SqliteWebhooksView)
    with ref_webhooks.datastore.transaction(commit=True) as cur:  # the same endpoint, as the live table has it
        for row in c.webhooks_view.rows("SELECT * FROM webhook_endpoints"):
            cur.execute("INSERT INTO webhook_endpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)

    cases = [
        (PaymentListProjection, c.payment_list, build_view(reference, "payment_list", SqlitePaymentListView),
         payment_list_rows),
        (ResultCacheProjection, c.result_cache, build_view(reference, "result_cache", SqliteResultCacheView),
         result_cache_rows),
        (PaymentWebhooksProjection, c.webhooks_view, ref_webhooks, outbox_rows),
    ]
    monkeypatch.setattr(runner, "BATCH", batch)
    for projection_class, live, ref, rows in cases:
        event_by_event(c.payments, projection_class(ref))
        inserts = _count_tracking(live)
        applied = catch_up(c.payments, projection_class(live))
        assert rows(live) == rows(ref), projection_class.__name__
        assert live.max_tracking_id(c.payments.name) == ref.max_tracking_id(c.payments.name)
        batches = -(-applied // batch)
        assert applied > 40 and len(inserts) <= 2 * batches  # the position at a batch's ends, not per event
        ref.datastore.close()
    assert rows(c.webhooks_view)[2]  # the endpoint got deliveries: the fan-out was compared too


def _count_tracking(view: Any) -> list[Tracking]:
    inserts: list[Tracking] = []
    insert = view.record_position

    def counted(cursor: Any, tracking: Tracking) -> None:
        inserts.append(tracking)
        insert(cursor, tracking)

    view.record_position = counted
    return inserts


def test_a_payment_received_and_approved_in_one_batch_is_one_row_written_once(gateway):
    c = gateway.container
    p = _payment(f"merchant:{c.merchants.get_merchant('acme').id}", 1)
    p.approve(_address(), _address(), _address())
    c.payments.save(p)
    statements: list[str] = []
    view = c.payment_list
    transaction = view.datastore.transaction

    def watched(*, commit: bool = False) -> Any:
        return _Watching(transaction(commit=commit), statements)

    view.datastore.transaction = watched
    assert catch_up(c.payments, PaymentListProjection(view)) == 2
    writes = [" ".join(m.groups()) for m in map(WRITE.match, statements) if m]
    assert writes.count("INSERT INTO payment_list") == 1 and "UPDATE payment_list" not in writes
    assert view.get_payment(str(p.id)).state == "APPROVED"
    assert [e.type for e in view.get_timeline(str(p.id))] == ["Payment.Received", "Payment.Approved"]


class _Watching:
    """A transaction whose cursor notes every statement it runs."""

    def __init__(self, inner: Any, statements: list[str]) -> None:
        self._inner, self._statements = inner, statements

    def __enter__(self) -> Any:
        cursor = self._inner.__enter__()
        statements = self._statements

        class Cursor:
            def __getattr__(self, name: str) -> Any:
                return getattr(cursor, name)

            def execute(self, *args: Any, **kwargs: Any) -> Any:
                statements.append(str(kwargs.get("query", args[0] if args else "")))
                return cursor.execute(*args, **kwargs)

            def executemany(self, *args: Any, **kwargs: Any) -> Any:
                statements.append(str(kwargs.get("query", args[0] if args else "")))
                return cursor.executemany(*args, **kwargs)

        return Cursor()

    def __exit__(self, *exc: Any) -> Any:
        return self._inner.__exit__(*exc)


def test_the_outbox_commits_the_events_before_one_newer_than_its_endpoints_and_takes_that_one_up_later(gateway):
    c = gateway.container
    c.webhooks.create("acme", "https://hooks.example/paywarden", KINDS)
    catch_up(c.webhooks, WebhookEndpointsProjection(c.webhooks_view))
    merchant = f"merchant:{c.merchants.get_merchant('acme').id}"
    first, second = _payment(merchant, 1), _payment(merchant, 2)
    for p in (first, second):
        p.approve(_address(), _address(), _address())
        c.payments.save(p)
    outbox = PaymentWebhooksProjection(c.webhooks_view)
    outbox.horizon = second.modified_on  # the endpoints are known up to just before the second approval
    assert catch_up(c.payments, outbox) == 3  # both Received (they wait for nothing) and the first Approved
    assert [r[2] for r in outbox_rows(c.webhooks_view)[1]] == ["payment.approved"]
    outbox.horizon = None
    assert catch_up(c.payments, outbox) == 1
    assert len(outbox_rows(c.webhooks_view)[1]) == 2
