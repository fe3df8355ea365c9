"""Who is calling: `Authorization: Bearer pw_{live|test}_<40 base62>`, or the anonymous public identity."""

from __future__ import annotations

from collections.abc import Iterable

import falcon

from domain.clients import ANONYMOUS_ID, Capability, Client
from domain.merchant import key_hash, parse_key, same_hash
from domain.networks import NETWORKS, SCHEME_EXACT, KeyEnv
from projections.accounts import AccountsView


class Unauthorized(Exception):
    """401, with the code and message of DESIGN.md's error body."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Authenticator:
    def __init__(self, accounts: AccountsView, *, anonymous: bool, served: Iterable[str]) -> None:
        self._accounts, self._anonymous = accounts, anonymous
        self._public = Client(
            id=ANONYMOUS_ID, registered=False,
            capabilities=frozenset(Capability(n, SCHEME_EXACT, NETWORKS[n].usdc_mint) for n in served),
        )

    def client(self, req: falcon.Request) -> Client:
        header = req.get_header("Authorization")
        if header is None:
            if self._anonymous:
                return self._public
            raise Unauthorized("missing_api_key", "send Authorization: Bearer <API key>")
        scheme, _, api_key = header.partition(" ")
        if scheme.lower() != "bearer" or parse_key(api_key.strip()) is None:
            raise Unauthorized("invalid_api_key", "the Authorization header must be Bearer pw_live_… or pw_test_…")
        digest = key_hash(api_key.strip())
        record = self._accounts.get_key(digest)
        # The lookup is by SHA-256, and the final comparison is constant-time: timing tells nothing of the key.
        if record is None or not same_hash(record.key_hash, digest):
            raise Unauthorized("invalid_api_key", "unknown API key")
        if record.revoked:
            raise Unauthorized("revoked_api_key", f"API key {record.prefix}… has been revoked")
        return Client(
            id=f"merchant:{record.merchant_id}", registered=True, env=KeyEnv(record.env), merchant=record.merchant,
            capabilities=frozenset(Capability(*c) for c in record.capabilities),
            rate_limit_per_minute=record.rate_limit_per_minute,
        )


class AuthMiddleware:
    """Resolves `req.context.client` for resources that declare `authenticate = True`."""

    def __init__(self, authenticator: Authenticator) -> None:
        self._authenticator = authenticator

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict) -> None:
        req.context.operation = getattr(resource, "operation", None)
        if getattr(resource, "authenticate", False):
            req.context.client = self._authenticator.client(req)
