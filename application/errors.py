"""The Payments application's errors: refusals that are not a rule of the `exact` scheme (those are the domain's
`PaymentRuleError`). The HTTP edge maps each one once (`interfaces/http/common/errors.py`)."""

from __future__ import annotations

from typing import Any

from domain.codes import Code
from domain.errors import PaymentRuleError


class KeyEnvironmentError(Exception):
    """A test key used on mainnet, or a live key on devnet."""


class DuplicateRequestError(Exception):
    """Another request for the same payment holds its lock, or won the race to the event store."""


class UpstreamFailedError(Exception):
    """The upstream gave no answer, or its answer broke off (a timeout, a refused connection or address, a body
    cut short): `reason` is a stable code for the client and the logs (`upstream_timeout`, ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


class SimulationFailedError(PaymentRuleError):
    """The chain's simulation of the co-signed transaction failed; `details` is the spec's `simulationDetails`."""

    def __init__(self, payer: str, details: dict[str, Any]) -> None:
        super().__init__(Code.SIMULATION_FAILED, details["error"], payer=payer)
        self.details = details


def rule_details(refused: PaymentRuleError) -> dict[str, Any] | None:
    """The `simulationDetails` a refusal carries (only a failed simulation has any)."""
    return refused.details if isinstance(refused, SimulationFailedError) else None
