"""The Merchants application: accounts, owner logins, API keys, capabilities, domains and the discovery setting.

The console's JSON API, its pages and the CLI call these commands; each records its events in one `save`.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError, JSONTranscoder, Transcoding
from eventsourcing.system import Leader

from domain.domains import (
    SANDBOX_DOMAIN,
    DomainRefusedError,
    challenge_name,
    challenge_url,
    challenge_value,
    normalize_domain,
    within,
)
from domain.login import OwnerLogin, check_email, check_password, login_id
from domain.merchant import (
    BASE62,
    Merchant,
    MerchantConflictError,
    MerchantError,
    UnknownObjectError,
    merchant_id,
)
from domain.networks import MAINNET, NETWORKS, SCHEME_EXACT, KeyEnv, network

INVITE_LIFETIME = timedelta(days=7)
# A merchant is loaded by every console request and every paid proxied request: a snapshot every this many events
# bounds what a load replays, however many keys, domains and settings it has been through.
SNAPSHOT_EVERY = 50


class MerchantNotFoundError(MerchantError):
    """No merchant has that name."""


class MerchantExistsError(MerchantConflictError):
    """A merchant with that name is already registered."""


class DomainNotVerifiedError(MerchantConflictError):
    """Neither the DNS record nor the HTTP token proves control of the domain (the message says what was seen)."""


class PasswordHasher(Protocol):
    """argon2id in production (interfaces/adapters/passwords.py)."""

    def hash(self, password: str) -> str: ...


class DomainChallenges(Protocol):
    """What the outside world publishes for a domain: TXT records by DNS, a file over HTTPS."""

    def txt_records(self, name: str) -> list[str]: ...

    def fetch(self, url: str) -> str | None: ...


class PublicSuffixes(Protocol):
    def is_public_suffix(self, domain: str) -> bool: ...


class DomainUsage(Protocol):
    """What the merchant's proxy services tell the console (the proxy application answers): how many use a
    domain, and which service a scoped key names."""

    def services_on_domain(self, merchant_id: str, domain: str) -> int: ...

    def service_id_for(self, merchant: str, ref: str) -> str | None:
        """The id of the merchant's live proxy service whose id or current slug is `ref`; None if none."""
        ...


@dataclass(frozen=True)
class MerchantSettings:
    """What this deployment serves and refuses (from the configuration)."""

    served_networks: frozenset[str] = frozenset(NETWORKS)
    production: bool = False
    own_domains: tuple[str, ...] = ()  # the service's own: no merchant may claim them
    blocked_domains: tuple[str, ...] = ()  # PAYWARDEN_BLOCKED_DOMAINS

    def refusal(self, domain: str) -> str | None:
        """Why no merchant may use `domain` (or a subdomain of a listed one), or None."""
        for listed, why in ((self.own_domains, "is the service's own"),
                            (self.blocked_domains, "is blocked by the operator")):
            if any(within(domain, blocked) for blocked in listed):
                return f"{domain} {why}"
        return None


@dataclass(frozen=True)
class DomainChallenge:
    domain: str
    token: str
    dns_name: str
    dns_value: str
    http_url: str


@dataclass
class Enabled:
    capability_id: str
    warnings: list[str] = field(default_factory=list)


def generate_key(env: KeyEnv) -> str:
    """`pw_<env>_` and 40 base62 characters from the operating system's CSPRNG."""
    return f"pw_{env.value}_" + "".join(secrets.choice(BASE62) for _ in range(40))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def challenge(domain: str, token: str) -> DomainChallenge:
    return DomainChallenge(domain, token, challenge_name(domain), challenge_value(token), challenge_url(domain, token))


class _SetTranscoding(Transcoding):
    """A merchant's sets (its logins; its capabilities, tuples), in its snapshots: a sorted list, and back."""

    type, name = set, "set"

    def encode(self, obj: set[object]) -> list[object]:
        return sorted(obj, key=repr)

    def decode(self, data: list[object]) -> set[object]:
        return {tuple(item) if isinstance(item, list) else item for item in data}


class MerchantRecords(Application[UUID]):
    """The merchants' store, read: what another application asks of a merchant (ProxyServices: its verified
    domains and capabilities). It needs no collaborator, so it is built before the applications that ask, and
    `Merchants`, which asks them (`DomainUsage`), is built after them (docs/console.md, "Merchants and proxy
    services: who asks whom")."""

    name = "Merchants"  # the merchants' store and notification log
    snapshotting_intervals = {Merchant: SNAPSHOT_EVERY}

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        super().register_transcodings(transcoder)
        transcoder.register(_SetTranscoding())

    def get_merchant(self, name: str) -> Merchant:
        try:
            return self.repository.get(merchant_id(name))
        except AggregateNotFoundError as missing:
            raise MerchantNotFoundError(f"no merchant named {name}", field="merchant") from missing


