"""Who is calling: a merchant's API key, or the unregistered public identity."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from domain.networks import KeyEnv
from domain.scopes import ServiceScope

ANONYMOUS_ID = "anonymous"
MERCHANT_PREFIX = "merchant:"  # a merchant's client id: the prefix, then the merchant's id


def merchant_client_id(merchant_id: object) -> str:
    """The client id payments of merchant `merchant_id` are recorded under (an API key's, or its proxy's)."""
    return f"{MERCHANT_PREFIX}{merchant_id}"


def merchant_of(client_id: object) -> str | None:
    """The merchant id in a client id; None for the anonymous identity."""
    text = str(client_id)
    return text.removeprefix(MERCHANT_PREFIX) if text.startswith(MERCHANT_PREFIX) else None


@dataclass(frozen=True)
class Capability:
    network: str
    scheme: str
    asset: str


@dataclass(frozen=True)
class Client:
    """The identity payments are keyed by; `registered` gates the discovery metadata
    (docs/architecture.md#the-interface-contract)."""

    id: str
    registered: bool
    env: KeyEnv | None = None
    merchant: str | None = None
    capabilities: frozenset[Capability] = field(default_factory=frozenset)
    any_capability: bool = False
    rate_limit_per_minute: int | None = None
    scope: ServiceScope | None = None  # a key scoped to a proxy service pays only for its routes (domain/scopes.py)

    def may_use(self, network: str, scheme: str, asset: str) -> bool:
        return self.any_capability or (network, scheme, asset) in self._capability_fields

    @cached_property  # the capabilities' fields: a lookup without making and hashing a `Capability` (~1 µs)
    def _capability_fields(self) -> frozenset[tuple[str, str, str]]:
        return frozenset((c.network, c.scheme, c.asset) for c in self.capabilities)
