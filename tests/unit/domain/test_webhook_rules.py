"""Standard Webhooks rules: URLs, event types, secrets, signatures (checked by the `standardwebhooks` package
itself), the retry schedule, and the endpoint's life."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
import standardwebhooks

from application.webhooks import generate_secret
from domain.webhook import (
    EVENT_TYPES,
    RETRY_SCHEDULE,
    WebhookEndpoint,
    WebhookError,
    check_addresses,
    check_events,
    check_url,
    message_id,
    next_delay,
    outcome,
    secret_bytes,
    signature_header,
)


@pytest.mark.parametrize("url", ["https://hooks.acme.com/paywarden", "https://hooks.acme.com:8443/x?y=1",
                                 "https://93.184.216.34/hook"])
def test_public_https_urls_are_accepted_in_production(url):
    assert check_url(url, production=True) == url


@pytest.mark.parametrize(("url", "code"), [
    ("http://hooks.acme.com/", "https_required"), ("http://localhost:8000/", "https_required"),
    ("https://10.0.0.5/hook", "private_address"), ("https://127.0.0.1/hook", "private_address"),
    ("https://169.254.169.254/latest/meta-data", "private_address"), ("https://[::1]/hook", "private_address"),
    ("https://[fe80::1]/hook", "private_address"), ("https://localhost/hook", "private_address"),
    ("https://metadata.internal/", "private_address"), ("https://printer.local/", "private_address"),
    ("https://user:pw@hooks.acme.com/", "invalid_url"), ("ftp://hooks.acme.com/", "invalid_url"),
    ("https://hooks.acme.com/#x", "invalid_url"), ("https://bad_host!/", "invalid_url"), ("", "invalid_url"),
    ("https://" + "a" * 2100 + ".com/", "invalid_url"), ("https://127.1/", "invalid_url"),
])
def test_production_refuses_plain_http_private_addresses_credentials_and_nonsense(url, code):
    with pytest.raises(WebhookError) as refused:
        check_url(url, production=True)
    assert refused.value.code == code


def test_the_sandbox_allows_plain_http_to_localhost_only():
    assert check_url("http://localhost:9000/hook", production=False)
    assert check_url("http://127.0.0.1:9000/hook", production=False)
    assert check_url("https://127.0.0.1:9000/hook", production=False)
    with pytest.raises(WebhookError, match="https"):
        check_url("http://hooks.acme.com/", production=False)


def test_a_hostname_resolving_to_any_private_address_is_refused():
    assert check_addresses("hooks.acme.com", ["93.184.216.34"]) == ["93.184.216.34"]
    for addresses in (["93.184.216.34", "10.1.2.3"], ["::ffff:127.0.0.1"], ["100.64.0.1"], []):
        with pytest.raises(WebhookError):
            check_addresses("hooks.acme.com", addresses)


def test_event_types_must_be_known_and_are_kept_in_one_order():
    assert check_events(["payment.confirmed", "payment.approved", "payment.approved"]) == [
        "payment.approved", "payment.confirmed"]
    for bad in ([], ["payment.nope"], "payment.approved", [1]):
        with pytest.raises(WebhookError) as refused:
            check_events(bad)
        assert refused.value.code == "invalid_events"
    assert len(EVENT_TYPES) == 9


def test_secrets_are_whsec_and_24_to_64_random_bytes():
    secret = generate_secret()
    assert secret.startswith("whsec_") and len(secret_bytes(secret)) == 32
    assert generate_secret() != secret
    for bad in ("whsec_" + "QUFB", "nope", "whsec_!!!"):
        with pytest.raises((WebhookError, ValueError)):
            secret_bytes(bad)


def test_signatures_verify_with_the_standardwebhooks_package_unchanged():
    old, new = generate_secret(), generate_secret()
    msg_id, now = message_id(uuid4(), 3), int(time.time())
    body = json.dumps({"type": "payment.approved", "data": {"amount": "10000"}}, separators=(",", ":"))
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(now),
               "webhook-signature": signature_header([new, old], msg_id, now, body)}
    assert headers["webhook-signature"].count("v1,") == 2 and "." not in msg_id
    assert standardwebhooks.Webhook(new).verify(body, headers)["type"] == "payment.approved"
    assert standardwebhooks.Webhook(old).verify(body, headers)["type"] == "payment.approved"
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(generate_secret()).verify(body, headers)
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(new).verify(body.replace("10000", "99999"), headers)


def test_a_message_id_is_the_same_for_the_same_event_and_differs_between_events():
    event = uuid4()
    assert message_id(event, 2) == message_id(event, 2) != message_id(event, 3) != message_id(uuid4(), 2)


def test_the_retry_schedule_is_standard_webhooks_with_jitter_and_retry_after():
    assert [next_delay(n, RETRY_SCHEDULE, jitter=1.0) for n in range(1, 10)] == [
        5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400]
    assert next_delay(10, RETRY_SCHEDULE, jitter=1.0) is None  # ten attempts, then it is failed
    assert next_delay(1, RETRY_SCHEDULE, jitter=1.1) == pytest.approx(5.5)
    assert next_delay(1, RETRY_SCHEDULE, jitter=1.0, retry_after=120) == 120
    assert next_delay(2, RETRY_SCHEDULE, jitter=1.0, retry_after=10) == 300  # never sooner than the schedule
    assert next_delay(1, RETRY_SCHEDULE, jitter=1.0, retry_after=10**9) == 86400


def test_only_2xx_delivers_and_410_disables():
    assert [outcome(s) for s in (200, 204, 299, 301, 404, 410, 429, 500, None)] == [
        "delivered", "delivered", "delivered", "retry", "retry", "disabled", "retry", "retry", "retry"]


def test_an_endpoint_rotates_keeping_the_previous_secret_then_is_deleted():
    endpoint = WebhookEndpoint.create("acme", "https://hooks.acme.com/", ["payment.approved"], "sealed-1",
                                      production=True)
    until = datetime.now(UTC) + timedelta(hours=24)
    endpoint.rotate("sealed-2", until)
    assert (endpoint.sealed_secret, endpoint.previous_sealed, endpoint.previous_until) == ("sealed-2", "sealed-1",
                                                                                           until)
    endpoint.disable("the endpoint answered 410 Gone")
    endpoint.disable("again")  # no second event
    assert not endpoint.enabled and endpoint.disabled_reason == "the endpoint answered 410 Gone"
    endpoint.enable()
    endpoint.change_events(["payment.failed"])
    endpoint.delete()
    names = [type(e).__name__ for e in endpoint.collect_events()]
    assert names == ["Created", "SecretRotated", "Disabled", "Enabled", "EventsChanged", "Deleted"]
    with pytest.raises(WebhookError, match="deleted"):
        endpoint.change_url("https://other.acme.com/", production=True)
