"""The Merchant aggregate: an account, its API keys (stored as SHA-256 only), capabilities, owner logins,
domains and discovery setting. Every change the console or the CLI makes is one of its events."""

from __future__ import annotations

import hashlib
import hmac
import re
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from solders.pubkey import Pubkey

from domain.errors import DomainError
from domain.networks import KeyEnv

KEY_PATTERN = re.compile(r"^pw_(live|test)_([0-9A-Za-z]{40})$")
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
KEY_PREFIX_LENGTH = len("pw_test_") + 8
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


class MerchantError(DomainError):
    """A merchant operation the rules refuse (unknown key, bad name, ...); `field` names the input at fault."""

    field: str | None = None

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field or type(self).field


class MerchantConflictError(MerchantError):
    """The request conflicts with the merchant's state (already revoked, already exists, not verified ...)."""


class UnknownObjectError(MerchantError):
    """The merchant has no such key, capability or domain (another merchant's is just as unknown)."""


def capability_id(network: str, scheme: str, asset: str) -> str:
    """A capability's stable public handle: 12 hex characters of SHA-256 over its three parts."""
    return hashlib.sha256(f"{network}|{scheme}|{asset}".encode()).hexdigest()[:12]


def is_mint_address(text: str) -> bool:
    """A base58 string of a 32-byte account address (what a token mint is)."""
    try:
        return str(Pubkey.from_string(text)) == text
    except ValueError:
        return False


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
        label: str = ""  # events recorded before labels existed read as ""
        service: str = ""

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

    class CapabilityDisabled(Aggregate.Event):
        network: str
        scheme: str
        asset: str

    class LoginAdded(Aggregate.Event):
        email: str  # the OwnerLogin aggregate (domain/login.py) holds its password

    class DomainAdded(Aggregate.Event):
        domain: str
        token: str

    class DomainVerified(Aggregate.Event):
        domain: str
        method: str  # dns, http, or sandbox (localhost, pre-verified)

    class DomainRemoved(Aggregate.Event):
        domain: str

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
        self.logins: set[str] = set()
        self.domains: dict[str, dict[str, object]] = {}

    @classmethod
    def register(cls, name: str) -> Merchant:
        if not NAME_PATTERN.fullmatch(name):
            raise MerchantError(f"merchant name {name!r} must be 1-63 of a-z 0-9 . _ - (lowercase)")
        return cls(name=name)

    def issue_key(self, api_key: str, label: str = "", service: str = "") -> str:
        env = parse_key(api_key)
        if env is None:
            raise MerchantError("an API key must read pw_live_ or pw_test_ then 40 base62 characters")
        if len(label) > 100 or not label.isprintable():
            raise MerchantError("a label is at most 100 printable characters", field="label")
        if len(service) > 200 or not service.isprintable():
            raise MerchantError("a service is at most 200 printable characters", field="service")
        prefix = key_prefix(api_key)
        if prefix in self.keys:
            raise MerchantError(f"key prefix {prefix} already issued")
        self._issue_key(prefix=prefix, key_hash=key_hash(api_key), env=env.value, label=label, service=service)
        return prefix

    @event(KeyIssued)
    def _issue_key(self, prefix: str, key_hash: str, env: str, label: str = "", service: str = "") -> None:
        self.keys[prefix] = {"key_hash": key_hash, "env": env, "revoked": False}

    def revoke_key(self, prefix: str) -> None:
        """Revoke a key; revoking it twice is a conflict the caller can report ("already revoked")."""
        if prefix not in self.keys:
            raise UnknownObjectError(f"merchant {self.name} has no key {prefix}", field="prefix")
        if self.keys[prefix]["revoked"]:
            raise MerchantConflictError(f"key {prefix}… was already revoked", field="prefix")
        self._revoke_key(prefix=prefix)

    @event(KeyRevoked)
    def _revoke_key(self, prefix: str) -> None:
        self.keys[prefix]["revoked"] = True

    def enable_capability(self, network: str, scheme: str, asset: str) -> str:
        if not is_mint_address(asset):
            raise MerchantError(f"asset {asset!r} is not a base58 mint address (32 bytes)", field="asset")
        if (network, scheme, asset) not in self.capabilities:
            self._enable_capability(network=network, scheme=scheme, asset=asset)
        return capability_id(network, scheme, asset)

    @event(CapabilityEnabled)
    def _enable_capability(self, network: str, scheme: str, asset: str) -> None:
        self.capabilities.add((network, scheme, asset))

    def disable_capability(self, cap_id: str) -> tuple[str, str, str]:
        for capability in self.capabilities:
            if capability_id(*capability) == cap_id:
                self._disable_capability(network=capability[0], scheme=capability[1], asset=capability[2])
                return capability
        raise UnknownObjectError(f"no capability {cap_id}", field="id")

    @event(CapabilityDisabled)
    def _disable_capability(self, network: str, scheme: str, asset: str) -> None:
        self.capabilities.discard((network, scheme, asset))

    def add_login(self, email: str) -> None:
        if email in self.logins:
            raise MerchantConflictError(f"{email} already logs in to {self.name}", field="email")
        self._add_login(email=email)

    @event(LoginAdded)
    def _add_login(self, email: str) -> None:
        self.logins.add(email)

    def add_domain(self, domain: str, token: str) -> None:
        if domain in self.domains:
            raise MerchantConflictError(f"{domain} is already one of your domains", field="domain")
        self._add_domain(domain=domain, token=token)

    @event(DomainAdded)
    def _add_domain(self, domain: str, token: str) -> None:
        self.domains[domain] = {"token": token, "verified": False}

    def domain_token(self, domain: str) -> str:
        return str(self._domain(domain)["token"])

    def has_domain(self, domain: str) -> bool:
        return domain in self.domains

    def is_verified(self, domain: str) -> bool:
        """Whether a check proved control of `domain`, one of the merchant's (UnknownObjectError otherwise)."""
        return bool(self._domain(domain)["verified"])

    def verified_domains(self) -> frozenset[str]:
        """The domains whose control a check proved: what a proxy service's base URL may be on."""
        return frozenset(name for name, record in self.domains.items() if record["verified"])

    def verify_domain(self, domain: str, method: str) -> None:
        if not self._domain(domain)["verified"]:
            self._verify_domain(domain=domain, method=method)

    @event(DomainVerified)
    def _verify_domain(self, domain: str, method: str) -> None:
        self.domains[domain]["verified"] = True

    def remove_domain(self, domain: str) -> None:
        self._domain(domain)
        self._remove_domain(domain=domain)

    @event(DomainRemoved)
    def _remove_domain(self, domain: str) -> None:
        del self.domains[domain]

    def _domain(self, domain: str) -> dict[str, object]:
        if domain not in self.domains:
            raise UnknownObjectError(f"{domain} is not one of your domains", field="domain")
        return self.domains[domain]

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
