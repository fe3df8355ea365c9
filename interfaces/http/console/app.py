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
    webhooks,
)
from interfaces.http.console.collaborators import Collaborators
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
    login = api.Login(c)
    api.add_routes(app, c, login)
    services.add_routes(app, c.proxies, c.proxy_url)
    pages.add_routes(app, c, login)
    webhooks.add_routes(app, c, pages.templates())
    service_pages.add_routes(app, c)
    tool_pages.add_routes(app, c)
    payments.add_routes(app, c, pages.templates())
    listing_pages.add_routes(app, c)
    errors.register(app)
    return app


def by_listener(api: WSGIApplication, console_bind: str, console: WSGIApplication) -> WSGIApplication:
    """One WSGI app for a gunicorn with two listeners: requests on the console's port go to the console."""
    port = console_bind.rpartition(":")[2]

    def dispatch(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        app = console if environ.get("SERVER_PORT") == port else api
        return app(environ, start_response)

    return dispatch
