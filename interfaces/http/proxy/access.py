"""The proxy's side of "pay once, come back" and of the payment id: what a 402 declares, how a grant is answered.

The rules are the application's (application/access.py, application/payment_identifiers.py); this module only
builds the 402's `extensions` with the SDK (interfaces/adapters/siwx.py) and names the HTTP answers.
"""

from __future__ import annotations

from typing import Any

from application.payment_identifiers import AlreadyServed, Identified
from domain.access import ONCE_PAID
from domain.proxy_service import Route
from interfaces.adapters.siwx import challenge, origin_of, payment_identifier_declaration
from interfaces.http.proxy.payment import encode_header, settle_response

ALREADY_SERVED = "payment_already_served"
__all__ = ["ALREADY_SERVED", "ONCE_PAID", "extensions", "identified_answer", "origin_of"]  # what app.py takes here


def extensions(route: Route, url: str, accepts: dict[str, Any]) -> dict[str, Any]:
    """The 402's x402 extensions beside `bazaar`: `payment-identifier` (optional) on every route, and a fresh
    `sign-in-with-x` challenge on a once-paid route, bound to the gateway's origin and the resource `url`."""
    declared = payment_identifier_declaration()
    if route.access == ONCE_PAID:
        declared.update(challenge(origin_of(url), url, accepts))
    return declared


def identified_answer(result: Identified) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The 409's body and headers for a payment id's own answer (application/payment_identifiers.py): the same
    payment already served (its recorded success in PAYMENT-RESPONSE, never a second delivery), or an id reused for
    another payment. Not a 402: paying again would not help."""
    if isinstance(result, AlreadyServed):
        s = result.settlement
        response = encode_header(settle_response(True, s.transaction, s.network, s.payer))
        return ({"error": ALREADY_SERVED, "transaction": s.transaction,
                 "message": "this payment was settled and its response served once; it is not served again"},
                [("PAYMENT-RESPONSE", response), ("Cache-Control", "no-store")])
    return {"error": result.reason, "message": result.message}, [("Cache-Control", "no-store")]
