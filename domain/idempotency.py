"""The idempotency key of a payment, and the aggregate id derived from it.

The key is SHA-256 over the client identity, the amount and the transaction's message hash
(docs/architecture.md#decisions-where-the-x402-specification-is-open). Not the client's signature: it is
unverified when the key is derived, so a forged twin carrying a genuine payment's signature would share its key
and poison its answer; the message hash differs for every different transaction, and the x402 SDK keys its own
caches on it too.

The Payment's id is a uuid5 of the key, so a second creation of the same payment is refused by
the event store itself: that is the atomic upsert.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from uuid import UUID, uuid5

PAYMENT_NAMESPACE = UUID("5d1d7b0e-7f3c-4a43-9a55-6b1f0e2c9a01")


def idempotency_key(client_id: str, amount: int, message_hash: str) -> str:
    material = "\x1f".join((client_id, str(amount), message_hash))
    return hashlib.sha256(material.encode()).hexdigest()


@lru_cache(maxsize=4096)
def payment_id(key: str) -> UUID:
    """A pure function of the key, kept for the keys seen last: a request derives it when it reads the payment and
    again when it creates it (~8 µs each: SHA-1 and `UUID`'s checks)."""
    return uuid5(PAYMENT_NAMESPACE, key)
