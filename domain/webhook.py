"""The WebhookEndpoint aggregate: where a merchant hears about its payments, and the Standard Webhooks rules.

An endpoint belongs to one merchant (a merchant has any number of them, so each is its own aggregate rather than
state inside `Merchant`: deliveries and rotations of one endpoint never contend with the merchant's keys). Its
signing secret is recorded sealed (encrypted by the application's cipher): the event store never holds it in
clear, and no event is ever shown to anyone with it. A rotation keeps the previous secret until `previous_until`,
and a delivery in that window carries both signatures (Standard Webhooks, "zero downtime secret rotation").

Pure: the URL rules decide from the text alone; whether a hostname resolves to public addresses is a fact the
application asks its `Resolver` port for and hands to `check_addresses`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
from datetime import datetime
from urllib.parse import urlsplit
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.discovery import LABEL, PRIVATE_NAMES, is_public
from domain.errors import DomainError

EVENT_TYPES = (
    "payment.approved", "payment.rejected", "payment.settlement_submitted", "payment.confirmed", "payment.failed",
    "listing.registered", "listing.updated", "key.revoked", "service.deactivated",
)
SECRET_PREFIX = "whsec_"
SECRET_BYTES = (24, 64)  # Standard Webhooks: at least 24 bytes; we stay well under its 512 maximum
MAX_URL = 2048
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")  # plain http is allowed to these in the sandbox only
MESSAGE_NAMESPACE = uuid5(NAMESPACE_URL, "https://paywarden.dev/webhook-messages")
# Standard Webhooks' example schedule, in seconds: the first attempt at once, then after each failure the next delay.
RETRY_SCHEDULE = (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0, 72000.0, 86400.0)
MAX_RETRY_AFTER = 86400.0


# The input each refusal is about, for forms and API answers that name the field at fault.
FIELDS = {"invalid_url": "url", "https_required": "url", "private_address": "url", "unresolvable": "url",
          "invalid_events": "events", "too_many_endpoints": "url"}
LIMIT_CODES = frozenset({"too_many_endpoints", "test_pending", "webhook_busy"})  # refusals of a merchant's share: 409


class WebhookError(DomainError):
    """A webhook endpoint command the rules refuse; `code` is what the API answers with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message

    @property
    def field(self) -> str | None:
        return FIELDS.get(self.code)


# -- rules -------------------------------------------------------------------------------------------------------


def check_url(url: str, *, production: bool) -> str:
    """The endpoint URL if the rules allow it: https (http only to localhost in the sandbox), no credentials, no
    fragment, a valid host; in production no private, loopback, link-local or metadata address or name."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        raise WebhookError("invalid_url", f"the URL must be 1-{MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise WebhookError("invalid_url", "the URL cannot be parsed") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").rstrip(".")
    if scheme not in ("https", "http"):
        raise WebhookError("invalid_url", "the URL must start with https://")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise WebhookError("invalid_url", "the URL must carry no credentials and no fragment")
    if port == 0 or any(c.isspace() for c in url):
        raise WebhookError("invalid_url", "the URL has a bad port or whitespace")
    if scheme == "http" and (production or host not in LOCAL_HOSTS):
        raise WebhookError("https_required", "webhook URLs must use https:// (http://localhost only in the sandbox)")
    address = _address(host)
    if address is None:
        labels = host.lower().split(".")
        if not host or not all(LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
            raise WebhookError("invalid_url", f"{host!r} is not a valid hostname")
        if production and (len(labels) < 2 or any(host.lower() == n or host.lower().endswith("." + n)
                                                   for n in PRIVATE_NAMES)):
            raise WebhookError("private_address", f"{host} is not a public internet name")
    elif production and not is_public(address):
        raise WebhookError("private_address", f"{address} is not a public address")
    return url


def check_addresses(host: str, addresses: list[str]) -> list[str]:
    """The addresses a production endpoint's host resolved to, if every one of them is public."""
    if not addresses:
        raise WebhookError("unresolvable", f"{host} does not resolve")
    for raw in addresses:
        address = _address(raw.split("%", 1)[0])
        if address is None or not is_public(address):
            raise WebhookError("private_address", f"{host} resolves to {raw}, which is not a public address")
    return addresses


def check_events(events: object) -> list[str]:
    if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
        raise WebhookError("invalid_events", "events must be a non-empty list of event types")
    unknown = sorted(set(events) - set(EVENT_TYPES))
    if unknown:
        raise WebhookError("invalid_events", f"unknown event types {unknown}; known: {', '.join(EVENT_TYPES)}")
    return [e for e in EVENT_TYPES if e in events]  # a canonical order, no duplicates


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


# -- Standard Webhooks signing -----------------------------------------------------------------------------------


def secret_bytes(secret: str) -> bytes:
    """The key of a `whsec_…` secret (its base64 body)."""
    if not secret.startswith(SECRET_PREFIX):
        raise WebhookError("invalid_secret", "a webhook secret starts with whsec_")
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    if not SECRET_BYTES[0] <= len(key) <= SECRET_BYTES[1]:
        raise WebhookError("invalid_secret", f"a webhook secret holds {SECRET_BYTES[0]}-{SECRET_BYTES[1]} bytes")
    return key


def format_secret(key: bytes) -> str:
    return SECRET_PREFIX + base64.b64encode(key).decode()


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    """`v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))."""
    digest = hmac.new(secret_bytes(secret), f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(secrets: list[str], msg_id: str, timestamp: int, body: str) -> str:
    """Space-separated signatures, one per secret (the current one first)."""
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)


