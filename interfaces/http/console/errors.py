"""The console's errors, mapped once: 400 `{"error","message","field"?}` for bad input, 401 without a session,
403 for a CSRF refusal, 404 for what is not the merchant's, 409 for conflicts, 429 for throttled logins. Pages
get a redirect to the login page instead of a 401, and a short HTML page for the others."""

from __future__ import annotations

import html
import logging
import uuid

import falcon
from marshmallow import ValidationError

from application.merchants import MerchantNotFoundError
from domain.listing import ListingOwnershipError
from domain.merchant import MerchantConflictError, MerchantError, UnknownObjectError
from interfaces.http.console.api import BadCredentials
from interfaces.http.console.security import CsrfRefused, NotLoggedIn, Throttled

log = logging.getLogger("paywarden.console")


def _api(req: falcon.Request) -> bool:
    return req.path.startswith("/api/")


def answer(req: falcon.Request, resp: falcon.Response, status: str, code: str, message: str,
           field: str | None = None) -> None:
    resp.status = status
    if _api(req):
        resp.media = {"error": code, "message": message, **({"field": field} if field else {})}
        return
    resp.content_type = falcon.MEDIA_HTML
    resp.text = (f"<!doctype html><html lang=en><title>{status}</title><main><h1>{html.escape(status)}</h1>"
                 f"<p>{html.escape(message)}</p><p><a href=/>Back to the console</a></p></main></html>")


def _merchant_error(req, resp, ex: MerchantError, params) -> None:
    if isinstance(ex, UnknownObjectError | MerchantNotFoundError):
        answer(req, resp, falcon.HTTP_404, "not_found", str(ex))
    elif isinstance(ex, MerchantConflictError):
        code = "domain_not_verified" if type(ex).__name__ == "DomainNotVerifiedError" else "conflict"
        answer(req, resp, falcon.HTTP_409, code, str(ex), ex.field)
    else:
        answer(req, resp, falcon.HTTP_400, "invalid_request", str(ex), ex.field)


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


def _not_owned(req, resp, ex: ListingOwnershipError, params) -> None:
    answer(req, resp, falcon.HTTP_404, "not_found", "no such listing of yours", "id")


def _http_error(req, resp, ex: falcon.HTTPError, params) -> None:
    if isinstance(ex, falcon.HTTPStatus | falcon.HTTPMovedPermanently | falcon.HTTPSeeOther | falcon.HTTPFound):
        raise ex
    answer(req, resp, ex.status, (ex.title or "error").lower().replace(" ", "_"), ex.description or ex.title or "")
    for name, value in (ex.headers or {}).items():
        resp.set_header(name, value)


def _unexpected(req, resp, ex: Exception, params) -> None:
    if isinstance(ex, falcon.HTTPStatus):
        raise ex
    reference = uuid.uuid4().hex
    log.exception("unexpected console error", extra={"request_id": reference, "path": req.path})
    answer(req, resp, falcon.HTTP_500, "internal_error", f"unexpected error, reference {reference}")


def register(app: falcon.App) -> None:
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    app.add_error_handler(MerchantError, _merchant_error)
    app.add_error_handler(ValidationError, _validation)
    app.add_error_handler(NotLoggedIn, _not_logged_in)
    app.add_error_handler(BadCredentials, _bad_credentials)
    app.add_error_handler(CsrfRefused, _csrf)
    app.add_error_handler(Throttled, _throttled)
    app.add_error_handler(ListingOwnershipError, _not_owned)
