"""A payment's history by each of its handles, the payments read model, and GET /v1/payments/{id}."""

from __future__ import annotations

import json

import pytest

from domain.networks import DEVNET, KeyEnv
from interfaces.cli.main import main
from projections.payment_list import PaymentListProjection, list_payments
from projections.runner import catch_up
from tests.conftest import USDC, make_gateway


@pytest.fixture(params=["embedded", "postgres"])
def settled(request, tmp_path, sandbox, monkeypatch):
    """A gateway with one settled payment, one rejected verify, and the CLI pointed at its store."""
    options = {"database_url": request.getfixturevalue("postgres_url")} if request.param == "postgres" else {}
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    if options:
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", options["database_url"])
    gateway = make_gateway(tmp_path, sandbox, **options)
    answer = gateway.post("/settle", gateway.body())
    assert answer.status_code == 200, answer.json
    rejected = gateway.post("/verify", gateway.body(amount=USDC // 10, payTo=str(gateway.payer.pubkey())))
    assert rejected.status_code == 400
    catch_up(gateway.container.payments, PaymentListProjection(gateway.container.payment_list))
    yield gateway, answer.json["transaction"]
    gateway.container.close()


def _history(capsys, handle, *flags):
    assert main(["audit", "payment", handle, *flags]) == 0
    return capsys.readouterr().out


def test_a_settled_payments_history_reads_the_same_by_every_handle(settled, capsys):
    gateway, signature = settled
    row = list_payments(gateway.container.payment_list, state="CONFIRMED").items[0]
    assert row.transaction_signature == signature and row.amount == USDC // 100
    handles = [row.payment_id, row.idempotency_key, signature, row.client_signature]
    if row.message_hash is not None:  # the transaction's message hash, when the payment recorded it
        handles.append(row.message_hash)
    outputs = [_history(capsys, h, "--json") for h in handles]
    assert all(out == outputs[0] for out in outputs)
    events = [json.loads(line) for line in outputs[0].splitlines()]
    assert [e["type"] for e in events] == ["Payment.Received", "Payment.Approved", "Payment.SettlementSubmitted",
                                           "Payment.Confirmed"]
    assert [e["version"] for e in events] == [1, 2, 3, 4]
    assert events[0]["fields"]["amount"] == USDC // 100 and events[0]["fields"]["pay_to"] == row.pay_to
    assert events[3]["fields"]["signature"] == signature and all(e["time"].endswith("Z") for e in events)
    text = [_history(capsys, h) for h in handles]
    assert all(t == text[0] for t in text) and "Payment.Confirmed" in text[0] and f'"{signature}"' in text[0]


def test_an_unknown_handle_exits_1_with_a_message(settled, capsys):
    assert main(["audit", "payment", "no-such-payment"]) == 1
    assert "no payment is named by no-such-payment" in capsys.readouterr().err


def test_a_merchants_history_lists_its_account_events(settled, capsys):
    assert main(["audit", "merchant", "acme", "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["type"] for e in events] == ["Merchant.Registered", "Merchant.CapabilityEnabled", "Merchant.KeyIssued"]
    assert events[0]["fields"]["name"] == "acme"
    assert main(["audit", "merchant", "nobody"]) == 1


def test_the_payments_read_model_filters_by_state_network_and_date_and_pages(settled):
    gateway, _ = settled
    view = gateway.container.payment_list
    everything = list_payments(view)
    assert everything.total == 2 and {r.state for r in everything.items} == {"CONFIRMED", "REJECTED"}
    assert list_payments(view, state="REJECTED").items[0].reason == "invalid_exact_svm_payload_recipient_mismatch"
    assert list_payments(view, network=DEVNET.caip2).total == 2
    assert list_payments(view, network="solana:other").total == 0
    newest = everything.items[0]
    assert list_payments(view, since=newest.received_at).total == 1
    assert list_payments(view, until=newest.received_at).items[0].payment_id == everything.items[1].payment_id
    first, second = list_payments(view, limit=1), list_payments(view, limit=1, offset=1)
    assert first.total == second.total == 2 and first.items[0] != second.items[0]
    merchant_id = everything.items[0].merchant_id
    assert list_payments(view, merchant_id=merchant_id).total == 2
    timeline = view.get_timeline(list_payments(view, state="CONFIRMED").items[0].payment_id)
    assert [e.type for e in timeline] == ["Payment.Received", "Payment.Approved", "Payment.SettlementSubmitted",
                                          "Payment.Confirmed"]


def test_get_payment_answers_its_merchant_and_no_one_else(settled):
    gateway, signature = settled
    row = list_payments(gateway.container.payment_list, state="CONFIRMED").items[0]
    answer = gateway.client.simulate_get(f"/v1/payments/{row.payment_id}", headers=gateway.headers)
    assert answer.status_code == 200
    assert answer.json["state"] == "CONFIRMED" and answer.json["transaction"] == signature
    assert answer.json["amount"] == str(USDC // 100) and answer.json["payTo"] == row.pay_to
    assert [e["type"] for e in answer.json["events"]][-1] == "Payment.Confirmed"

    gateway.container.merchants.register("other")
    gateway.container.merchants.enable_capability("other", DEVNET.caip2)
    other_key, _ = gateway.container.merchants.create_key("other", KeyEnv.TEST)
    stranger = gateway.client.simulate_get(f"/v1/payments/{row.payment_id}",
                                           headers={"Authorization": f"Bearer {other_key}"})
    assert stranger.status_code == 404 and stranger.json["error"] == "not_found"
    assert gateway.client.simulate_get(f"/v1/payments/{row.payment_id}").status_code == 404  # anonymous
    assert gateway.client.simulate_get("/v1/payments/nope", headers=gateway.headers).status_code == 404
    bad_key = gateway.client.simulate_get(f"/v1/payments/{row.payment_id}",
                                          headers={"Authorization": "Bearer pw_test_" + "x" * 40})
    assert bad_key.status_code == 401


def test_a_proxy_services_history_reads_by_its_id_with_its_upstream_secret_sealed(settled, capsys):
    from application.proxy_services import ProxyServices
    from interfaces.container import build_secrets, store_env
    from tests.integration.test_proxy import DOMAINS

    gateway, _ = settled
    config = gateway.container.config
    proxies = ProxyServices(store_env(config, "proxy_services"), merchants=gateway.container.merchants,
                            secrets=build_secrets(config), sandbox=True, domains=lambda merchant: DOMAINS)
    try:
        service = proxies.create_service("acme", "Weather", "backend.test", subdomain="api",
                                         upstream_auth=("X-Upstream-Key", "upstream-secret-123"))
        proxies.set_active("acme", str(service.id), False)
    finally:
        proxies.close()
    assert main(["audit", "service", str(service.id), "--json"]) == 0
    out = capsys.readouterr().out
    events = [json.loads(line) for line in out.splitlines()]
    assert len(events) >= 2 and [e["version"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["id"] == str(service.id) for e in events) and "Weather" in out
    assert "upstream-secret-123" not in out
    assert main(["audit", "service", "00000000-0000-0000-0000-000000000000"]) == 1
