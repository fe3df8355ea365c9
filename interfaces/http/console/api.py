"""The console's JSON API under /api/v1: the logged-in merchant's session, keys, capabilities, domains and
discovery. Each responder loads its body with a schema, calls one application command and answers from the accounts
view, which holds the command's events once it returns (projections/read_your_writes.py); another merchant's object
is a 404 like an unknown one."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import falcon
from marshmallow import EXCLUDE, Schema, fields, validate

from domain.clients import merchant_client_id
from domain.login import normalize_email
from domain.merchant import UnknownObjectError
from domain.networks import SCHEME_EXACT, KeyEnv
from interfaces.http.common.ratelimit import client_ip
from interfaces.http.console.collaborators import Account, Catalog, Logins, Resource, mount
from interfaces.http.console.security import NotLoggedIn
from interfaces.http.console.sessions import Session, cookie_name
from projections.account_rows import CapabilityRow, DomainRow, KeyRow
from projections.key_use import with_last_use


class BadCredentials(Exception):
    """Wrong password and unknown email alike: one answer, after the same work."""


class LoginSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    email = fields.String(required=True, validate=validate.Length(max=320))
    password = fields.String(required=True, validate=validate.Length(max=1024))


class KeySchema(Schema):
    env = fields.String(required=True, validate=validate.OneOf([e.value for e in KeyEnv]))
    label = fields.String(load_default="", validate=validate.Length(max=100))
    service = fields.String(load_default="", validate=validate.Length(max=200))


class CapabilitySchema(Schema):
    network = fields.String(required=True)
    scheme = fields.String(load_default=SCHEME_EXACT, validate=validate.Equal(SCHEME_EXACT))
    asset = fields.String(required=True)


class DomainSchema(Schema):
    domain = fields.String(required=True, validate=validate.Length(min=1, max=300))


class DiscoverySchema(Schema):
    enabled = fields.Boolean(required=True, truthy={True}, falsy={False})


def key_json(row: KeyRow) -> dict[str, Any]:
    return {"prefix": row.prefix, "env": row.env, "label": row.label, "service": row.service,
            "createdAt": row.created_at, "lastUsedAt": row.last_used_at, "revokedAt": row.revoked_at}


def capability_json(row: CapabilityRow) -> dict[str, Any]:
    return {"id": row.id, "network": row.network, "scheme": row.scheme, "asset": row.asset,
            "enabledAt": row.enabled_at}


def domain_json(row: DomainRow) -> dict[str, Any]:
    return {"domain": row.domain, "status": row.status, "method": row.method, "addedAt": row.added_at,
            "verifiedAt": row.verified_at, "dns": {"name": row.dns_name, "value": row.dns_value},
            "http": {"url": row.http_url, "body": row.token}}


def session_of(req: falcon.Request) -> Session:
    session = req.context.session
    if session is None:
        raise NotLoggedIn()
    return session


def body(req: falcon.Request, schema: Schema) -> dict[str, Any]:
    return schema.load(req.get_media(default_when_empty={}) or {})


class Login:
    """The one login check, for the API and the login page: throttled per account and IP, no enumeration."""

    def __init__(self, c: Logins) -> None:
        self._c = c

    def __call__(self, req: falcon.Request, resp: falcon.Response, email: str, password: str) -> Session:
        email, ip = normalize_email(email), client_ip(req, self._c.trusted_proxies)
        self._c.throttle.attempt(email, ip)
        login = self._c.accounts.get_login(email)
        if not self._c.verify_password(login.password_hash if login else None, password) or login is None:
            raise BadCredentials()
        self._c.throttle.succeeded(email)
        session = self._c.sessions.create(login.merchant_id, login.merchant, login.email, login.password_hash)
        resp.set_cookie(cookie_name(self._c.secure_cookies), session.id, max_age=self._c.sessions.seconds,
                        path="/", http_only=True, secure=self._c.secure_cookies, same_site="Lax")
        return session

    def logout(self, req: falcon.Request, resp: falcon.Response, *, everywhere: bool = False) -> None:
        """End this session, or with `everywhere` every session of its login (other browsers, other hosts)."""
        session = req.context.session
        if session is not None:
            if everywhere:
                self._c.sessions.end_all(session.email)
            else:
                self._c.sessions.end(session.id)
        resp.unset_cookie(cookie_name(self._c.secure_cookies), path="/")


class SessionResource:
    route = "/api/v1/session"
    public = csrf_exempt = True  # logging in needs no session; logging out of none is harmless

    def __init__(self, login: Login) -> None:
        self._login = login

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        credentials = body(req, LoginSchema())
        session = self._login(req, resp, credentials["email"], credentials["password"])
        resp.media = {"csrfToken": session.csrf}

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._login.logout(req, resp)
        resp.status = falcon.HTTP_204


class SessionsResource:
    """`DELETE /api/v1/sessions`: log out everywhere (every session of this login, this one included)."""

    route = "/api/v1/sessions"

    def __init__(self, login: Login) -> None:
        self._login = login

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        session_of(req)
        self._login.logout(req, resp, everywhere=True)
        resp.status = falcon.HTTP_204


class MeResource(Resource[Account]):
    route = "/api/v1/me"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        s = session_of(req)
        merchant = self._c.accounts.get_merchant(s.merchant_id)
        resp.media = {"email": s.email, "merchant": s.merchant, "merchantId": s.merchant_id,
                      "discoveryEnabled": bool(merchant and merchant.discovery_enabled), "csrfToken": s.csrf}


class KeysResource(Resource[Account]):
    route = "/api/v1/keys"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        keys = with_last_use(self._c.accounts.list_keys(session_of(req).merchant_id), self._c.key_uses)
        resp.media = {"keys": [key_json(k) for k in keys]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        s, command = session_of(req), body(req, KeySchema())
        api_key, prefix = self._c.merchants.create_key(s.merchant, KeyEnv(command["env"]), label=command["label"],
                                                       service=command["service"])
        row = self._c.accounts.get_merchant_key(s.merchant_id, prefix)
        if row is None:  # the command returned once the view held its events: a missing row is a broken view
            raise RuntimeError(f"key {prefix} is missing from the accounts view after its command")
        resp.status, resp.media = falcon.HTTP_201, {"key": api_key, **key_json(row)}


class KeyResource(Resource[Account]):
    route = "/api/v1/keys/{prefix}"

    def on_delete(self, req: falcon.Request, resp: falcon.Response, prefix: str) -> None:
        s = session_of(req)
        if self._c.accounts.get_merchant_key(s.merchant_id, prefix) is None:  # another merchant's key: unknown
            raise UnknownObjectError(f"no key {prefix}", field="prefix")
        self._c.merchants.revoke_key(prefix, s.merchant)
        resp.status = falcon.HTTP_204


class CapabilitiesResource(Resource[Account]):
    route = "/api/v1/capabilities"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows = self._c.accounts.list_capabilities(session_of(req).merchant_id)
        resp.media = {"capabilities": [capability_json(r) for r in rows]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        s, command = session_of(req), body(req, CapabilitySchema())
        enabled = self._c.merchants.enable_capability(s.merchant, command["network"], command["asset"],
                                                      command["scheme"])
        row = next(r for r in self._c.accounts.list_capabilities(s.merchant_id) if r.id == enabled.capability_id)
        resp.status, resp.media = falcon.HTTP_201, {**capability_json(row), "warnings": enabled.warnings}


class CapabilityResource(Resource[Account]):
    route = "/api/v1/capabilities/{cap_id}"

    def on_delete(self, req: falcon.Request, resp: falcon.Response, cap_id: str) -> None:
        s = session_of(req)
        self._c.merchants.disable_capability(s.merchant, cap_id)
        resp.status = falcon.HTTP_204


class DomainsResource(Resource[Account]):
    route = "/api/v1/domains"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"domains": [domain_json(d) for d in self._c.accounts.list_domains(session_of(req).merchant_id)]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        s, command = session_of(req), body(req, DomainSchema())
        found = self._c.merchants.add_domain(s.merchant, command["domain"])
        resp.status = falcon.HTTP_201
        resp.media = {"domain": found.domain, "status": "pending", "dns": {"name": found.dns_name,
                      "value": found.dns_value}, "http": {"url": found.http_url, "body": found.token}}


class DomainVerifyResource(Resource[Account]):
    route = "/api/v1/domains/{domain}/verify"

    def on_post(self, req: falcon.Request, resp: falcon.Response, domain: str) -> None:
        method = self._c.merchants.verify_domain(session_of(req).merchant, domain)
        resp.media = {"status": "verified", "method": method}


class DomainResource(Resource[Account]):
    route = "/api/v1/domains/{domain}"

    def on_delete(self, req: falcon.Request, resp: falcon.Response, domain: str) -> None:
        self._c.merchants.remove_domain(session_of(req).merchant, domain)
        resp.status = falcon.HTTP_204


class DiscoveryResource(Resource[Account]):
    route = "/api/v1/discovery"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        merchant = self._c.accounts.get_merchant(session_of(req).merchant_id)
        resp.media = {"enabled": bool(merchant and merchant.discovery_enabled)}

    def on_patch(self, req: falcon.Request, resp: falcon.Response) -> None:
        s, command = session_of(req), body(req, DiscoverySchema())
        self._c.merchants.set_discovery(s.merchant, command["enabled"])
        self.on_get(req, resp)


def own_listings(c: Catalog, merchant_id: str) -> list[dict[str, Any]]:
    if c.catalog is None:
        return []
    return [{"id": listing_id, **item, "proposal": proposal}
            for listing_id, item, proposal in c.catalog.list_owned(merchant_client_id(merchant_id))]


def delist(c: Catalog, merchant_id: str, listing: str) -> None:
    try:
        listing_uuid = UUID(listing)
    except ValueError:
        raise UnknownObjectError(f"no listing {listing}", field="id") from None
    if c.listings is None:
        raise UnknownObjectError(f"no listing {listing}", field="id")
    c.listings.delist(listing_uuid, merchant_client_id(merchant_id))


class ListingsResource(Resource[Catalog]):
    route = "/api/v1/listings"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"listings": own_listings(self._c, session_of(req).merchant_id)}


class ListingResource(Resource[Catalog]):
    route = "/api/v1/listings/{listing_id}"

    def on_delete(self, req: falcon.Request, resp: falcon.Response, listing_id: str) -> None:
        delist(self._c, session_of(req).merchant_id, listing_id)
        resp.status = falcon.HTTP_204


def add_routes(app: falcon.App, login: Login, account: Account, catalog: Catalog) -> None:
    mount(app, (SessionResource, SessionsResource), login)
    mount(app, (MeResource, KeysResource, KeyResource, CapabilitiesResource, CapabilityResource, DomainsResource,
                DomainResource, DomainVerifyResource, DiscoveryResource), account)
    mount(app, (ListingsResource, ListingResource), catalog)
