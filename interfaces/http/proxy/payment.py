"""The x402 side of the proxy: a route's PaymentRequirements, the 402 answer, the client's PAYMENT-SIGNATURE."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from domain.networks import DEFAULT_MAX_TIMEOUT_SECONDS
from domain.proxy_service import Route
from domain.x402 import PaymentPayload, Requirements
from interfaces.adapters.siwx import PAYMENT_IDENTIFIER, BadPaymentIdentifierError, payment_identifier

MAX_SIGNATURE_HEADER = 48 * 1024


class BadPaymentHeaderError(ValueError):
    """PAYMENT-SIGNATURE is not base64 JSON of an x402 v2 PaymentPayload."""


def requirements(route: Route, fee_payer: str) -> Requirements:
    return Requirements(scheme="exact", network=route.network, amount=route.price, asset=route.asset,
                        pay_to=route.pay_to, max_timeout_seconds=route.max_timeout_seconds,
                        extra={"feePayer": fee_payer})


def requirements_json(r: Requirements) -> dict[str, Any]:
    return {"scheme": r.scheme, "network": r.network, "amount": str(r.amount), "asset": r.asset, "payTo": r.pay_to,
            "maxTimeoutSeconds": r.max_timeout_seconds, "extra": dict(r.extra)}


def resource(route: Route, url: str) -> dict[str, Any]:
    described = {"url": url}
    if route.description:
        described["description"] = route.description
    if route.mime_type:
        described["mimeType"] = route.mime_type
    return described


def bazaar_extension(route: Route) -> dict[str, Any] | None:
    """The route's discovery metadata as x402's `bazaar` extension (`info`), the method filled in."""
    if not route.bazaar:
        return None
    info = dict(route.bazaar)
    if route.method != "*":
        info.setdefault("method", route.method)
    return {"info": info}


def payment_required(route: Route, r: Requirements, url: str, error: str,
                     extensions: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The 402's body; `extensions` makes the route's other x402 extensions from its `accepts` entry
    (interfaces/http/proxy/access.py)."""
    accepts = requirements_json(r)
    body: dict[str, Any] = {"x402Version": 2, "error": error, "resource": resource(route, url), "accepts": [accepts]}
    declared = dict(extensions(accepts)) if extensions is not None else {}
    if (bazaar := bazaar_extension(route)) is not None:
        declared["bazaar"] = bazaar
    if declared:
        body["extensions"] = declared
    return body


def encode_header(value: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(value, separators=(",", ":")).encode()).decode()


def parse_signature(header: str, route: Route, url: str) -> PaymentPayload:
    """The client's payload as it wrote it (its `accepted` terms are checked against the route's by the payment's
    own checks, application/payment_checks.py), with the proxy's own resource and extensions (the route is the
    authority on what is being sold and what discovery lists, not the client)."""
    if len(header) > MAX_SIGNATURE_HEADER:
        raise BadPaymentHeaderError("PAYMENT-SIGNATURE is too large")
    try:
        data = json.loads(base64.b64decode(header, validate=True))
    except (binascii.Error, ValueError):
        raise BadPaymentHeaderError("PAYMENT-SIGNATURE is not base64 JSON") from None
    if not isinstance(data, dict) or data.get("x402Version") != 2:
        raise BadPaymentHeaderError("PAYMENT-SIGNATURE must be an x402 v2 payload")
    payload = data.get("payload")
    transaction = payload.get("transaction") if isinstance(payload, dict) else None
    if not isinstance(transaction, str) or not transaction:
        raise BadPaymentHeaderError("PAYMENT-SIGNATURE carries no payload.transaction")
    accepted = data.get("accepted")
    bazaar = bazaar_extension(route)
    try:
        identifier = payment_identifier(data)
    except BadPaymentIdentifierError as bad:
        raise BadPaymentHeaderError(str(bad)) from None
    extensions: dict[str, Any] = {"bazaar": bazaar} if bazaar else {}
    if identifier is not None:  # recorded with the payment, so the audit history shows the client's id
        extensions[PAYMENT_IDENTIFIER] = {"info": {"required": False, "id": identifier}}
    return PaymentPayload(transaction=transaction, accepted=None if accepted is None else accepted_terms(accepted),
                          resource=resource(route, url), extensions=extensions)


def identifier_of(payload: PaymentPayload) -> str | None:
    """The client's payment id that `parse_signature` kept."""
    found = payload.extensions.get(PAYMENT_IDENTIFIER)
    return str(found["info"]["id"]) if isinstance(found, dict) else None


def accepted_terms(value: Any) -> Requirements:
    """The terms the client accepted, as written (only their shape is checked here)."""
    if not isinstance(value, dict):
        raise BadPaymentHeaderError("PAYMENT-SIGNATURE's accepted is not an object")
    amount, timeout, extra = str(value.get("amount")), value.get("maxTimeoutSeconds"), value.get("extra")
    if not amount.isascii() or not amount.isdigit():
        raise BadPaymentHeaderError("PAYMENT-SIGNATURE's accepted.amount is not a string of atomic units")
    return Requirements(scheme=str(value.get("scheme")), network=str(value.get("network")), amount=int(amount),
                        asset=str(value.get("asset")), pay_to=str(value.get("payTo")),
                        max_timeout_seconds=timeout if isinstance(timeout, int) else DEFAULT_MAX_TIMEOUT_SECONDS,
                        extra=extra if isinstance(extra, dict) else {})


def settle_response(success: bool, transaction: str | None, network: str | None, payer: str | None,
                    error_reason: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"success": success}
    for name, value in (("transaction", transaction), ("network", network), ("payer", payer),
                        ("errorReason", error_reason)):
        if value is not None:
            body[name] = value
    return body
