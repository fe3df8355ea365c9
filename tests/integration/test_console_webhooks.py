"""The console's /api/v1/webhooks, endpoint by endpoint, with a real HTTPS receiver and the delivery worker."""

from __future__ import annotations

import time

import pytest

from interfaces.runtime.webhook_worker import DeliverySettings, DeliveryWorker
from tests.integration.console_helpers import ApiClient, console_client, two_merchants


@pytest.fixture
def gateway(tmp_path, sandbox):
    yield from two_merchants(tmp_path, sandbox)


def logged_in(gateway, email: str) -> ApiClient:
    client = ApiClient(console_client(gateway.container))
    assert client.login(email).status_code == 200
    return client


def deliver(gateway, receiver, count: int) -> None:
    w = DeliveryWorker(gateway.container, DeliverySettings(schedule=(0, 0.1, 0.1), timeout_seconds=2,
                                                           lease_seconds=5, ca_file=receiver.ca_file))
    deadline = time.monotonic() + 20
    while len(receiver.deliveries) < count and time.monotonic() < deadline:
        w.fill_outbox()
        w.deliver_due(wait=True)
        time.sleep(0.05)
    assert len(receiver.deliveries) >= count


def test_a_merchant_manages_webhooks_through_the_console_api(gateway, receiver):
    acme = logged_in(gateway, "owner@acme.test")
    created = acme.request("POST", "/webhooks", json={"url": receiver.url, "events": ["payment.approved"]})
    assert created.status_code == 201
    assert set(created.json) == {"id", "url", "events", "enabled", "secret"} and created.json["enabled"] is True
    receiver.secrets.append(created.json["secret"])
    endpoint_id = created.json["id"]
    listed = acme.request("GET", "/webhooks").json["webhooks"]
    assert [e["id"] for e in listed] == [endpoint_id] and "secret" not in listed[0]

    # A payment with acme's key is heard, signed.
    assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    assert acme.request("POST", f"/webhooks/{endpoint_id}/test").status_code == 202
    deliver(gateway, receiver, 2)
    assert sorted(d.payload["type"] for d in receiver.deliveries) == ["payment.approved", "webhook.test"]
    assert all(d.verified_with for d in receiver.deliveries)
    deliveries = acme.request("GET", f"/webhooks/{endpoint_id}/deliveries").json["deliveries"]
    assert len(deliveries) == 2 and all(d["attempts"][0]["status"] == 200 for d in deliveries)

    # Resend, rotate, patch, replay, delete.
    msg_id = deliveries[0]["id"]
    assert acme.request("POST", f"/webhooks/{endpoint_id}/deliveries/{msg_id}/resend").status_code == 202
    rotated = acme.request("POST", f"/webhooks/{endpoint_id}/rotate").json
    receiver.secrets.append(rotated["secret"])
    deliver(gateway, receiver, 3)
    assert receiver.deliveries[2].headers["webhook-id"] == msg_id
    assert receiver.deliveries[2].verified_with == receiver.secrets  # both signatures during the overlap
    patched = acme.request("PATCH", f"/webhooks/{endpoint_id}", json={"enabled": False, "events": ["payment.failed"]})
    assert patched.status_code == 200 and patched.json["enabled"] is False and patched.json["events"] == [
        "payment.failed"]
    replayed = acme.request("POST", "/webhooks/replay", json={"since": "2026-01-01T00:00:00Z"})
    assert replayed.status_code == 200 and replayed.json == {"replayed": 0}
    assert acme.request("DELETE", f"/webhooks/{endpoint_id}").status_code == 204
    assert acme.request("GET", "/webhooks").json == {"webhooks": []}
    assert acme.request("GET", f"/webhooks/{endpoint_id}").status_code == 404


def test_bad_input_other_merchants_and_missing_sessions_are_refused(gateway, receiver):
    acme, beta = logged_in(gateway, "owner@acme.test"), logged_in(gateway, "owner@beta.test")
    for body, code in (({"url": "http://hooks.acme.com/", "events": ["payment.approved"]}, "https_required"),
                       ({"url": receiver.url, "events": ["payment.nope"]}, "invalid_events"),
                       ({"url": "ftp://x.example.com/", "events": ["payment.approved"]}, "invalid_url"),
                       ({"url": receiver.url}, "invalid_request"), ({"url": receiver.url, "events": []},
                                                                     "invalid_request")):
        refused = acme.request("POST", "/webhooks", json=body)
        assert refused.status_code == 400 and refused.json["error"] == code, body
    endpoint_id = acme.request("POST", "/webhooks", json={"url": receiver.url, "events": ["key.revoked"]}).json["id"]
    for method, path in (("GET", f"/webhooks/{endpoint_id}"), ("PATCH", f"/webhooks/{endpoint_id}"),
                         ("DELETE", f"/webhooks/{endpoint_id}"), ("POST", f"/webhooks/{endpoint_id}/rotate"),
                         ("POST", f"/webhooks/{endpoint_id}/test"), ("GET", f"/webhooks/{endpoint_id}/deliveries"),
                         ("POST", f"/webhooks/{endpoint_id}/deliveries/msg_x/resend")):
        other = beta.request(method, path, json={"enabled": False} if method == "PATCH" else None)
        assert other.status_code == 404 and other.json["error"] == "webhook_not_found", (method, path)
    assert acme.request("POST", f"/webhooks/{endpoint_id}/deliveries/msg_nope/resend").status_code == 404
    assert acme.request("PATCH", f"/webhooks/{endpoint_id}", json={"enabled": "yes"}).status_code == 400
    assert ApiClient(console_client(gateway.container)).request("GET", "/webhooks").status_code == 401
    no_csrf = acme.request("POST", "/webhooks", json={"url": receiver.url, "events": ["key.revoked"]}, csrf=False)
    assert no_csrf.status_code == 403
