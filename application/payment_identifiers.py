"""The x402 `payment-identifier` extension at the proxy: a paying client's own id for one purchase.

A client that lost an answer sends the same payment again with the same id; one that reuses an id for another
payment made a mistake (or is replaying someone's id). The rule, once:
- the first payment presented with an id claims it (`Claim` of kind `payment-identifier`, subject the merchant's
  client id and the id: uuid5, so two payments racing for one id cannot both claim it, on any worker or host);
- the same id with another payment: refused, `payment_identifier_reused`, before anything of it is recorded;
- the same id with the same payment, once that payment's success was answered and its response served: the
  recorded outcome (the settle's success, with its transaction), never a second delivery nor a second charge;
- the same id with the same payment not served yet (new, pending, in flight, or a paid delivery still owed): the
  delivery rule decides (application/deliveries.py: forward, 202, 409, the owed delivery).
The facilitator's `Idempotency-Key` is the merchant's key for its own `/settle` calls; this is the payer's, at the
proxy (docs/proxy.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import IntegrityError

from application.outcomes import SettleOutcome, settle_outcome
from application.payment_checks import PaymentRequest
from application.payment_store import PaymentStore
from domain.claims import Claim, ClaimKind
from domain.idempotency import payment_id

IDENTIFIER_REUSED = "payment_identifier_reused"


@dataclass(frozen=True)
class AlreadyServed:
    """The payment this id names was served once: its recorded success (`settlement`), and no second delivery."""

    key: str
    settlement: SettleOutcome


@dataclass(frozen=True)
class IdentifierReused:
    """The id names another payment: this one is refused before anything of it is recorded."""

    key: str
    message: str
    reason: str = IDENTIFIER_REUSED


Identified = AlreadyServed | IdentifierReused


def identified(store: PaymentStore, request: PaymentRequest, identifier: str,
               save: Callable[..., Any]) -> Identified | None:
    """None: deliver as usual; else this id's answer. `save` is the application's (the claim is saved on its
    own, before the payment's first event: a payment the rules then refuse keeps its id, as it should)."""
    subject = f"{request.client.id}\x1f{identifier}"
    this_payment = str(payment_id(request.key))
    claim = store.claim(ClaimKind.PAYMENT_IDENTIFIER, subject)
    if claim is None:
        try:
            save(Claim(kind=ClaimKind.PAYMENT_IDENTIFIER.value, subject=subject, payment_id=this_payment))
            return None
        except IntegrityError:  # another payment claimed it a moment ago
            claim = store.claim(ClaimKind.PAYMENT_IDENTIFIER, subject)
    if claim is None or claim.payment_id != this_payment:
        return IdentifierReused(request.key, f"the payment id {identifier} names another payment; a new payment "
                                             "needs a new id")
    payment = store.payment(request.key)
    if payment is not None and payment.success_answered and (payment.delivered or not payment.delivery_failures):
        return AlreadyServed(request.key, settle_outcome(payment).as_replay())
    return None
