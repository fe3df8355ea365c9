"""Errors mapped once, to SPEC.md's statuses and DESIGN.md's bodies.

On verify and settle every failure keeps that endpoint's response shape (VerifyResponse / SettleResponse);
elsewhere the body is {"error": code, "message": text}.
"""

from __future__ import annotations

import logging
import uuid

import falcon
from marshmallow import ValidationError

from application.payments import KeyEnvironmentError
from domain.codes import Code
from interfaces.http.common.auth import Unauthorized
from interfaces.http.common.ratelimit import RateLimited
from interfaces.http.facilitator.schemas import classify

log = logging.getLogger("paywarden.http")


class WireError(Exception):
    """A request refused at the edge: its code, status and a message for non-payment endpoints."""

    def __init__(self, code: Code | str, status: str = falcon.HTTP_400, message: str = "") -> None:
        super().__init__(message or str(code))
        self.code, self.status, self.message = str(code), status, message or str(code)


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


def _wire_error(req: falcon.Request, resp: falcon.Response, ex: WireError, params: dict) -> None:
    operation = getattr(req.context, "operation", None)
    resp.status = ex.status
    resp.media = payment_body(operation, ex.code, ex.message)


def _validation_error(req: falcon.Request, resp: falcon.Response, ex: ValidationError, params: dict) -> None:
    operation = getattr(req.context, "operation", None)
    code = str(classify(ex.messages)) if operation else "invalid_request"
    resp.status = falcon.HTTP_400
    resp.media = payment_body(operation, code, schema_message(ex.messages))


def _unauthorized(req: falcon.Request, resp: falcon.Response, ex: Unauthorized, params: dict) -> None:
    resp.status = falcon.HTTP_401
    resp.media = {"error": ex.code, "message": ex.message}
    resp.set_header("WWW-Authenticate", 'Bearer realm="paywarden"')


def _key_environment(req: falcon.Request, resp: falcon.Response, ex: KeyEnvironmentError, params: dict) -> None:
    _unauthorized(req, resp, Unauthorized("key_environment_mismatch", str(ex)), params)


def _rate_limited(req: falcon.Request, resp: falcon.Response, ex: RateLimited, params: dict) -> None:
    req.context.rate_limit_scope = ex.scope
    resp.status = falcon.HTTP_429
    resp.media = {"error": "rate_limited", "message": f"{ex}; retry in {ex.retry_after} s"}
    resp.set_header("Retry-After", str(ex.retry_after))


def _http_error(req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: dict) -> None:
    resp.status = ex.status
    code = (ex.title or "error").lower().replace(" ", "_")
    resp.media = {"error": code, "message": ex.description or ex.title or ""}
    for name, value in (ex.headers or {}).items():
        resp.set_header(name, value)


def _unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict) -> None:
    operation = getattr(req.context, "operation", None)
    code = {"verify": Code.UNEXPECTED_VERIFY_ERROR, "settle": Code.UNEXPECTED_SETTLE_ERROR}.get(operation)
    request_id = getattr(req.context, "request_id", None) or uuid.uuid4().hex
    log.exception("unexpected error", extra={"request_id": request_id, "path": req.path})
    resp.status = falcon.HTTP_500
    resp.media = (payment_body(operation, str(code), f"unexpected server error (request {request_id}); retry")
                  if code else {"error": "internal_error", "message": request_id})


def register(app: falcon.App) -> None:
    # Falcon picks the most specific handler for each exception class.
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    app.add_error_handler(WireError, _wire_error)
    app.add_error_handler(ValidationError, _validation_error)
    app.add_error_handler(Unauthorized, _unauthorized)
    app.add_error_handler(KeyEnvironmentError, _key_environment)
    app.add_error_handler(RateLimited, _rate_limited)
