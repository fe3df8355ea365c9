"""One JSON log line and the metrics of every request; the request id, taken from `X-Request-Id` or made here.

The line holds method, route (the URI template), path, status, duration_ms, request_id, client (the merchant id or
"anonymous") and, when a payment or a request failed, reason. Never a header, a body, a key or a transaction.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

import falcon

from domain.clients import ANONYMOUS_ID
from interfaces.runtime.metrics_registry import PAYMENT_DURATION, PAYMENT_OUTCOMES, RATE_LIMITED, REQUESTS, method_label

REQUEST_ID = "X-Request-Id"
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
UNMATCHED = "unmatched"  # a route label for every path no resource serves: no label per probed URL
log = logging.getLogger("paywarden.access")


def request_id(req: falcon.Request) -> str:
    offered = req.get_header(REQUEST_ID)
    return offered if offered and SANE_REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex


def client_label(req: falcon.Request) -> str:
    client = getattr(req.context, "client", None)
    if client is None or client.id == ANONYMOUS_ID:
        return "anonymous"
    return client.id.removeprefix("merchant:")


def outcome(operation: str, media: object) -> tuple[str, str] | None:
    """(outcome, reason) of a verify or settle answer; None for bodies of another shape (401, 429)."""
    if not isinstance(media, dict):
        return None
    if operation == "verify" and "isValid" in media:
        return ("valid", "none") if media["isValid"] else ("invalid", str(media.get("invalidReason")))
    if operation == "settle" and "success" in media:
        if media["success"]:
            return "success", "none"
        reason = str(media.get("errorReason"))
        return ("pending" if reason == "settlement_pending" else "failure"), reason
    return None


class RequestLogMiddleware:
    """First in the chain, so its `process_response` runs last and sees the final status and body."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.request_id = request_id(req)
        req.context.started = time.perf_counter()

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: object,
                         req_succeeded: bool) -> None:
        elapsed = time.perf_counter() - getattr(req.context, "started", time.perf_counter())
        rid = getattr(req.context, "request_id", None) or request_id(req)
        resp.set_header(REQUEST_ID, rid)
        route, status = req.uri_template or UNMATCHED, resp.status_code
        REQUESTS.labels(method_label(req.method), route, str(status)).inc()
        operation = getattr(resource, "operation", None)
        media = resp.media if resp.data is None and resp.text is None else None
        result = outcome(operation, media) if operation in ("verify", "settle") else None
        if operation in ("verify", "settle"):
            PAYMENT_DURATION.labels(operation).observe(elapsed)
            if result is not None:
                replayed = "true" if resp.get_header("Idempotent-Replayed") else "false"
                PAYMENT_OUTCOMES.labels(operation, *result, replayed).inc()
        if status == 429:
            scope = getattr(req.context, "rate_limit_scope", None)
            if scope not in ("key", "ip", "auth"):
                scope = "key" if client_label(req) != "anonymous" else "ip"
            RATE_LIMITED.labels(scope, route).inc()
        fields = {
            "method": req.method[:32], "route": route, "path": req.path[:200], "status": status,
            "duration_ms": round(elapsed * 1000, 2), "request_id": rid, "client": client_label(req),
        }
        reason = result[1] if result and result[1] != "none" else _error_code(media) if status >= 400 else None
        if reason:
            fields["reason"] = reason
        level = logging.WARNING if status >= 500 else logging.INFO
        log.log(level, "%s %s %s", req.method, route, status, extra=fields)


def _error_code(media: object) -> str | None:
    if isinstance(media, dict) and isinstance(media.get("error"), str):
        return media["error"]
    return None
