"""Pending settlements carried on in the background (interfaces/runtime/followup.py) on a real LiteSVM chain: a payment
answered `settlement_pending` is confirmed by the follower and its merchant's next settle is the one success; one
whose broadcast never landed fails once its blockhash has expired; the identical bytes are what gets re-sent."""

from __future__ import annotations

import threading
import time
from functools import partial

from application.ports import Confirmation, SignatureStatus
from domain.codes import Code
from domain.networks import DEVNET
from domain.payment import PaymentState
from interfaces.container import build
from interfaces.runtime import workers
from interfaces.runtime.followup import follow_up_once, follow_up_pending
from interfaces.runtime.workers import catch_up_all
from tests.conftest import STORES, USDC, Gateway, payment_key
from tests.faults import wait_until

AMOUNT = USDC // 100


def pending_settle(gateway: Gateway, body: dict, *, send: bool = True):
    chain = gateway.container.chains.by_network[DEVNET.caip2]
    status, real_send = chain.signature_status, chain.send
    chain.signature_status = lambda signature: SignatureStatus(Confirmation.PENDING)
    if not send:  # the broadcast is lost on the way: nothing reaches the chain
        chain.send = lambda transaction, **flags: "lost"
    payments = gateway.container.payments
    settings = payments._settings
    payments._settings = type(settings)(confirmation_budget_seconds=0.1, confirmation_poll_seconds=0.05)
    try:
        return gateway.post("/settle", body)
    finally:
        chain.signature_status, chain.send, payments._settings = status, real_send, settings


def state(gateway: Gateway, body: dict) -> PaymentState:
    return gateway.container.payments.get_payment(payment_key(gateway.container, gateway.api_key, body)).state


def test_a_pending_settlement_confirmed_in_the_background_is_answered_success_once(gateway):
    body = gateway.body()
    pending = pending_settle(gateway, body)
    assert (pending.status_code, pending.json["errorReason"]) == (200, Code.SETTLEMENT_PENDING)
    catch_up_all(gateway.container, ["payment_list"])
    assert follow_up_once(gateway.container) == {"CONFIRMED": 1}
    assert state(gateway, body) is PaymentState.CONFIRMED
    catch_up_all(gateway.container, ["payment_list"])
    assert follow_up_once(gateway.container) == {}  # nothing pending any more
    retry = gateway.post("/settle", body)
    assert (retry.status_code, retry.json["success"]) == (200, True)
    assert retry.json["transaction"] == pending.json["transaction"]
    assert gateway.post("/settle", body).json["errorReason"] == Code.DUPLICATE_SETTLEMENT
    assert gateway.sandbox.token_balance(str(gateway.pay_to.pubkey())) == AMOUNT


def test_a_lost_broadcast_is_re_sent_identically_and_lands(gateway):
    body = gateway.body()
    pending = pending_settle(gateway, body, send=False)
    assert pending.json["errorReason"] == Code.SETTLEMENT_PENDING
    assert gateway.sandbox.token_balance(str(gateway.pay_to.pubkey())) == 0
    catch_up_all(gateway.container, ["payment_list"])
    follow_up_once(gateway.container)  # unseen, blockhash alive: the recorded bytes are sent again
    assert gateway.sandbox.transaction(pending.json["transaction"]) is not None
    catch_up_all(gateway.container, ["payment_list"])
    assert follow_up_once(gateway.container) == {"CONFIRMED": 1}
    assert gateway.sandbox.token_balance(str(gateway.pay_to.pubkey())) == AMOUNT


def test_a_broadcast_that_never_landed_fails_once_its_blockhash_expired(gateway):
    body = gateway.body()
    pending_settle(gateway, body, send=False)
    gateway.sandbox.advance(200)  # past the blockhash's lifetime: it can never land now
    catch_up_all(gateway.container, ["payment_list"])
    assert follow_up_once(gateway.container) == {"FAILED": 1}
    failed = gateway.post("/settle", body)
    assert (failed.status_code, failed.json["errorReason"]) == (400, Code.SUBMISSION_FAILED)
    assert "expired" in failed.json["errorMessage"]
    assert gateway.sandbox.token_balance(str(gateway.pay_to.pubkey())) == 0


def test_the_follower_reconciles_what_a_crash_left_pending_as_soon_as_it_starts(gateway):
    body = gateway.body()
    assert pending_settle(gateway, body).json["errorReason"] == Code.SETTLEMENT_PENDING
    catch_up_all(gateway.container, ["payment_list"])
    # A worker starting after a crash: its first pass runs at once, not one interval later.
    stop = threading.Event()
    follower = threading.Thread(target=follow_up_pending, args=(gateway.container, stop, 3600.0), daemon=True)
    follower.start()
    try:
        wait_until(lambda: state(gateway, body) is PaymentState.CONFIRMED, timeout=10, what="the first pass")
    finally:
        stop.set()
        follower.join(10)
    assert not follower.is_alive()
    assert gateway.post("/settle", body).json["success"] is True


@STORES
def test_a_settle_in_progress_in_the_api_worker_is_never_followed_up_by_the_projection_worker(gateway, sandbox,
                                                                                              monkeypatch):
    """The projection worker is another process: with in-process locks (the embedded store) a lock it takes does not
    exclude the API worker's settle. Here the API's settle stalls between recording its broadcast and sending it (a
    starved worker, its fsync queued behind the disk) while the projection worker runs beside it: the payment must
    be the settle's alone, answered success, never re-sent first by the follower (which made the settle's own send
    `AlreadyProcessed`, recorded FAILED and answered `submission_failed` for a transfer that landed)."""
    monkeypatch.setattr(workers, "follow_up_pending", partial(follow_up_pending, interval=0.2))
    worker = build(gateway.container.config, sandbox=sandbox)  # the projection worker's own container
    chain = gateway.container.chains.by_network[DEVNET.caip2]
    body, real_send = gateway.body(), chain.send
    key, sent_by_another = payment_key(gateway.container, gateway.api_key, body), []

    def stalled_send(transaction: bytes, **flags: bool) -> str:
        signature = gateway.container.payments.get_payment(key).signature
        stop = threading.Event()
        running = threading.Thread(target=workers.run, args=(worker, (), stop), daemon=True)
        running.start()
        try:
            wait_until(lambda: any(row.idempotency_key == key for row in
                                   worker.payment_list.get_page(state="SUBMITTED", limit=10).items),
                       timeout=10, what="the projection worker seeing the broadcast")
            deadline = time.monotonic() + 1.0  # five of its follow-up passes, unless one sends it first
            while time.monotonic() < deadline and sandbox.transaction(signature) is None:
                time.sleep(0.02)
        finally:
            stop.set()
            running.join(10)
        sent_by_another.append(sandbox.transaction(signature) is not None)
        return real_send(transaction, **flags)

    chain.send = stalled_send
    try:
        settled = gateway.post("/settle", body)
    finally:
        chain.send = real_send
        worker.close()
    assert sent_by_another == [False]  # the payment was the settle's alone
    assert (settled.status_code, settled.json["success"]) == (200, True), settled.json
    assert state(gateway, body) is PaymentState.CONFIRMED
    assert gateway.sandbox.token_balance(str(gateway.pay_to.pubkey())) == AMOUNT
