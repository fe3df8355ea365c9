"""Domain errors. Each carries the reason code the API answers with."""

from __future__ import annotations

from domain.codes import Code


class DomainError(Exception):
    """Base of every rule the domain refuses."""


class PaymentRuleError(DomainError):
    """A payment that breaks a rule of the `exact` scheme; `code` is the spec's reason code."""

    def __init__(self, code: Code, message: str, *, payer: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.payer = code, message, payer


class PaymentStateError(DomainError):
    """A transition the payment state machine does not allow."""

    def __init__(self, payment_id: object, state: object, action: str) -> None:
        super().__init__(f"payment {payment_id} in state {state} cannot {action}")
