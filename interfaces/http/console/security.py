"""The console's guards: who is logged in, CSRF on every unsafe method, login throttling.

CSRF: an unsafe request must come from the console's own origin (`Sec-Fetch-Site` same-origin or none when the
browser sends it; `Origin` equal to the console's when sent) and, once logged in, carry the session's token: the
`X-CSRF-Token` header (JSON API) or the `csrf_token` form field (pages). Logging in needs no token (there is no
session yet) but passes the origin check.
"""

from __future__ import annotations

import hmac
import math
import time

import falcon
from limits import parse, strategies

from interfaces.http.common.ratelimit import limits_storage
from interfaces.http.console.sessions import Session, Sessions, cookie_name

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOGIN_PER_ACCOUNT = parse("5 per 15 minutes")  # attempts at one email address since its last success
LOGIN_PER_IP = parse("20 per 15 minutes")  # attempts from one address, whatever the email


class NotLoggedIn(Exception):
    """401 on the API; a redirect to the login page on pages."""


class CsrfRefused(Exception):
    """403: the request did not come from the console's own pages or lacked the session's token."""


class Throttled(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many failed logins; retry in {retry_after} s")
        self.retry_after = retry_after


class LoginThrottle:
    """Counts login attempts per client IP and per account (Redis when configured: shared by every worker).

    An attempt is counted before its password is checked (`attempt`), in one atomic step per window: guesses sent
    at once cannot all pass the count while the first ones are being hashed. A successful login forgives its
    account's earlier failures (`succeeded`); the address keeps counting it, so that logging in to an account of
    one's own cannot buy more guesses at others."""

    def __init__(self, storage_uri: str) -> None:
        self._limiter = strategies.MovingWindowRateLimiter(limits_storage(storage_uri))

    def attempt(self, email: str, ip: str) -> None:
        for item, identity in ((LOGIN_PER_IP, ("login-ip", ip)), (LOGIN_PER_ACCOUNT, ("login-account", email))):
            if not self._limiter.hit(item, *identity):
                reset, _ = self._limiter.get_window_stats(item, *identity)
                raise Throttled(max(1, math.ceil(reset - time.time())))

    def succeeded(self, email: str) -> None:
        self._limiter.clear(LOGIN_PER_ACCOUNT, "login-account", email)


def own_origin(req: falcon.Request, console_url: str) -> str:
    return console_url or f"{req.scheme}://{req.netloc}"


class SessionMiddleware:
    """Sets `req.context.session`; refuses what needs a login or fails the CSRF checks.

    Resources declare `public = True` (no login needed) and `csrf_exempt = True` (the login itself)."""

    def __init__(self, sessions: Sessions, console_url: str, *, secure_cookies: bool = False) -> None:
        self._sessions, self._console_url = sessions, console_url
        self._cookie = cookie_name(secure_cookies)

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict) -> None:
        session = self._sessions.get(req.cookies.get(self._cookie))
        req.context.session = session
        if resource is None or req.path.startswith("/static/"):
            return
        if req.method in UNSAFE:
            self._check_origin(req)
        if session is None:
            if not getattr(resource, "public", False):
                raise NotLoggedIn()
            return
        if req.method in UNSAFE and not getattr(resource, "csrf_exempt", False):
            self._check_token(req, session)

    def _check_origin(self, req: falcon.Request) -> None:
        site = req.get_header("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            raise CsrfRefused(f"a {site} request cannot change anything here")
        origin = req.get_header("Origin")
        if origin is not None and origin.rstrip("/") != own_origin(req, self._console_url):
            raise CsrfRefused("the request comes from another origin")

    @staticmethod
    def _check_token(req: falcon.Request, session: Session) -> None:
        offered = req.get_header("X-CSRF-Token")
        if offered is None and (req.content_type or "").startswith("application/x-www-form-urlencoded"):
            form = req.get_media() or {}
            offered = form.get("csrf_token") if isinstance(form, dict) else None
        if not offered or not hmac.compare_digest(str(offered).encode(), session.csrf.encode()):
            raise CsrfRefused("missing or wrong CSRF token (X-CSRF-Token header or csrf_token field)")
