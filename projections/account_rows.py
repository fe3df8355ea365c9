"""The rows the accounts read model answers the console and the CLI with (projections/accounts.py): merchants,
owner logins, keys, capabilities and domains as a merchant sees them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from domain.domains import challenge_name, challenge_url, challenge_value


def iso(moment: datetime) -> str:
    """UTC, to the second, `Z`-suffixed: what the console API answers."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class MerchantRow:
    merchant_id: str
    name: str
    created_at: str
    discovery_enabled: bool
    rate_limit_per_minute: int | None
    logins: int = 0
    keys: int = 0


@dataclass(frozen=True)
class LoginRow:
    email: str
    merchant_id: str
    merchant: str
    password_hash: str | None


@dataclass(frozen=True)
class KeyRow:
    prefix: str
    env: str
    label: str
    service: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


@dataclass(frozen=True)
class CapabilityRow:
    id: str
    network: str
    scheme: str
    asset: str
    enabled_at: str


@dataclass(frozen=True)
class DomainRow:
    domain: str
    status: str  # pending or verified
    method: str | None
    added_at: str
    verified_at: str | None
    token: str

    @property
    def dns_name(self) -> str:
        return challenge_name(self.domain)

    @property
    def dns_value(self) -> str:
        return challenge_value(self.token)

    @property
    def http_url(self) -> str:
        return challenge_url(self.domain, self.token)