def message_id(originator_id: UUID, originator_version: int) -> str:
    """The `webhook-id` of an event: derived from the event's identity, so every redelivery carries the same one.
    No `.` in it (the signed content is dot-delimited)."""
    return "msg_" + uuid5(MESSAGE_NAMESPACE, f"{originator_id}:{originator_version}").hex


def next_delay(attempts: int, schedule: tuple[float, ...], *, jitter: float, retry_after: float | None = None
               ) -> float | None:
    """Seconds until the next attempt after `attempts` failed ones, or None when the schedule is spent.

    `jitter` is a factor drawn by the caller (0.9-1.1); a `Retry-After` (429/503) is honoured: never sooner than
    the receiver asked, at most a day.
    """
    if attempts >= len(schedule):
        return None
    delay = schedule[attempts] * jitter
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
    return delay


def outcome(status: int | None) -> str:
    """What an answer means: delivered (2xx), disabled (410 Gone: the receiver wants no more), else retry."""
    if status is not None and 200 <= status < 300:
        return "delivered"
    if status == 410:
        return "disabled"
    return "retry"


# -- the aggregate -----------------------------------------------------------------------------------------------


class WebhookEndpoint(Aggregate):
    class Created(Aggregate.Created):
        merchant: str
        url: str
        events: list[str]
        sealed_secret: str

    class UrlChanged(Aggregate.Event):
        url: str

    class EventsChanged(Aggregate.Event):
        events: list[str]

    class Disabled(Aggregate.Event):
        reason: str

    class Enabled(Aggregate.Event):
        pass

    class SecretRotated(Aggregate.Event):
        sealed_secret: str
        previous_until: datetime

    class Deleted(Aggregate.Event):
        pass

    @event(Created)
    def __init__(self, merchant: str, url: str, events: list[str], sealed_secret: str) -> None:
        self.merchant, self.url, self.events, self.sealed_secret = merchant, url, events, sealed_secret
        self.enabled, self.disabled_reason, self.deleted = True, "", False
        self.previous_sealed: str | None = None
        self.previous_until: datetime | None = None

    @classmethod
    def create(cls, merchant: str, url: str, events: list[str], sealed_secret: str, *,
               production: bool) -> WebhookEndpoint:
        return cls(merchant=merchant, url=check_url(url, production=production), events=check_events(events),
                   sealed_secret=sealed_secret)

    def change_url(self, url: str, *, production: bool) -> None:
        self._live()
        if url != self.url:
            self._change_url(url=check_url(url, production=production))

    @event(UrlChanged)
    def _change_url(self, url: str) -> None:
        self.url = url

    def change_events(self, events: list[str]) -> None:
        self._live()
        events = check_events(events)
        if events != self.events:
            self._change_events(events=events)

    @event(EventsChanged)
    def _change_events(self, events: list[str]) -> None:
        self.events = events

    def disable(self, reason: str) -> None:
        self._live()
        if self.enabled:
            self._disable(reason=reason[:200])

    @event(Disabled)
    def _disable(self, reason: str) -> None:
        self.enabled, self.disabled_reason = False, reason

    def enable(self) -> None:
        self._live()
        if not self.enabled:
            self._enable()

    @event(Enabled)
    def _enable(self) -> None:
        self.enabled, self.disabled_reason = True, ""

    def rotate(self, sealed_secret: str, previous_until: datetime) -> None:
        self._live()
        self._rotate(sealed_secret=sealed_secret, previous_until=previous_until)

    @event(SecretRotated)
    def _rotate(self, sealed_secret: str, previous_until: datetime) -> None:
        self.previous_sealed, self.previous_until = self.sealed_secret, previous_until
        self.sealed_secret = sealed_secret

    def delete(self) -> None:
        self._live()
        self._delete()

    @event(Deleted)
    def _delete(self) -> None:
        self.deleted, self.enabled = True, False

    def _live(self) -> None:
        if self.deleted:
            raise WebhookError("webhook_not_found", f"webhook endpoint {self.id} was deleted")


def endpoints_index_id(merchant: str) -> UUID:
    """The id of a merchant's list of live endpoints: derived from the merchant, so there is one per merchant."""
    return uuid5(MESSAGE_NAMESPACE, f"merchant-endpoints/{merchant}")


class MerchantEndpoints(Aggregate):
    """A merchant's live endpoints, saved with every endpoint it gains or loses.

    The cap on endpoints holds because of it: two creations at the same instant (two threads, processes or hosts)
    both record an event at the same version of this list, and the event store keeps one; the other is retried
    against the list as it now is. `Started` records the endpoints the merchant had before the list existed."""

    class Started(Aggregate.Created):
        merchant: str
        endpoint_ids: list[str]

    class Added(Aggregate.Event):
        endpoint_id: str

    class Removed(Aggregate.Event):
        endpoint_id: str

    @staticmethod
    def create_id(merchant: str, endpoint_ids: list[str]) -> UUID:
        return endpoints_index_id(merchant)

    @event(Started)
    def __init__(self, merchant: str, endpoint_ids: list[str]) -> None:
        self.merchant, self.endpoint_ids = merchant, list(endpoint_ids)

    def add(self, endpoint_id: str, *, at_most: int) -> None:
        if len(self.endpoint_ids) >= at_most:
            raise WebhookError("too_many_endpoints", f"a merchant has at most {at_most} webhook endpoints; "
                                                     "delete one first")
        self._add(endpoint_id=endpoint_id)

    @event(Added)
    def _add(self, endpoint_id: str) -> None:
        self.endpoint_ids.append(endpoint_id)

    def remove(self, endpoint_id: str) -> None:
        if endpoint_id in self.endpoint_ids:
            self._remove(endpoint_id=endpoint_id)

    @event(Removed)
    def _remove(self, endpoint_id: str) -> None:
        self.endpoint_ids.remove(endpoint_id)
