"""The Webhooks application: merchants' webhook endpoints (create, change, enable/disable, rotate, delete).

Secrets are made here from the operating system's CSPRNG, sealed by the `SecretCipher` port before they reach an
event, and returned in clear exactly once (create, rotate). An endpoint of another merchant is answered as not
found, so ids tell nothing about other merchants.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol
from urllib.parse import urlsplit
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError
from eventsourcing.system import Leader

from application.ports import Resolver, ResolvesNothing
from domain.webhook import (
    SECRET_BYTES,
    MerchantEndpoints,
    WebhookEndpoint,
    WebhookError,
    check_addresses,
    check_url,
    endpoints_index_id,
    format_secret,
)

MAX_ENDPOINTS = 10  # live (not deleted) endpoints per merchant
SAVE_ATTEMPTS = 50  # a creation or deletion that lost a race for the merchant's list tries again this often
PENDING_TESTS_PER_ENDPOINT = 1  # webhook.test events waiting to be delivered to one endpoint
ROTATION_OVERLAP = timedelta(hours=24)  # the previous secret keeps signing this long after a rotation
SECRET_LENGTH = 32  # bytes of randomness in a new secret (the rules allow 24-64)


class SecretCipher(Protocol):
    """Seals secrets for storage and opens them for signing (authenticated encryption)."""

    def seal(self, plaintext: str) -> str: ...

    def open(self, sealed: str) -> str: ...


class KnownEndpoint(Protocol):
    @property
    def id(self) -> str: ...


class EndpointDirectory(Protocol):
    """A merchant's live endpoints as the webhooks read model has them: what a merchant had before its list of
    endpoints (`MerchantEndpoints`) existed, recorded when the list starts."""

    def list_endpoints(self, merchant: str) -> Sequence[KnownEndpoint]: ...


class WebhookNotFoundError(WebhookError):
    """No endpoint of this merchant has that id."""

    def __init__(self, endpoint_id: object) -> None:
        super().__init__("webhook_not_found", f"no webhook endpoint {endpoint_id}")


def generate_secret(length: int = SECRET_LENGTH) -> str:
    if not SECRET_BYTES[0] <= length <= SECRET_BYTES[1]:
        raise ValueError("a secret holds 24-64 bytes")
    return format_secret(secrets.token_bytes(length))


class NoCipher:
    """The `SecretCipher` of a `Webhooks(env)` built from its environment alone: it seals and opens nothing."""

    def seal(self, plaintext: str) -> str:
        raise LookupError("no secret key configured: this Webhooks application only reads its log")

    def open(self, sealed: str) -> str:
        raise LookupError("no secret key configured: this Webhooks application only reads its log")


# A Leader: each save prompts the followers it leads, the read models of its log in the commanding process, before
# the command returns (projections/read_your_writes.py).
class Webhooks(Leader[UUID]):
    def __init__(self, env: Mapping[str, str] | None = None, *, cipher: SecretCipher | None = None,
                 resolver: Resolver | None = None, production: bool = False,
                 overlap: timedelta = ROTATION_OVERLAP, endpoints: EndpointDirectory | None = None) -> None:
        """`Webhooks(env)` alone (as eventsourcing's runners build it) reads its log and can add no endpoint."""
        super().__init__(env)
        self._cipher: SecretCipher = cipher or NoCipher()
        self.resolver: Resolver = resolver or ResolvesNothing()
        self._production, self._overlap = production, overlap
        self._endpoints = endpoints

    def create(self, merchant: str, url: str, events: list[str]) -> tuple[WebhookEndpoint, str]:
        """A new endpoint and its secret (the only time the secret is shown). A merchant has at most
        `MAX_ENDPOINTS`: each one's deliveries take a share of the delivery worker. The endpoint is saved with the
        merchant's list of endpoints, so of creations at the same instant only as many as the cap allows succeed
        (the event store keeps one event per version of the list; the others try again with the list as it is)."""
        secret = generate_secret()
        sealed = self._cipher.seal(secret)
        self._check_resolves(check_url(url, production=self._production))  # once, not per attempt to save
        for _ in range(SAVE_ATTEMPTS):
            endpoint = WebhookEndpoint.create(merchant, url, events, sealed, production=self._production)
            index = self._index(merchant)
            index.add(str(endpoint.id), at_most=MAX_ENDPOINTS)
            try:
                self.save(endpoint, index)
                return endpoint, secret
            except IntegrityError:
                continue  # another creation or deletion changed the list first
        raise WebhookError("webhook_busy", "the merchant's endpoints are being changed by many requests at once; "
                                           "try again")

    def update(self, endpoint_id: str, merchant: str, *, url: str | None = None, events: list[str] | None = None,
               enabled: bool | None = None) -> WebhookEndpoint:
        endpoint = self.get_endpoint(endpoint_id, merchant)
        if url is not None:
            endpoint.change_url(url, production=self._production)
            self._check_resolves(endpoint.url)
        if events is not None:
            endpoint.change_events(events)
        if enabled is True:
            endpoint.enable()
        elif enabled is False:
            endpoint.disable("disabled by the merchant")
        self.save(endpoint)
        return endpoint

    def rotate(self, endpoint_id: str, merchant: str, *, now: datetime | None = None) -> str:
        """A new secret; the previous one keeps signing for the overlap window."""
        endpoint = self.get_endpoint(endpoint_id, merchant)
        secret = generate_secret()
        endpoint.rotate(self._cipher.seal(secret), (now or datetime.now(UTC)) + self._overlap)
        self.save(endpoint)
        return secret

    def delete(self, endpoint_id: str, merchant: str) -> None:
        """The endpoint leaves the merchant's list in the same save, which frees its place under the cap."""
        for _ in range(SAVE_ATTEMPTS):
            endpoint = self.get_endpoint(endpoint_id, merchant)
            endpoint.delete()
            index = self._load_index(merchant)
            if index is not None:
                index.remove(str(endpoint.id))
            try:
                self.save(*[a for a in (endpoint, index) if a is not None])
                return
            except IntegrityError:
                continue
        raise WebhookError("webhook_busy", "the merchant's endpoints are being changed by many requests at once; "
                                           "try again")

    @staticmethod
    def test_pending() -> WebhookError:
        """The refusal of a `webhook.test` while `PENDING_TESTS_PER_ENDPOINT` wait for the endpoint (the outbox
        counts and queues in one step)."""
        return WebhookError("test_pending", "a test event to this endpoint is still waiting to be delivered; "
                                            "see its deliveries")

    def disable(self, endpoint_id: str, reason: str) -> bool:
        """The delivery worker's command (a 410 answer); False when it was already disabled or deleted."""
        endpoint = self._get(endpoint_id)
        if endpoint is None or endpoint.deleted or not endpoint.enabled:
            return False
        endpoint.disable(reason)
        self.save(endpoint)
        return True

    def get_endpoint(self, endpoint_id: str, merchant: str) -> WebhookEndpoint:
        endpoint = self._get(endpoint_id)
        if endpoint is None or endpoint.merchant != merchant or endpoint.deleted:
            raise WebhookNotFoundError(endpoint_id)
        return endpoint

    def signing_secrets(self, sealed: str, previous: str | None, previous_until: datetime | None,
                        now: datetime) -> list[str]:
        """The secrets a delivery at `now` is signed with: the current one, and the previous one in its window."""
        found = [self._cipher.open(sealed)]
        if previous and previous_until is not None and now < previous_until:
            found.append(self._cipher.open(previous))
        return found

    def _index(self, merchant: str) -> MerchantEndpoints:
        """The merchant's list of endpoints; when it does not exist yet, started with the endpoints the read model
        has (a merchant's endpoints made before the list existed count against the cap too)."""
        index = self._load_index(merchant)
        if index is None:
            known = self._endpoints.list_endpoints(merchant) if self._endpoints is not None else []
            index = MerchantEndpoints(merchant=merchant, endpoint_ids=[str(e.id) for e in known])
        return index

    def _load_index(self, merchant: str) -> MerchantEndpoints | None:
        try:
            index: MerchantEndpoints = self.repository.get(endpoints_index_id(merchant))
            return index
        except AggregateNotFoundError:
            return None

    def _get(self, endpoint_id: str) -> WebhookEndpoint | None:
        try:
            found: object = self.repository.get(UUID(str(endpoint_id)))
        except (AggregateNotFoundError, ValueError):
            return None
        return found if isinstance(found, WebhookEndpoint) else None  # not a merchant's list of endpoints

    def _check_resolves(self, url: str) -> None:
        """In production a hostname must resolve to public addresses only (checked again at every delivery)."""
        host = (urlsplit(url).hostname or "").rstrip(".")
        if self._production and not _is_literal(host):
            check_addresses(host, self.resolver.resolve(host))


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False
