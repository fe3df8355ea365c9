"""The Merchant aggregate: an account, its API keys (stored as SHA-256 only) and its capabilities."""

from __future__ import annotations

import hashlib
import hmac
import re
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.errors import DomainError
from domain.networks import KeyEnv

KEY_PATTERN = re.compile(r"^pw_(live|test)_([0-9A-Za-z]{40})$")
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
KEY_PREFIX_LENGTH = len("pw_test_") + 8
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


class MerchantError(DomainError):
    """A merchant operation the rules refuse (unknown key, bad name, ...)."""


def key_hash(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


def key_prefix(api_key: str) -> str:
    """The public handle of a key: its environment and first 8 random characters."""
    return api_key[:KEY_PREFIX_LENGTH]


def same_hash(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def parse_key(api_key: str) -> KeyEnv | None:
    """The key's environment if it has the documented shape, else None."""
    match = KEY_PATTERN.fullmatch(api_key)
    return KeyEnv(match.group(1)) if match else None


class Merchant(Aggregate):
    class Registered(Aggregate.Created):
        name: str

    class KeyIssued(Aggregate.Event):
        prefix: str
        key_hash: str
        env: str

    class KeyRevoked(Aggregate.Event):
        prefix: str

    class CapabilityEnabled(Aggregate.Event):
        network: str
        scheme: str
        asset: str

    class RateLimitSet(Aggregate.Event):
        per_minute: int

    class DiscoveryToggled(Aggregate.Event):
        enabled: bool

    @staticmethod
    def create_id(name: str) -> UUID:
        return merchant_id(name)

    @event(Registered)
    def __init__(self, name: str) -> None:
        self.name = name
        self.keys: dict[str, dict[str, object]] = {}
        self.capabilities: set[tuple[str, str, str]] = set()
        self.rate_limit_per_minute: int | None = None
        self.discovery_enabled = True

    @classmethod
    def register(cls, name: str) -> Merchant:
        if not NAME_PATTERN.fullmatch(name):
            raise MerchantError(f"merchant name {name!r} must be 1-63 of a-z 0-9 . _ - (lowercase)")
        return cls(name=name)

    def issue_key(self, api_key: str) -> str:
        env = parse_key(api_key)
        if env is None:
            raise MerchantError("an API key must read pw_live_ or pw_test_ then 40 base62 characters")
        prefix = key_prefix(api_key)
        if prefix in self.keys:
            raise MerchantError(f"key prefix {prefix} already issued")
        self._issue_key(prefix=prefix, key_hash=key_hash(api_key), env=env.value)
        return prefix

    @event(KeyIssued)
    def _issue_key(self, prefix: str, key_hash: str, env: str) -> None:
        self.keys[prefix] = {"key_hash": key_hash, "env": env, "revoked": False}

    def revoke_key(self, prefix: str) -> None:
        if prefix not in self.keys:
            raise MerchantError(f"merchant {self.name} has no key {prefix}")
        if not self.keys[prefix]["revoked"]:
            self._revoke_key(prefix=prefix)

    @event(KeyRevoked)
    def _revoke_key(self, prefix: str) -> None:
        self.keys[prefix]["revoked"] = True

    def enable_capability(self, network: str, scheme: str, asset: str) -> None:
        if (network, scheme, asset) not in self.capabilities:
            self._enable_capability(network=network, scheme=scheme, asset=asset)

    @event(CapabilityEnabled)
    def _enable_capability(self, network: str, scheme: str, asset: str) -> None:
        self.capabilities.add((network, scheme, asset))

    def set_rate_limit(self, per_minute: int) -> None:
        if per_minute < 1:
            raise MerchantError("a rate limit is at least 1 request per minute")
        self._set_rate_limit(per_minute=per_minute)

    @event(RateLimitSet)
    def _set_rate_limit(self, per_minute: int) -> None:
        self.rate_limit_per_minute = per_minute

    def toggle_discovery(self, enabled: bool) -> None:
        if enabled != self.discovery_enabled:
            self._toggle_discovery(enabled=enabled)

    @event(DiscoveryToggled)
    def _toggle_discovery(self, enabled: bool) -> None:
        self.discovery_enabled = enabled


MERCHANT_NAMESPACE = uuid5(NAMESPACE_URL, "https://paywarden.dev/merchants")


def merchant_id(name: str) -> UUID:
    return uuid5(MERCHANT_NAMESPACE, name)
