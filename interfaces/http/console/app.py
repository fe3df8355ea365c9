"""`create_app(collaborators) -> falcon.App`: the merchant console (pages and the JSON API under /api/v1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

import falcon

from interfaces.http.console import (
    api,
    errors,
    listing_pages,
    pages,
    payments,
    service_pages,
    services,
    tool_pages,
    tools_api,
    webhooks,
)
from interfaces.http.console.collaborators import (
    Account,
    Catalog,
    Collaborators,
    Logins,
    Overview,
    Passwords,
    PaymentViews,
    ServicePages,
    ServiceTools,
    volume_of,
)
from interfaces.http.console.security import SessionMiddleware


class SecurityHeaders:
    """No framing, no sniffing, no referrer leaks, and only our own scripts, styles and images."""

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool) -> None:
        resp.set_header("X-Frame-Options", "DENY")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Referrer-Policy", "same-origin")
        resp.set_header("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
        resp.set_header("Cache-Control", "no-store")


def create_app(c: Collaborators) -> falcon.App:
    middleware: list[Any] = [SecurityHeaders(),
                             SessionMiddleware(c.sessions, c.console_url, secure_cookies=c.secure_cookies)]
    app = falcon.App(middleware=middleware)
    app.req_options.strip_url_path_trailing_slash = True
    app.resp_options.secure_cookies_by_default = c.secure_cookies
    # Each group of resources is built from its part of the collaborators: what it uses, no more.
    login = api.Login(Logins(c.accounts, c.sessions, c.throttle, c.verify_password, c.trusted_proxies,
                             c.secure_cookies))
    account, catalog = Account(c.merchants, c.accounts, c.key_uses), Catalog(c.catalog, c.listings, c.cursor_key)
    service_parts = ServicePages(c.proxies, c.accounts, c.proxy_url, c.sandbox, c.sandbox_wallet, c.mcp_tools)
    api.add_routes(app, login, account, catalog)
    services.add_routes(app, c.proxies, c.proxy_url)
    tools_api.add_routes(app, ServiceTools(c.proxies, c.mcp_tools))
    pages.add_routes(app, login, account, catalog, passwords=Passwords(c.merchants, c.sessions), proxies=c.proxies,
                     overview=Overview(c.payment_list, c.accounts, volume_of(c), c.fee_payers, c.books))
    webhooks.add_routes(app, c.webhooks, pages.templates(), sandbox=c.sandbox)
    service_pages.add_routes(app, service_parts)
    tool_pages.add_routes(app, service_parts)
    payments.add_routes(app, PaymentViews(c.payment_list, volume_of(c), c.sandbox), pages.templates())
    listing_pages.add_routes(app, catalog)
    errors.register(app)
    return app


def by_listener(api: WSGIApplication, console_bind: str, console: WSGIApplication) -> WSGIApplication:
    """One WSGI app for a gunicorn with two listeners: requests on the console's port go to the console."""
    port = console_bind.rpartition(":")[2]

    def dispatch(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        app = console if environ.get("SERVER_PORT") == port else api
        return app(environ, start_response)

    return dispatch
