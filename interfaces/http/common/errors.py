"""Errors mapped once, to the statuses and bodies of docs/architecture.md#the-interface-contract, for every
HTTP app.

`refusal` maps each domain and application error to its status, code and field: 404 for what is unknown (or
another merchant's), 409 for a conflict with the current state, 400 for any other rule. `register_common` installs
the handlers every app shares (those errors, falcon's HTTP errors, and the unexpected 500, logged with the request id);
an app passes the `Respond` that writes its body (the console's pages answer in HTML) and adds its own handlers
(the facilitator's are in `interfaces/http/facilitator/errors.py`).
On verify and settle every failure keeps that endpoint's response shape (VerifyResponse / SettleResponse);
elsewhere the body is {"error": code, "message": text, "field"?}.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import falcon

from application.merchants import DomainNotVerifiedError, MerchantNotFoundError
from application.proxy_services import ServiceNotFoundError
from application.webhooks import WebhookNotFoundError
from domain.codes import Code
from domain.errors import DomainError, PaymentRuleError, PaymentStateError
from domain.listing import ListingOwnershipError
from domain.mcp_tools import ToolNotPricedError
from domain.merchant import MerchantConflictError, UnknownObjectError
from domain.proxy_service import ProxyServiceConflictError
from domain.routes import RoutePatternError
from domain.slugs import SlugError
from domain.webhook import LIMIT_CODES, WebhookError

log = logging.getLogger("paywarden.http")


class WireError(Exception):
    """A request refused at the edge: its code, status and a message for non-payment endpoints."""

    def __init__(self, code: Code | str, status: str = falcon.HTTP_400, message: str = "") -> None:
        super().__init__(message or str(code))
        self.code, self.status, self.message = str(code), status, message or str(code)


Respond = Callable[[falcon.Request, falcon.Response, str, str, str, "str | None"], None]


@dataclass(frozen=True)
class Refusal:
    status: str
    code: str
    message: str
    field: str | None = None


def refusal(ex: DomainError) -> Refusal:
    """The one mapping of domain and application errors to HTTP."""
    message, field = str(ex), getattr(ex, "field", None)
    if isinstance(ex, ListingOwnershipError):
        return Refusal(falcon.HTTP_404, "not_found", "no such listing of yours", "id")
    if isinstance(ex, WebhookError):  # its rules have codes of their own
        status = falcon.HTTP_404 if isinstance(ex, WebhookNotFoundError) else \
            falcon.HTTP_409 if ex.code in LIMIT_CODES else falcon.HTTP_400
        return Refusal(status, ex.code, ex.message, field)
    if isinstance(ex, UnknownObjectError | MerchantNotFoundError | ServiceNotFoundError | ToolNotPricedError) or \
            field == "routeId":
        return Refusal(falcon.HTTP_404, "not_found", message)
    if isinstance(ex, DomainNotVerifiedError):
        return Refusal(falcon.HTTP_409, "domain_not_verified", message, field)
    if isinstance(ex, MerchantConflictError | ProxyServiceConflictError | PaymentStateError):
        return Refusal(falcon.HTTP_409, "conflict", message, field)
    if isinstance(ex, PaymentRuleError):
        return Refusal(falcon.HTTP_400, str(ex.code), ex.message)
    if isinstance(ex, RoutePatternError):
        field = "path"
    elif isinstance(ex, SlugError):
        field = "slug"
    return Refusal(falcon.HTTP_400, "invalid_request", message, field)


def respond(req: falcon.Request, resp: falcon.Response, status: str, code: str, message: str,
            field: str | None = None) -> None:
    """The JSON answer: the endpoint's shape on verify and settle, else {"error", "message", "field"?}."""
    operation = getattr(req.context, "operation", None)
    if operation is None:
        return plain(req, resp, status, code, message, field)
    resp.status, resp.media = status, payment_body(operation, code, message)


def plain(req: falcon.Request, resp: falcon.Response, status: str, code: str, message: str,
          field: str | None = None) -> None:
    """{"error", "message", "field"?} on every endpoint (HTTP errors from routing and media handling)."""
    resp.status = status
    resp.media = {"error": code, "message": message, **({"field": field} if field else {})}


def payment_body(operation: str | None, code: str, message: str | None = None) -> dict:
    """The body of a refused request in its endpoint's shape, with the x402 v2 message field."""
    message = message or code
    if operation == "verify":
        return {"isValid": False, "invalidReason": code, "invalidMessage": message}
    if operation == "settle":
        return {"success": False, "errorReason": code, "errorMessage": message}
    return {"error": code, "message": message}


def schema_message(messages: object, prefix: str = "") -> str:
    """Marshmallow's messages as `field.path: what is wrong; ...` (field names and rules, never the values)."""
    if isinstance(messages, dict):
        parts = [schema_message(value, f"{prefix}.{key}" if prefix and key != "_schema" else
                                (prefix if key == "_schema" else str(key))) for key, value in messages.items()]
        return "; ".join(part for part in parts if part)
    if isinstance(messages, list | tuple):
        texts = [schema_message(m, prefix) if isinstance(m, dict | list) else str(m) for m in messages]
        text = " ".join(texts)
        return f"{prefix}: {text}" if prefix and not any(isinstance(m, dict | list) for m in messages) else text
    return f"{prefix}: {messages}" if prefix else str(messages)


def _handlers(answer: Respond, http_answer: Respond) -> dict[type[Exception], Callable[..., None]]:
    """The handlers every app shares, answering through `answer` (falcon's HTTP errors through `http_answer`)."""

    def refused(req: falcon.Request, resp: falcon.Response, ex: DomainError, params: Any) -> None:
        r = refusal(ex)
        answer(req, resp, r.status, r.code, r.message, r.field)

    def http_error(req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: Any) -> None:
        http_answer(req, resp, str(ex.status), (ex.title or "error").lower().replace(" ", "_"),
                    ex.description or ex.title or "", None)
        resp.set_headers(ex.headers or {})

    def unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception, params: Any) -> None:
        if isinstance(ex, falcon.HTTPStatus):  # a redirect or a bare status: falcon's own answer
            raise ex
        operation = getattr(req.context, "operation", None) or ""
        code = {"verify": Code.UNEXPECTED_VERIFY_ERROR, "settle": Code.UNEXPECTED_SETTLE_ERROR}.get(operation)
        request_id = getattr(req.context, "request_id", None) or uuid.uuid4().hex
        log.exception("unexpected error", extra={"request_id": request_id, "path": req.path})
        message = (f"unexpected server error (request {request_id}); retry" if code
                   else f"unexpected error, reference {request_id}")
        answer(req, resp, falcon.HTTP_500, str(code or "internal_error"), message, None)

    return {Exception: unexpected, falcon.HTTPError: http_error, DomainError: refused}


def register_common(app: falcon.App, answer: Respond = respond, http_answer: Respond = plain) -> None:
    """The handlers every HTTP app shares (Falcon picks the most specific class of each exception)."""
    for exception, handler in _handlers(answer, http_answer).items():
        app.add_error_handler(exception, handler)
