"""`paywarden webhooks …` as a merchant's operator runs it, against the embedded store, with a real HTTPS receiver;
and the webhook metrics on /metrics."""

from __future__ import annotations

import json
import time

import pytest
from falcon import testing

from interfaces.cli.main import main
from interfaces.config import load_config
from interfaces.container import build
from interfaces.http.facilitator.app import create_app
from interfaces.runtime.webhook_worker import DeliverySettings, DeliveryWorker
from interfaces.wiring import api_collaborators


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL", "PAYWARDEN_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    return tmp_path


def cli(capsys, *argv: str) -> object:
    assert main(["webhooks", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def deliver(receiver, count: int) -> None:
    container = build(load_config())
    try:
        w = DeliveryWorker(container, DeliverySettings(schedule=(0, 0.1, 0.1), timeout_seconds=2, lease_seconds=5,
                                                       ca_file=receiver.ca_file))
        deadline = time.monotonic() + 20
        while len(receiver.deliveries) < count and time.monotonic() < deadline:
            w.fill_outbox()
            w.deliver_due(wait=True)
            time.sleep(0.05)
    finally:
        container.close()


def test_a_merchant_manages_an_endpoint_from_the_command_line(data_dir, receiver, capsys):
    assert main(["merchant", "create", "acme"]) == 0
    created = cli(capsys, "create", "--merchant", "acme", "--url", receiver.url, "--events",
                  "payment.confirmed,key.revoked")
    assert created["secret"].startswith("whsec_") and created["events"] == ["payment.confirmed", "key.revoked"]
    receiver.secrets.append(created["secret"])
    endpoint_id = created["id"]
    [listed] = cli(capsys, "list", "--merchant", "acme")
    assert listed == {"id": endpoint_id, "url": receiver.url, "events": ["payment.confirmed", "key.revoked"],
                      "enabled": True, "disabledReason": None}
    assert "whsec_" not in json.dumps(listed)

    # A revoked key is heard; the test event too.
    assert main(["key", "create", "--merchant", "acme", "--env", "test"]) == 0
    prefix = capsys.readouterr().out.strip()[:16]
    assert main(["key", "revoke", prefix]) == 0
    queued = cli(capsys, "test", "--merchant", "acme", endpoint_id)
    deliver(receiver, 2)
    kinds = sorted(d.payload["type"] for d in receiver.deliveries)
    assert kinds == ["key.revoked", "webhook.test"] and all(d.verified_with for d in receiver.deliveries)
    revoked = next(d for d in receiver.deliveries if d.payload["type"] == "key.revoked")
    assert revoked.payload["data"] == {"merchant": "acme", "prefix": prefix}

    deliveries = cli(capsys, "deliveries", "--merchant", "acme", endpoint_id)
    assert {d["id"] for d in deliveries} >= {queued["id"]}
    assert all(d["status"] == "delivered" and d["attempts"][0]["status"] == 200 for d in deliveries)

    # Resend one, rotate, and the resend carries both signatures.
    rotated = cli(capsys, "rotate", "--merchant", "acme", endpoint_id)
    receiver.secrets.append(rotated["secret"])
    assert cli(capsys, "resend", "--merchant", "acme", endpoint_id, queued["id"])["status"] == "pending"
    deliver(receiver, 3)
    assert receiver.deliveries[2].headers["webhook-id"] == queued["id"]
    assert receiver.deliveries[2].verified_with == receiver.secrets

    # Failures replayed in bulk from a time.
    since = time.time()
    receiver.answer(500, 500, 500)
    cli(capsys, "test", "--merchant", "acme", endpoint_id)
    deliver(receiver, 6)
    assert [d["status"] for d in cli(capsys, "deliveries", "--merchant", "acme", endpoint_id)][0] == "failed"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since - 1))
    assert cli(capsys, "replay", "--merchant", "acme", "--since", stamp) == {"replayed": 1}
    deliver(receiver, 7)
    assert cli(capsys, "deliveries", "--merchant", "acme", endpoint_id)[0]["status"] == "delivered"

    # /metrics counts the attempts.
    container = build(load_config())
    try:
        text = testing.TestClient(create_app(api_collaborators(container))).simulate_get("/metrics").text
    finally:
        container.close()
    assert 'paywarden_webhook_attempts_total{outcome="delivered"} 4.0' in text
    assert 'paywarden_webhook_attempts_total{outcome="retry"} 2.0' in text
    assert 'paywarden_webhook_attempts_total{outcome="failed"} 1.0' in text
    assert "paywarden_webhook_queue_depth 0.0" in text and "paywarden_webhook_oldest_pending_age_seconds 0.0" in text

    # Update, disable, delete.
    updated = cli(capsys, "update", "--merchant", "acme", endpoint_id, "--events", "payment.failed", "--disable")
    assert updated["events"] == ["payment.failed"] and updated["enabled"] is False
    assert main(["webhooks", "delete", "--merchant", "acme", endpoint_id]) == 0
    assert cli(capsys, "list", "--merchant", "acme") == []


def test_bad_input_and_other_merchants_endpoints_are_refused_with_a_message(data_dir, receiver, capsys):
    main(["merchant", "create", "acme"])
    main(["merchant", "create", "other"])
    capsys.readouterr()
    assert main(["webhooks", "create", "--merchant", "acme", "--url", "http://hooks.acme.com/", "--events",
                 "payment.confirmed"]) == 2
    assert "https" in capsys.readouterr().err
    assert main(["webhooks", "create", "--merchant", "acme", "--url", receiver.url, "--events", "payment.nope"]) == 2
    assert "unknown event types" in capsys.readouterr().err
    assert main(["webhooks", "create", "--merchant", "nobody", "--url", receiver.url, "--events",
                 "payment.confirmed"]) == 2
    created = cli(capsys, "create", "--merchant", "acme", "--url", receiver.url, "--events", "payment.confirmed")
    for argv in (["rotate", "--merchant", "other", created["id"]], ["delete", "--merchant", "other", created["id"]],
                 ["deliveries", "--merchant", "other", created["id"]], ["rotate", "--merchant", "acme", "nonsense"]):
        assert main(["webhooks", *argv]) == 2
        assert "no webhook endpoint" in capsys.readouterr().err
    assert main(["webhooks", "replay", "--merchant", "acme", "--since", "yesterday"]) == 2
    assert "ISO 8601" in capsys.readouterr().err
