"""The books reconciled with the chain continuously (interfaces/audit/books.py): the projection worker's reconciler
catches a transfer our fee payer signed behind the books' back and a CONFIRMED payment whose transaction the chain
never had; each mismatch is an event, counted in /metrics and shown on /readyz (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx
import pytest
from eventsourcing.persistence import StoredEvent
from falcon import testing
from solders.keypair import Keypair
from solders.message import to_bytes_versioned
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from domain.books import Reconciliation
from domain.networks import DEVNET
from interfaces.http.facilitator.app import create_app
from interfaces.runtime.workers import reconciler
from interfaces.sandbox.exact_client import build_exact_payment
from interfaces.sandbox.localnet import LocalnetThread
from interfaces.wiring import api_collaborators
from tests.conftest import USDC, make_gateway
from tests.integration.console_helpers import ApiClient, add_owner, console_client
from tests.integration.test_audit_chain import forge_confirmed


@pytest.fixture(params=["embedded", "postgres"])
def reconciled(request, tmp_path, sandbox, monkeypatch):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_MAINNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    options = {}
    if request.param == "postgres":
        options["database_url"] = request.getfixturevalue("postgres_url")
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", options["database_url"])
    with LocalnetThread(sandbox, slot_ms=None) as localnet:
        gateway = make_gateway(tmp_path, sandbox, devnet_rpc_url=localnet.url, **options)
        for amount in (USDC // 100, USDC // 20):
            assert gateway.post("/settle", gateway.body(amount=amount)).status_code == 200
        yield gateway
        gateway.container.close()


def behind_our_back(gateway) -> str:
    """A USDC transfer to the merchant's wallet, paid for and co-signed by our fee payer, sent straight to the
    chain: no verify, no settle, no event."""
    tx = build_exact_payment(gateway.payer, fee_payer=gateway.fee_payer, mint=DEVNET.usdc_mint,
                             pay_to=gateway.pay_to.pubkey(), amount=USDC // 4, blockhash=gateway.blockhash())
    signature = gateway.container.fee_payers.sign(gateway.fee_payer, to_bytes_versioned(tx.message))
    signed = VersionedTransaction.populate(tx.message, [Signature.from_bytes(signature), *tx.signatures[1:]])
    outcome = gateway.sandbox.send(signed)
    assert outcome.ok and outcome.landed
    return outcome.signature


def test_the_reconciler_finds_a_transfer_behind_our_back_and_a_dropped_transaction_and_records_them(reconciled):
    gateway = reconciled
    books = reconciler(gateway.container)
    assert books is not None
    assert books.run_once() == []  # two settled payments, their two transactions: the books agree
    status = gateway.container.books.status()
    assert status["mismatches"] == 0 and status["checked"] >= 4 and status["last_pass"]

    transfer = behind_our_back(gateway)
    never = str(Keypair().sign_message(b"dropped"))
    dropped = forge_confirmed(gateway, signature=never, amount=USDC, pay_to=str(gateway.pay_to.pubkey()))
    found = books.run_once()
    assert sorted((m["kind"], m["signature"]) for m in found) == sorted(
        [("unbooked_transfer", transfer), ("confirmed_not_on_chain", never)])
    unbooked = next(m for m in found if m["kind"] == "unbooked_transfer")
    assert f"fee payer {gateway.fee_payer} signed {transfer}, which no payment settled" in unbooked["detail"]
    assert f"{gateway.pay_to.pubkey()}: +{USDC // 4} {DEVNET.usdc_mint}" in unbooked["detail"]
    assert next(m for m in found if m["kind"] == "confirmed_not_on_chain")["payment_id"] == dropped
    assert books.run_once() == []  # each is found once

    # Every mismatch is an event of the Books application, in its own store (and so in the audit log).
    stored = gateway.container.books.recorder.select_notifications(None, 100)
    topics = [n.topic for n in stored]
    assert topics.count(f"{Reconciliation.__module__}:Reconciliation.MismatchFound") == 2

    client = testing.TestClient(create_app(api_collaborators(gateway.container)))
    assert "paywarden_books_mismatches_total 2.0" in client.simulate_get("/metrics").text
    ready = client.simulate_get("/readyz").json
    assert ready["books"]["mismatches"] == 2 and ready["books"]["last_reconciled"]
    assert any(transfer in detail for detail in ready["books"]["latest"])

    add_owner(gateway.container, "acme", "owner@acme.test")
    console = ApiClient(console_client(gateway.container))
    assert console.login("owner@acme.test").status_code == 200
    overview = console.client.simulate_get("/", cookies={"pw_console_session": console.session}).text
    assert "2 mismatches" in overview and transfer in overview and "Last reconciled" in overview


def test_a_fresh_reconciler_resumes_where_the_books_say_it_stopped(reconciled):
    gateway = reconciled
    assert reconciler(gateway.container).run_once() == []
    transfer = behind_our_back(gateway)
    again = reconciler(gateway.container)  # a new process: nothing remembered but the events
    assert [m["signature"] for m in again.run_once()] == [transfer]
    assert gateway.post("/settle", gateway.body(amount=USDC // 50)).status_code == 200
    assert again.run_once() == []  # a settled payment's transaction is booked


def test_a_pass_looks_up_its_confirmed_payments_transactions_in_one_request(reconciled, monkeypatch):
    gateway = reconciled
    for amount in (USDC // 40, USDC // 80, USDC // 160):
        assert gateway.post("/settle", gateway.body(amount=amount)).json["success"]
    requests: list[Any] = []
    post = httpx.Client.post

    def counted(client, url, *args, **kwargs):
        body = kwargs.get("json")
        requests.append([c["method"] for c in body] if isinstance(body, list) else body["method"])
        return post(client, url, *args, **kwargs)

    monkeypatch.setattr(httpx.Client, "post", counted)
    assert reconciler(gateway.container).run_once() == []
    # The five CONFIRMED payments' getTransaction in one JSON-RPC batch (one HTTP request each was five); then each
    # fee payer's history, and a transaction of it no payment recorded (its funding) looked up alone.
    assert requests[0] == ["getTransaction"] * 5
    assert "getSignaturesForAddress" in requests and not any(isinstance(r, list) for r in requests[1:])


def test_a_pass_checks_its_payments_from_the_events_it_reads_and_reads_an_earlier_ones_own(reconciled, monkeypatch):
    gateway = reconciled
    books = reconciler(gateway.container)
    reads: list[Any] = []
    select_events = books.payments.recorder.select_events  # the reconciler's own reader of the payments store
    monkeypatch.setattr(books.payments.recorder, "select_events",
                        lambda *args, **kwargs: (reads.append(args[0]), select_events(*args, **kwargs))[1])
    assert books.run_once() == []
    assert reads == []  # each settled payment's Received and broadcast were in the pass's own notifications

    # A payment whose broadcast an earlier pass read, confirmed after it: its events are read for its check.
    never = str(Keypair().sign_message(b"confirmed later"))
    forged = forge_confirmed(gateway, signature=never, amount=USDC, pay_to=str(gateway.pay_to.pubkey()),
                             confirmed=False)
    assert books.run_once() == []
    app = gateway.container.payments
    app.recorder.insert_events([StoredEvent(
        originator_id=UUID(forged), originator_version=4, topic="domain.payment:Payment.Confirmed",
        state=app.mapper.transcoder.encode({"signature": never, "timestamp": datetime.now(UTC)}))])
    found = books.run_once()
    assert [(m["kind"], m["payment_id"]) for m in found] == [("confirmed_not_on_chain", forged)]
    assert reads == [UUID(forged)]
