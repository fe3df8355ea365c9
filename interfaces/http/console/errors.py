"""The console's errors: the shared mapping of `interfaces/http/common/errors.py` (400 `{"error","message","field"?}`
for a refused rule, 404 for what is not the merchant's, 409 for conflicts, 500 for the unexpected), answered by
`answer`, plus the console's own: 400 for bad input, 401 without a session, 403 for a CSRF refusal, 429 for
throttled logins. Pages get a redirect to the login page instead of a 401, and the others the console's styled
error page (templates/error.html: the status, a heading in words, the message, a way back)."""

from __future__ import annotations

import falcon
from marshmallow import ValidationError

from interfaces.http.common import errors
from interfaces.http.console.api import BadCredentials
from interfaces.http.console.pages import templates
from interfaces.http.console.security import CsrfRefused, NotLoggedIn, Throttled


def _api(req: falcon.Request) -> bool:
    return req.path.startswith("/api/")


def answer(req: falcon.Request, resp: falcon.Response, status: str, code: str, message: str,
           field: str | None = None) -> None:
    resp.status = status
    if _api(req):
        resp.media = {"error": code, "message": message, **({"field": field} if field else {})}
        return
    code_number = status.split(" ", 1)[0]
    resp.content_type = falcon.MEDIA_HTML
    resp.text = PAGES.get_template("error.html").render(
        session=getattr(req.context, "session", None), code=code_number,
        heading=HEADINGS.get(code_number, status.split(" ", 1)[-1]),
        message=message if message and message != status else DEFAULT_MESSAGES.get(code_number, status))


PAGES = templates()
HEADINGS = {"400": "That request was not understood", "403": "Refused", "404": "Page not found",
            "405": "Not allowed here", "409": "Conflict", "429": "Too many attempts",
            "500": "Something went wrong on our side", "503": "Temporarily unavailable"}
DEFAULT_MESSAGES = {"404": "There is no page at this address: it may have moved, or the link is mistyped.",
                    "405": "This address does not answer that kind of request."}


def _validation(req, resp, ex: ValidationError, params) -> None:
    messages = ex.messages if isinstance(ex.messages, dict) else {"_schema": ex.messages}
    field = next(iter(messages), None)
    text = "; ".join(f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in messages.items())
    answer(req, resp, falcon.HTTP_400, "invalid_request", text, None if field == "_schema" else field)


def _not_logged_in(req, resp, ex: NotLoggedIn, params) -> None:
    if _api(req):
        answer(req, resp, falcon.HTTP_401, "unauthenticated", "log in first: POST /api/v1/session")
        return
    raise falcon.HTTPSeeOther("/login")


def _bad_credentials(req, resp, ex: BadCredentials, params) -> None:
    answer(req, resp, falcon.HTTP_401, "invalid_credentials", "wrong email or password")


def _csrf(req, resp, ex: CsrfRefused, params) -> None:
    answer(req, resp, falcon.HTTP_403, "csrf_refused", str(ex))


def _throttled(req, resp, ex: Throttled, params) -> None:
    answer(req, resp, falcon.HTTP_429, "too_many_attempts", str(ex))
    resp.set_header("Retry-After", str(ex.retry_after))


def register(app: falcon.App) -> None:
    errors.register_common(app, answer, answer)
    app.add_error_handler(ValidationError, _validation)
    app.add_error_handler(NotLoggedIn, _not_logged_in)
    app.add_error_handler(BadCredentials, _bad_credentials)
    app.add_error_handler(CsrfRefused, _csrf)
    app.add_error_handler(Throttled, _throttled)
