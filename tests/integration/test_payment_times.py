"""A payment's times: `settled_at` only when it was CONFIRMED (money moved), `failed_at` when its settlement FAILED,
in the payments read model, `GET /v1/payments/{id}`, the console's API, page and CSV; and a read model of the
earlier shape (a FAILED payment's time in `settled_at`) rebuilt from the events when a process first opens it. Real
settles on the sandbox chain, on SQLite and PostgreSQL + Redis."""

from __future__ import annotations

import csv
import io

from domain.codes import Code
from domain.networks import DEVNET
from interfaces.container import build
from interfaces.runtime.workers import catch_up_all
from projections.payment_list import list_payments
from projections.reshape import columns
from tests.conftest import STORES, USDC, Gateway
from tests.integration.console_helpers import ApiClient, add_owner, console_client


def confirmed_and_failed(gateway: Gateway) -> dict[str, str]:
    """One CONFIRMED payment and one FAILED (its blockhash expires between simulation and broadcast); the payment
    id of each state."""
    assert gateway.post("/settle", gateway.body(amount=USDC // 4)).json["success"]
    chain = gateway.container.chains.by_network[DEVNET.caip2]
    send = chain.send

    def send_late(transaction: bytes, **flags: bool) -> str:
        gateway.sandbox.advance(200)  # the cluster moves on: the broadcast is refused, nothing moves
        return send(transaction, **flags)

    chain.send = send_late
    try:
        failed = gateway.post("/settle", gateway.body(amount=USDC // 5))
    finally:
        chain.send = send
    assert failed.json["errorReason"] == Code.SUBMISSION_FAILED, failed.json
    catch_up_all(gateway.container, ["payment_list", "payment_volume"])
    return {r.state: r.payment_id for r in list_payments(gateway.container.payment_list).items}


@STORES
def test_a_failed_payment_shows_when_it_failed_and_never_a_settled_time(gateway):
    ids = confirmed_and_failed(gateway)
    view = gateway.container.payment_list
    failed, confirmed = view.get_payment(ids["FAILED"]), view.get_payment(ids["CONFIRMED"])
    assert failed is not None and confirmed is not None
    failed_event = [e for e in view.get_timeline(failed.payment_id) if e.type == "Payment.Failed"]
    assert failed.settled_at is None and failed.failed_at == failed_event[0].recorded_at
    confirmed_event = [e for e in view.get_timeline(confirmed.payment_id) if e.type == "Payment.Confirmed"]
    assert confirmed.failed_at is None and confirmed.settled_at == confirmed_event[0].recorded_at

    # The facilitator's API, to the merchant's key.
    answer = gateway.client.simulate_get(f"/v1/payments/{failed.payment_id}", headers=gateway.headers).json
    assert (answer["state"], answer["settledAt"], answer["failedAt"]) == ("FAILED", None, failed.failed_at)
    answer = gateway.client.simulate_get(f"/v1/payments/{confirmed.payment_id}", headers=gateway.headers).json
    assert (answer["settledAt"], answer["failedAt"]) == (confirmed.settled_at, None)

    # The console: its API, the payment's page and the CSV.
    add_owner(gateway.container, "acme", "owner@acme.test")
    console = ApiClient(console_client(gateway.container))
    assert console.login("owner@acme.test").status_code == 200
    listed = {p["state"]: p for p in console.request("GET", "/payments").json["payments"]}
    assert (listed["FAILED"]["settledAt"], listed["FAILED"]["failedAt"]) == (None, failed.failed_at)
    page = console.client.simulate_get(f"/payments/{failed.payment_id}", cookies={"pw_console_session":
                                                                                   console.session}).text
    assert f'<dt>Failed</dt><dd id="payment-failed"><time datetime="{failed.failed_at}">' in page
    assert "payment-settled" not in page
    exported = console.request("GET", "/payments/export")
    rows = {r["state"]: r for r in csv.DictReader(io.StringIO(exported.text))}
    assert (rows["FAILED"]["settled"], rows["FAILED"]["failed"]) == ("", failed.failed_at)
    assert (rows["CONFIRMED"]["settled"], rows["CONFIRMED"]["failed"]) == (confirmed.settled_at, "")


@STORES
def test_a_payments_view_of_the_earlier_shape_is_rebuilt_with_failure_times(gateway):
    ids = confirmed_and_failed(gateway)
    view, log = gateway.container.payment_list, gateway.container.payments.name
    position = view.max_tracking_id(log)
    failed = view.get_payment(ids["FAILED"])
    assert failed is not None
    # The earlier release's table, level with the log: no failed_at, the failure's time written as settled_at.
    with view.datastore.transaction(commit=True) as c:
        c.execute("ALTER TABLE payment_list RENAME TO payment_list_now")
        c.execute("CREATE TABLE payment_list AS SELECT * FROM payment_list_now")
        c.execute("DROP TABLE payment_list_now")
        c.execute(view.sql("UPDATE payment_list SET settled_at = ? WHERE payment_id = ?"),
                  (failed.failed_at, failed.payment_id))
        c.execute("ALTER TABLE payment_list DROP COLUMN failed_at")
    assert "failed_at" not in columns(view, "payment_list")

    upgraded = build(gateway.container.config, sandbox=gateway.sandbox)  # a process of this release starts
    try:
        assert "failed_at" in columns(upgraded.payment_list, "payment_list")
        catch_up_all(upgraded, ["payment_list"])  # the projection worker rebuilds it from the first event
        assert upgraded.payment_list.max_tracking_id(log) == position
        rebuilt = upgraded.payment_list.get_payment(ids["FAILED"])
        assert rebuilt is not None and (rebuilt.settled_at, rebuilt.failed_at) == (None, failed.failed_at)
        assert len(upgraded.payment_list.get_timeline(ids["FAILED"])) == len(view.get_timeline(ids["FAILED"]))
    finally:
        upgraded.close()
