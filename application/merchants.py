"""The Merchants application: accounts, their API keys and capabilities (the console's commands, CLI for now)."""

from __future__ import annotations

import secrets

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError

from domain.merchant import BASE62, Merchant, MerchantError, merchant_id
from domain.networks import SCHEME_EXACT, KeyEnv, network


class MerchantNotFoundError(MerchantError):
    """No merchant has that name."""


class MerchantExistsError(MerchantError):
    """A merchant with that name is already registered."""


def generate_key(env: KeyEnv) -> str:
    """`pw_<env>_` and 40 base62 characters from the operating system's CSPRNG."""
    return f"pw_{env.value}_" + "".join(secrets.choice(BASE62) for _ in range(40))


class Merchants(Application):
    def register(self, name: str) -> Merchant:
        merchant = Merchant.register(name)
        try:
            self.save(merchant)
        except IntegrityError as exists:
            raise MerchantExistsError(f"merchant {name} already exists") from exists
        return merchant

    def create_key(self, name: str, env: KeyEnv) -> tuple[str, str]:
        """Issue a key; return (key, prefix). The key itself is never stored: only its SHA-256."""
        merchant = self.get_merchant(name)
        api_key = generate_key(env)
        prefix = merchant.issue_key(api_key)
        self.save(merchant)
        return api_key, prefix

    def revoke_key(self, prefix: str, name: str) -> None:
        merchant = self.get_merchant(name)
        merchant.revoke_key(prefix)
        self.save(merchant)

    def enable_capability(self, name: str, caip2: str, asset: str | None = None,
                          scheme: str = SCHEME_EXACT) -> None:
        known = network(caip2)
        if known is None:
            raise MerchantError(f"network {caip2} is not one Paywarden serves")
        merchant = self.get_merchant(name)
        merchant.enable_capability(caip2, scheme, asset or known.usdc_mint)
        self.save(merchant)

    def set_rate_limit(self, name: str, per_minute: int) -> None:
        merchant = self.get_merchant(name)
        merchant.set_rate_limit(per_minute)
        self.save(merchant)

    def set_discovery(self, name: str, enabled: bool) -> None:
        merchant = self.get_merchant(name)
        merchant.toggle_discovery(enabled)
        self.save(merchant)

    def get_merchant(self, name: str) -> Merchant:
        try:
            return self.repository.get(merchant_id(name))
        except AggregateNotFoundError as missing:
            raise MerchantNotFoundError(f"no merchant named {name}") from missing
