"""Falcon resources of the facilitator API: POST /verify, POST /settle, GET /supported."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import falcon

from application.outcomes import SettleOutcome
from application.payments import Payments
from domain.clients import Client
from domain.codes import Code
from domain.mcp_tools import ToolPrice
from domain.networks import SCHEME_EXACT, X402_VERSION
from domain.proxy_service import Route
from domain.scopes import ServiceScope
from domain.x402 import PaymentPayload, Requirements
from interfaces.adapters.signers import KeypairFeePayers
from interfaces.http.common.body import read_json
from interfaces.http.common.errors import WireError
from interfaces.http.facilitator.schemas import (
    PaymentRequestSchema,
    SupportedQuerySchema,
    fast_payment_request,
    settle_answer,
    verify_answer,
)
from projections.service_scopes import ServiceScopesView

REPLAYED = "Idempotent-Replayed"
IDEMPOTENCY_KEY = "Idempotency-Key"
_PRINTABLE = re.compile(r"^[\x21-\x7e][\x20-\x7e]{0,254}$")


class VerifyResource:
    operation, authenticate, rate_limit = "verify", True, "key"

    def __init__(self, payments: Payments) -> None:
        self._payments, self._schema = payments, PaymentRequestSchema()

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        payload, terms = _payment_request(self._schema, read_json(req))
        outcome = self._payments.verify(req.context.client, payload, terms)
        resp.status = falcon.HTTP_200 if outcome.is_valid else falcon.HTTP_400
        resp.media = verify_answer(outcome)
        if outcome.replayed:
            resp.set_header(REPLAYED, "true")


class SettleResource:
    operation, authenticate, rate_limit = "settle", True, "key"

    def __init__(self, payments: Payments) -> None:
        self._payments, self._schema = payments, PaymentRequestSchema()

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        payload, terms = _payment_request(self._schema, read_json(req))
        outcome = self._payments.settle(req.context.client, payload, terms, _idempotency_key(req))
        resp.status = _settle_status(outcome)
        resp.media = settle_answer(outcome)
        if outcome.replayed:
            resp.set_header(REPLAYED, "true")


def _payment_request(schema: PaymentRequestSchema, body: dict[str, Any]) -> tuple[PaymentPayload, Requirements]:
    """The payment and its terms: a plainly valid body without marshmallow, anything else through the schema (which
    refuses it with its messages, or loads the same objects)."""
    parsed = fast_payment_request(body)
    if parsed is not None:
        return parsed
    command = schema.load(body)
    return command["payment_payload"], command["payment_requirements"]


def _idempotency_key(req: falcon.Request) -> str | None:
    """Stripe's convention: 1 to 255 printable ASCII characters, sent again on a retry of the same settle."""
    key = req.get_header(IDEMPOTENCY_KEY)
    if key is not None and not _PRINTABLE.fullmatch(key):
        raise WireError(Code.INVALID_PAYLOAD, message=f"the {IDEMPOTENCY_KEY} header must be 1 to 255 printable "
                                                      "ASCII characters")
    return key


def _settle_status(outcome: SettleOutcome) -> str:
    """`settlement_pending` is a 200 (x402 v2: the SDKs retry once, and only on a 200 they can parse)."""
    if outcome.success or outcome.pending:
        return falcon.HTTP_200
    return falcon.HTTP_400


class SupportedResource:
    """The kinds the client's capabilities enable on the networks served here, each with `extra.feePayer`, and
    `signers` as x402 v2's reference facilitator sends them: CAIP family (`solana:*`) → its signer addresses, once
    each, in order, for the families of the kinds listed."""

    authenticate, rate_limit = True, "key"

    def __init__(self, served: list[str], fee_payers: KeypairFeePayers,
                 scopes: ServiceScopesView | None = None) -> None:
        self._served, self._fee_payers, self._query = served, fee_payers, SupportedQuerySchema()
        self._scopes = scopes

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        query = self._query.load(req.params)
        client = req.context.client
        networks = [n for n in self._served if any(c.network == n for c in client.capabilities)]
        if "service" in query:  # the kinds of that (own) service's routes matching `path`, or of its priced tools
            scope, priced = self._priced(client, query["service"], query.get("path"))
            if scope is None or not priced:
                scoped = f" (this key is scoped to {client.scope.slug})" if client.scope is not None else ""
                raise WireError("unknown_service", message="none of your services has this slug, or none of its "
                                f"routes or priced tools is at this path{scoped}")
            networks = scope.networks(networks, priced)
        elif client.scope is not None:  # a scoped key: only its service's kinds
            networks = client.scope.networks(networks)
        resp.media = {
            "kinds": [
                {"x402Version": X402_VERSION, "scheme": SCHEME_EXACT, "network": n,
                 "extra": {"feePayer": self._fee_payers.addresses(n)[0]}}
                for n in networks
            ],
            "extensions": [],
            "signers": _signers_by_family(networks, self._fee_payers),
        }

    def _priced(self, client: Client, slug: str,
                path: str | None) -> tuple[ServiceScope | None, Sequence[Route | ToolPrice]]:
        """The caller's service `slug` and what it charges at `path` (the service scopes read model)."""
        found = self._scopes.get_scope_by_slug(slug.lower()) if self._scopes is not None else None
        if found is None or found[0] != client.merchant:
            return None, ()
        scope = found[1]
        if client.scope is not None and client.scope.service_id != scope.service_id:
            return None, ()
        return scope, scope.terms_for(path)


def _signers_by_family(networks: list[str], fee_payers: KeypairFeePayers) -> dict[str, list[str]]:
    signers: dict[str, list[str]] = {}
    for n in networks:
        family = signers.setdefault(n.split(":", 1)[0] + ":*", [])
        family.extend(a for a in fee_payers.addresses(n) if a not in family)
    return signers
