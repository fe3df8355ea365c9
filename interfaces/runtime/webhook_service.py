"""What the CLI and the console API both do with webhooks, in one place: the Webhooks application's commands, the
outbox's commands (test, resend, replay) and its queries, answered in the API's JSON shapes. The endpoints table
holds every endpoint command's events once the command returns, whichever process issued it
(projections/read_your_writes.py): the endpoint cap counts every endpoint made so far."""

from __future__ import annotations

import builtins  # `list` below is a method: its annotations name the builtin
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from application.proxy_services import MerchantDirectory
from application.webhooks import PENDING_TESTS_PER_ENDPOINT, WebhookNotFoundError, Webhooks
from projections.webhook_outbox import payload
from projections.webhooks import Endpoint, WebhooksView


@dataclass(frozen=True)
class WebhookCollaborators:
    """What the webhook commands use (the composition root, interfaces/wiring.py, builds them)."""

    merchants: MerchantDirectory  # an unknown merchant is refused
    webhooks: Webhooks
    webhooks_view: WebhooksView  # the endpoints table and the outbox


class WebhookService:
    def __init__(self, collaborators: WebhookCollaborators) -> None:
        self._c = collaborators

    def create(self, merchant: str, url: str, events: list[str]) -> dict[str, Any]:
        """The new endpoint with its secret: the only answer that ever carries it."""
        self._c.merchants.get_merchant(merchant)  # MerchantNotFoundError for an unknown merchant
        endpoint, secret = self._c.webhooks.create(merchant, url, events)
        return {"id": str(endpoint.id), "url": endpoint.url, "events": endpoint.events, "enabled": True,
                "secret": secret}

    def list(self, merchant: str) -> list[dict[str, Any]]:
        return [e.public() for e in self._c.webhooks_view.list_endpoints(merchant)]

    def get(self, merchant: str, endpoint_id: str) -> dict[str, Any]:
        return self._endpoint(merchant, endpoint_id).public()

    def update(self, merchant: str, endpoint_id: str, *, url: str | None = None,
               events: builtins.list[str] | None = None,
               enabled: bool | None = None) -> dict[str, Any]:
        self._c.webhooks.update(endpoint_id, merchant, url=url, events=events, enabled=enabled)
        return self.get(merchant, endpoint_id)

    def delete(self, merchant: str, endpoint_id: str) -> None:
        self._c.webhooks.delete(endpoint_id, merchant)

    def rotate(self, merchant: str, endpoint_id: str) -> dict[str, Any]:
        secret = self._c.webhooks.rotate(endpoint_id, merchant)
        return {"id": endpoint_id, "secret": secret}

    def test(self, merchant: str, endpoint_id: str) -> dict[str, Any]:
        """Queue a `webhook.test` message to the endpoint; the worker sends it like any other."""
        endpoint, now = self._endpoint(merchant, endpoint_id), time.time()
        msg_id, body = ping_message(endpoint, now)
        if not self._c.webhooks_view.enqueue_test(endpoint, body, msg_id, now, at_most=PENDING_TESTS_PER_ENDPOINT):
            raise Webhooks.test_pending()
        return {"id": msg_id, "type": "webhook.test", "status": "pending"}

    def deliveries(self, merchant: str, endpoint_id: str, limit: int = 50) -> builtins.list[dict[str, Any]]:
        self._endpoint(merchant, endpoint_id)
        return self._c.webhooks_view.list_deliveries(endpoint_id, limit)

    def resend(self, merchant: str, endpoint_id: str, msg_id: str) -> dict[str, Any]:
        self._endpoint(merchant, endpoint_id)
        if not self._c.webhooks_view.resend(endpoint_id, msg_id, time.time()):
            raise WebhookNotFoundError(f"{endpoint_id} has no delivery {msg_id}")
        return {"id": msg_id, "status": "pending"}

    def replay(self, merchant: str, endpoint_id: str | None, since: float) -> dict[str, Any]:
        """Every failed delivery created since `since`, to one endpoint or all the merchant's, is pending again."""
        ids = [self._endpoint(merchant, endpoint_id).id] if endpoint_id else [
            e.id for e in self._c.webhooks_view.list_endpoints(merchant)]
        return {"replayed": self._c.webhooks_view.replay_failed(ids, since, time.time())}

    def _endpoint(self, merchant: str, endpoint_id: str) -> Endpoint:
        endpoint = self._c.webhooks_view.get_endpoint(str(endpoint_id))
        if endpoint is None or endpoint.merchant != merchant:
            raise WebhookNotFoundError(endpoint_id)
        return endpoint


def ping_message(endpoint: Endpoint, now: float) -> tuple[str, str]:
    """A `webhook.test` message (id, payload) for one endpoint."""
    msg_id = "msg_" + uuid.uuid4().hex
    body = payload("webhook.test", datetime.fromtimestamp(now, UTC),
                   {"endpoint": endpoint.id, "message": "a test event from Paywarden"})
    return msg_id, body