# A Leader: each save prompts the followers it leads, the read models of its log in the commanding process, before
# the command returns (projections/read_your_writes.py).
class Merchants(MerchantRecords, Leader[UUID]):
    def __init__(self, env: Mapping[str, str] | None = None, *, settings: MerchantSettings | None = None,
                 hasher: PasswordHasher | None = None, challenges: DomainChallenges | None = None,
                 suffixes: PublicSuffixes | None = None, usage: DomainUsage | None = None) -> None:
        super().__init__(env)
        self.settings = settings or MerchantSettings()
        self._hasher, self._challenges, self._suffixes, self._usage = hasher, challenges, suffixes, usage

    # -- accounts and logins --------------------------------------------------------------------------------

    def register(self, name: str) -> Merchant:
        merchant = Merchant.register(name)
        try:
            self.save(merchant)
        except IntegrityError as exists:
            raise MerchantExistsError(f"merchant {name} already exists", field="name") from exists
        return merchant

    def add_login(self, name: str, email: str, password: str | None = None) -> str | None:
        """Add an owner login; with no password, return a one-time token for the password-setting link."""
        email = check_email(email)
        if password is not None:
            check_password(password)
        merchant = self.get_merchant(name)
        merchant.add_login(email)
        login = OwnerLogin(email=email, merchant_id=merchant.id)
        token = self._issue(login) if password is None else None
        if password is not None:
            login.set_password(self._hash(password))
        try:
            self.save(merchant, login)
        except IntegrityError as taken:
            raise MerchantConflictError(f"{email} already logs in to a merchant", field="email") from taken
        return token

    def invite(self, email: str) -> str:
        """A fresh password-setting token for an existing login (the previous one stops working)."""
        login = self._login(email)
        token = self._issue(login)
        self.save(login)
        return token

    def set_password_with_token(self, token: str, password: str) -> str:
        """Redeem a one-time link; return the login's email."""
        check_password(password)
        login_hex, _, _ = token.partition(".")
        try:
            login: OwnerLogin = self.repository.get(UUID(hex=login_hex))
        except (ValueError, AggregateNotFoundError):
            raise MerchantConflictError("this password link is not valid (used, replaced or expired)",
                                        field="token") from None
        login.redeem_invite(token_hash(token), datetime.now(UTC), self._hash(password))
        self.save(login)
        return str(login.email)

    def set_password(self, email: str, password: str) -> None:
        check_password(password)
        login = self._login(email)
        login.set_password(self._hash(password))
        self.save(login)

    # -- keys -----------------------------------------------------------------------------------------------

    def create_key(self, name: str, env: KeyEnv, label: str = "", service: str = "") -> tuple[str, str]:
        """Issue a key; return (key, prefix). The key itself is never stored: only its SHA-256. `service` (the
        id or current slug of one of the merchant's proxy services) scopes the key to that service's routes; the
        event records the service's id, which a base-URL edit does not change."""
        if env is KeyEnv.LIVE and MAINNET.caip2 not in self.settings.served_networks:
            raise MerchantError("live keys pay on mainnet, which this deployment does not serve "
                                "(set PAYWARDEN_MAINNET_RPC_URL); create a test key", field="env")
        merchant = self.get_merchant(name)
        scoped = self._service_id(name, service.strip()) if service.strip() else ""
        api_key = generate_key(env)
        prefix = merchant.issue_key(api_key, label=label.strip(), service=scoped)
        self.save(merchant)
        return api_key, prefix

    def revoke_key(self, prefix: str, name: str) -> None:
        merchant = self.get_merchant(name)
        merchant.revoke_key(prefix)
        self.save(merchant)

    # -- capabilities ---------------------------------------------------------------------------------------

    def enable_capability(self, name: str, caip2: str, asset: str | None = None,
                          scheme: str = SCHEME_EXACT) -> Enabled:
        """Enable (network, scheme, asset); a network this deployment does not serve is refused in production
        and enabled with a warning in the sandbox."""
        known = network(caip2)
        if known is None:
            raise MerchantError(f"network {caip2} is not one Paywarden serves", field="network")
        if scheme != SCHEME_EXACT:
            raise MerchantError(f"scheme {scheme!r} is not served: only exact", field="scheme")
        warnings = []
        if caip2 not in self.settings.served_networks:
            message = f"this deployment does not serve {known.name} ({caip2})"
            if self.settings.production:
                raise MerchantError(message, field="network")
            warnings.append(message + ": payments on it will be refused until it is served")
        merchant = self.get_merchant(name)
        cap_id = merchant.enable_capability(caip2, scheme, (asset or known.usdc_mint).strip())
        self.save(merchant)
        return Enabled(cap_id, warnings)

    def disable_capability(self, name: str, cap_id: str) -> None:
        merchant = self.get_merchant(name)
        merchant.disable_capability(cap_id)
        self.save(merchant)

    # -- domains --------------------------------------------------------------------------------------------

    def add_domain(self, name: str, raw: str) -> DomainChallenge:
        domain = normalize_domain(raw)
        if (refused := self.settings.refusal(domain)) is not None:
            raise DomainRefusedError(refused)
        if self._suffixes is not None and self._suffixes.is_public_suffix(domain):
            raise DomainRefusedError(f"{domain} is a public suffix; claim a domain registered under it")
        merchant = self.get_merchant(name)
        token = secrets.token_urlsafe(24)
        merchant.add_domain(domain, token)
        self.save(merchant)
        return challenge(domain, token)

    def verify_domain(self, name: str, raw: str) -> str:
        """Look for the DNS TXT record, then the HTTPS token; record the proof. Return the method that worked."""
        merchant = self.get_merchant(name)
        domain = raw.strip().rstrip(".").lower()
        wanted = challenge(domain, merchant.domain_token(domain))
        if merchant.is_verified(domain):
            return "already"
        if self._challenges is None:
            raise DomainNotVerifiedError("domain verification is not configured here", field="domain")
        records = self._challenges.txt_records(wanted.dns_name)
        if wanted.dns_value in records:
            method = "dns"
        elif (self._challenges.fetch(wanted.http_url) or "").strip() == wanted.token:
            method = "http"
        else:
            seen = f"found {', '.join(repr(r) for r in records)}" if records else "found no TXT record"
            raise DomainNotVerifiedError(
                f"at {wanted.dns_name} we {seen} (expected {wanted.dns_value!r}), and {wanted.http_url} did not "
                "serve the token", field="domain")
        merchant.verify_domain(domain, method)
        self.save(merchant)
        return method

    def remove_domain(self, name: str, raw: str) -> None:
        merchant = self.get_merchant(name)
        domain = raw.strip().rstrip(".").lower()
        if self._usage is not None and self._usage.services_on_domain(str(merchant.id), domain):
            raise MerchantConflictError(f"{domain} is used by a proxy service: delete the service first",
                                        field="domain")
        merchant.remove_domain(domain)
        self.save(merchant)

    def preverify_sandbox_domain(self, name: str) -> None:
        """The sandbox merchant's `localhost`, verified without a challenge, so a local backend can be proxied."""
        if self.settings.production:
            raise MerchantError("localhost is pre-verified in the sandbox only")
        merchant = self.get_merchant(name)
        if not merchant.has_domain(SANDBOX_DOMAIN):
            merchant.add_domain(SANDBOX_DOMAIN, secrets.token_urlsafe(24))
        merchant.verify_domain(SANDBOX_DOMAIN, "sandbox")
        self.save(merchant)

    # -- settings -------------------------------------------------------------------------------------------

    def set_rate_limit(self, name: str, per_minute: int) -> None:
        merchant = self.get_merchant(name)
        merchant.set_rate_limit(per_minute)
        self.save(merchant)

    def set_discovery(self, name: str, enabled: bool) -> None:
        merchant = self.get_merchant(name)
        merchant.toggle_discovery(enabled)
        self.save(merchant)

    # -- steps ----------------------------------------------------------------------------------------------

    def _service_id(self, name: str, ref: str) -> str:
        found = self._usage.service_id_for(name, ref) if self._usage is not None else None
        if found is None:
            raise MerchantError(f"{ref!r} is not one of your proxy services: give a service's id or slug, as "
                                "paywarden service list shows them, or no service for an unscoped key", field="service")
        return found

    def _login(self, email: str) -> OwnerLogin:
        try:
            return self.repository.get(login_id(email))
        except AggregateNotFoundError:
            raise UnknownObjectError(f"no login {email}", field="email") from None

    def _issue(self, login: OwnerLogin) -> str:
        token = f"{login.id.hex}." + secrets.token_urlsafe(32)
        login.issue_invite(token_hash(token), datetime.now(UTC) + INVITE_LIFETIME)
        return token

    def _hash(self, password: str) -> str:
        if self._hasher is None:
            raise MerchantError("no password hasher configured")
        return self._hasher.hash(password)
