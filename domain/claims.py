"""Claims: a fact that may be true of one payment only, made unique by the event store itself.

A claim's id is derived from what it claims, so a second claim of the same thing cannot be saved: the event
store's uniqueness on (originator id, version) decides, atomically with the payment's own event saved beside it.
- `transaction`: one on-chain transaction (its message hash) settles at most one payment, across every client;
- `memo`: a `(payTo, extra.memo)` pair settles at most once;
- `idempotency-key`: a merchant's `Idempotency-Key` header names one payment only;
- `payment-identifier`: a paying client's x402 `payment-identifier` id names one payment of a merchant only.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

CLAIM_NAMESPACE = UUID("0b6b2a7e-3f0e-4c52-9d1c-7a4e58f3c1d2")


class ClaimKind(StrEnum):
    TRANSACTION = "transaction"
    MEMO = "memo"
    IDEMPOTENCY_KEY = "idempotency-key"
    PAYMENT_IDENTIFIER = "payment-identifier"


def claim_id(kind: ClaimKind, subject: str) -> UUID:
    return uuid5(CLAIM_NAMESPACE, f"{kind.value}\x1f{subject}")


class Claim(Aggregate):
    """`subject` (of `kind`) belongs to the payment `payment_id`."""

    class Made(Aggregate.Created):
        kind: str
        subject: str
        payment_id: str

    @staticmethod
    def create_id(kind: str, subject: str, **_: Any) -> UUID:
        return claim_id(ClaimKind(kind), subject)

    @event(Made)
    def __init__(self, kind: str, subject: str, payment_id: str) -> None:
        self.kind, self.subject, self.payment_id = kind, subject, payment_id
