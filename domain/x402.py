"""Value objects of the x402 v2 wire protocol, after validation at the edge."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from json.encoder import encode_basestring_ascii
from typing import Any

from domain.networks import DEFAULT_MAX_TIMEOUT_SECONDS


@dataclass(frozen=True)
class Requirements:
    """One PaymentRequirements: what the merchant asks for. `amount` in atomic units."""

    scheme: str
    network: str
    amount: int
    asset: str
    pay_to: str
    max_timeout_seconds: int = DEFAULT_MAX_TIMEOUT_SECONDS
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def memo(self) -> str | None:
        """`extra.memo`: the transaction must carry it in its one Memo, and (payTo, memo) settles once."""
        memo = self.extra.get("memo")
        return memo if isinstance(memo, str) and memo else None

    @cached_property  # the fields are frozen; `extra` (for its memo) is never changed after validation
    def terms(self) -> tuple[str, ...]:
        """What a payment is bound to: a retry presenting other terms is not the same payment."""
        memo = self.memo
        terms = (self.scheme, self.network, str(self.amount), self.asset, self.pay_to)
        return terms if memo is None else (*terms, memo)

    @cached_property
    def digest(self) -> str:
        """The SHA-256 of the terms as `json.dumps` writes them in an array, recorded with a payment; each string
        written by the encoder's own function, without making an encoder (~2 of ~3 µs)."""
        array = "[" + ", ".join(map(encode_basestring_ascii, self.terms)) + "]"  # json.dumps(list(self.terms))
        return hashlib.sha256(array.encode()).hexdigest()

    def same_terms(self, other: Requirements) -> bool:
        """Equal terms, which is equal digests (the JSON array of strings is one-to-one), without hashing."""
        return self.terms == other.terms


@dataclass(frozen=True)
class PaymentPayload:
    """A PaymentPayload: the client's signed transaction and what it accepted."""

    transaction: str
    accepted: Requirements | None = None
    resource: dict[str, Any] | None = None
    extensions: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
