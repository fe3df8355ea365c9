"""What the verify and settle commands answer: the spec's VerifyResponse and SettleResponse, as values."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from domain.codes import Code


@dataclass(frozen=True)
class VerifyOutcome:
    is_valid: bool
    payer: str | None = None
    invalid_reason: str | None = None
    simulation_details: dict[str, Any] | None = None
    replayed: bool = False

    @classmethod
    def invalid(cls, code: Code | str, payer: str | None = None, details: dict | None = None) -> VerifyOutcome:
        return cls(is_valid=False, payer=payer, invalid_reason=str(code), simulation_details=details)

    def as_replay(self) -> VerifyOutcome:
        return replace(self, replayed=True)


@dataclass(frozen=True)
class SettleOutcome:
    success: bool
    transaction: str | None = None
    network: str | None = None
    payer: str | None = None
    error_reason: str | None = None
    replayed: bool = False

    @classmethod
    def failed(cls, code: Code | str, payer: str | None = None, network: str | None = None,
               transaction: str | None = None) -> SettleOutcome:
        return cls(success=False, error_reason=str(code), payer=payer, network=network, transaction=transaction)

    @property
    def pending(self) -> bool:
        return self.error_reason == Code.SETTLEMENT_PENDING.value

    def as_replay(self) -> SettleOutcome:
        return replace(self, replayed=True)
