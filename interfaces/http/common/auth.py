"""Who is calling: `Authorization: Bearer pw_{live|test}_<40 base62>`, or the anonymous public identity.

A key scoped to a proxy service carries that service's routes (`Client.scope`, from the accounts read model): the
Payments application refuses the payments no route of it charges (`application.payment_checks.check_scope`), and a
key whose service was deleted is refused here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Protocol

import falcon

from domain.clients import ANONYMOUS_ID, Capability, Client, merchant_client_id
from domain.merchant import key_hash, parse_key, same_hash
from domain.networks import NETWORKS, SCHEME_EXACT, KeyEnv
from domain.scopes import ServiceScope
from interfaces.http.common.ratelimit import FailedAuthLimit
from projections.accounts import KeyRecord
from projections.service_scopes import ServiceScopesView


class Unauthorized(Exception):
    """401, with the code and message of the error body (docs/architecture.md, "Statuses of malformed
    requests")."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class KeyUse(Protocol):
    """Where a key's use is noted for the console's "last used" (interfaces/adapters/key_usage.py)."""

    def touch(self, prefix: str) -> None: ...


class KeyLookup(Protocol):
    """Finds an API key's record by its SHA-256 (the accounts view, or its in-process cache)."""

    def get_key(self, key_hash: str) -> KeyRecord | None: ...


class Authenticator:
    def __init__(self, accounts: KeyLookup, *, anonymous: bool, served: Iterable[str], usage: KeyUse | None = None,
                 scopes: ServiceScopesView | None = None) -> None:
        self._accounts, self._anonymous, self._usage, self._scopes = accounts, anonymous, usage, scopes
        self._public = Client(
            id=ANONYMOUS_ID, registered=False,
            capabilities=frozenset(Capability(n, SCHEME_EXACT, NETWORKS[n].usdc_mint) for n in served),
        )

    def identify(self, req: falcon.Request) -> tuple[Client, str | None]:
        """The client, and the SHA-256 of the API key it authenticated with (None for the anonymous identity)."""
        header = req.get_header("Authorization")
        if header is None:
            if self._anonymous:
                return self._public, None
            raise Unauthorized("missing_api_key", "send Authorization: Bearer <API key>")
        scheme, _, api_key = header.partition(" ")
        if scheme.lower() != "bearer" or not api_key.strip():
            raise Unauthorized("invalid_api_key", "the Authorization header must be Bearer <API key>")
        if parse_key(api_key.strip()) is None:
            raise Unauthorized("invalid_api_key", malformed_key_message(api_key.strip()))
        digest = key_hash(api_key.strip())
        record = self._accounts.get_key(digest)
        # The lookup is by SHA-256, and the final comparison is constant-time: timing tells nothing of the key.
        if record is None or not same_hash(record.key_hash, digest):
            raise Unauthorized("invalid_api_key", "unknown API key")
        if record.revoked:
            raise Unauthorized("revoked_api_key", f"API key {record.prefix}… has been revoked")
        scope = None
        if record.service is not None and (self._scopes is None or (scope := self._scopes.get_scope(
                record.service)) is None):
            raise Unauthorized("service_deleted", f"API key {record.prefix}… is scoped to a proxy service that "
                               "has been deleted; create a new key")
        if self._usage is not None:  # the console's "last used", written at most once a minute per key
            self._usage.touch(record.prefix)
        return (_unscoped_identity(record) if scope is None else _identity(record, scope)), record.key_hash


def malformed_key_message(api_key: str) -> str:
    """What is wrong with a bearer token that is not shaped as an API key (never echoing it)."""
    for env in KeyEnv:
        if api_key.startswith(f"pw_{env.value}_"):
            return f"malformed API key: a pw_{env.value}_ key is pw_{env.value}_ and 40 letters or digits"
    return "not a Paywarden API key: keys start with pw_live_ or pw_test_"


def _identity(record: KeyRecord, scope: ServiceScope | None = None) -> Client:
    return Client(
        id=merchant_client_id(record.merchant_id), registered=True, env=KeyEnv(record.env), merchant=record.merchant,
        capabilities=frozenset(Capability(*c) for c in record.capabilities),
        rate_limit_per_minute=record.rate_limit_per_minute, scope=scope,
    )


# An unscoped key's identity per record: the same record, the same (frozen) `Client`; a changed record (another
# override, capability, revocation) is another entry. A scoped key's is built each time, with its current scope.
_unscoped_identity = functools.lru_cache(maxsize=4096)(_identity)


class AuthMiddleware:
    """Resolves `req.context.client` (and `api_key_id`, the key's SHA-256) for resources that declare
    `authenticate = True`. With `failures`, a client IP that has spent its budget of failed authentications gets
    429 whether its key is right or wrong, and every 401 is counted against its IP; for a key-limited resource the
    key's rate limit is taken in the same Redis round trip as that check (`RateLimiter.admit_key`)."""

    def __init__(self, authenticator: Authenticator, failures: FailedAuthLimit | None = None) -> None:
        self._authenticator, self._failures = authenticator, failures

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict) -> None:
        req.context.operation = getattr(resource, "operation", None)
        if not getattr(resource, "authenticate", False):
            return
        if self._failures is None:
            req.context.client, req.context.api_key_id = self._authenticator.identify(req)
            return
        address = self._failures.address(req)
        try:
            client, key_id = self._authenticator.identify(req)
        except Unauthorized:
            self._failures.check(address)  # a spent budget answers 429, right guess or wrong
            self._failures.failed(address)
            raise
        if key_id is not None and getattr(resource, "rate_limit", None) == "key":
            # The IP's failed-authentication budget and the key's rate limit in one Redis round trip.
            self._failures.admit(address, key_id, client.rate_limit_per_minute)
            req.context.key_admitted = True
        else:
            self._failures.check(address)
        req.context.client, req.context.api_key_id = client, key_id
