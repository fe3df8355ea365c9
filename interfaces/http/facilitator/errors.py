"""The facilitator API's error handlers: the shared mapping (`interfaces/http/common/errors.py`) and the edge's own
refusals (a wire error, a schema error in the endpoint's shape with the spec's code, 401, 429)."""

from __future__ import annotations

from typing import Any

import falcon
from marshmallow import ValidationError

from application.errors import KeyEnvironmentError
from interfaces.http.common.auth import Unauthorized
from interfaces.http.common.errors import WireError, payment_body, register_common, schema_message
from interfaces.http.common.ratelimit import RateLimited
from interfaces.http.facilitator.schemas import classify


def _wire_error(req: falcon.Request, resp: falcon.Response, ex: WireError, params: Any) -> None:
    operation = getattr(req.context, "operation", None)
    resp.status = ex.status
    resp.media = payment_body(operation, ex.code, ex.message)


def _validation_error(req: falcon.Request, resp: falcon.Response, ex: ValidationError, params: Any) -> None:
    operation = getattr(req.context, "operation", None)
    code = str(classify(ex.messages)) if operation else "invalid_request"
    resp.status = falcon.HTTP_400
    resp.media = payment_body(operation, code, schema_message(ex.messages))


def _unauthorized(req: falcon.Request, resp: falcon.Response, ex: Unauthorized, params: Any) -> None:
    resp.status = falcon.HTTP_401
    resp.media = {"error": ex.code, "message": ex.message}
    resp.set_header("WWW-Authenticate", 'Bearer realm="paywarden"')


def _key_environment(req: falcon.Request, resp: falcon.Response, ex: KeyEnvironmentError, params: Any) -> None:
    _unauthorized(req, resp, Unauthorized("key_environment_mismatch", str(ex)), params)


def _rate_limited(req: falcon.Request, resp: falcon.Response, ex: RateLimited, params: Any) -> None:
    req.context.rate_limit_scope = ex.scope
    resp.status = falcon.HTTP_429
    resp.media = {"error": "rate_limited", "message": f"{ex}; retry in {ex.retry_after} s"}
    resp.set_header("Retry-After", str(ex.retry_after))


def register(app: falcon.App) -> None:
    """The API's handlers: the shared ones, and the edge's own refusals."""
    register_common(app)
    app.add_error_handler(WireError, _wire_error)
    app.add_error_handler(ValidationError, _validation_error)
    app.add_error_handler(Unauthorized, _unauthorized)
    app.add_error_handler(KeyEnvironmentError, _key_environment)
    app.add_error_handler(RateLimited, _rate_limited)
