"""GET /v1/payments/{id}: a payment and its event timeline, for the merchant that made it (404 for anyone else)."""

from __future__ import annotations

import falcon

from projections.payment_list import PaymentListView, get_payment_for


class PaymentResource:
    operation, authenticate, rate_limit = "payment", True, "key"

    def __init__(self, view: PaymentListView) -> None:
        self._view = view

    def on_get(self, req: falcon.Request, resp: falcon.Response, payment_id: str) -> None:
        client = req.context.client
        row = get_payment_for(self._view, payment_id, client.id) if client.registered else None
        if row is None:
            raise falcon.HTTPNotFound(title="not_found", description=f"no payment {payment_id} of yours")
        resp.media = {**row.as_dict(), "events": [e.as_dict() for e in self._view.get_timeline(payment_id)]}
