"""One JSON log line and the metrics of every request; the request id, taken from `X-Request-Id` or made here.

The line holds method, route (the URI template), path, status, duration_ms, request_id, client (the merchant id or
"anonymous") and, when a payment or a request failed, reason. Never a header, a body, a key or a transaction.

When logging is configured as the service configures it (`interfaces/runtime/observability.py`: the one JSON
stream handler, on the root logger), the line is written straight to that handler's stream, formatted and masked
exactly as the handler would (`json_line`); under any other configuration (a test's capture, an added handler, a
filter) it goes through `logging` as a record.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

import falcon

from domain.clients import ANONYMOUS_ID, merchant_of
from interfaces.runtime.metrics_registry import (
    PAYMENT_DURATION,
    PAYMENT_OUTCOMES,
    RATE_LIMITED,
    REQUESTS,
    child,
    method_label,
)
from interfaces.runtime.observability import JsonFormatter, json_line, timestamp

REQUEST_ID = "X-Request-Id"
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
UNMATCHED = "unmatched"  # a route label for every path no resource serves: no label per probed URL
log = logging.getLogger("paywarden.access")


def request_id(req: falcon.Request) -> str:
    offered = req.get_header(REQUEST_ID)
    return offered if offered and SANE_REQUEST_ID.fullmatch(offered) else random_id()


def random_id() -> str:
    """`uuid.uuid4().hex` without the `UUID` object: 16 random bytes, version 4, RFC 4122 variant, 32 hex digits."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


def client_label(req: falcon.Request) -> str:
    client = getattr(req.context, "client", None)
    if client is None or client.id == ANONYMOUS_ID:
        return "anonymous"
    return merchant_of(client.id) or client.id


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
        child(REQUESTS, method_label(req.method), route, str(status)).inc()
        operation = getattr(resource, "operation", None)
        media = resp.media if resp.data is None and resp.text is None else None
        result = outcome(operation, media) if operation in ("verify", "settle") else None
        if operation in ("verify", "settle"):
            child(PAYMENT_DURATION, operation).observe(elapsed)
            if result is not None:
                replayed = "true" if resp.get_header("Idempotent-Replayed") else "false"
                child(PAYMENT_OUTCOMES, operation, *result, replayed).inc()
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
        write_line(level, (req.method, route, status), fields)


def write_line(level: int, args: tuple[str, str, int], fields: dict[str, Any]) -> None:
    """The access line ("method route status" and `fields`): straight to the service's JSON handler when it is the
    only one, else as a record."""
    if not log.isEnabledFor(level):
        return
    handler = _only_json_handler(level)
    if handler is not None:
        line = json_line({"ts": timestamp(time.time()), "level": logging.getLevelName(level).lower(),
                          "logger": log.name, "message": " ".join(map(str, args)), **fields})
        try:
            handler.stream.write(line + handler.terminator)
            handler.stream.flush()
            return
        except Exception:  # noqa: BLE001 - let logging report it as it reports a failed emit
            pass
    log.log(level, "%s %s %s", *args, extra=fields)


def _only_json_handler(level: int) -> logging.StreamHandler | None:
    """The handler a record of `level` would reach, when it is the only one and exactly the service's: a plain
    `StreamHandler` with the masking `JsonFormatter`, no filter anywhere on the way."""
    if log.filters:
        return None
    found: list[logging.Handler] = []
    logger: logging.Logger | None = log
    while logger is not None:
        found.extend(logger.handlers)
        logger = logger.parent if logger.propagate else None
    if len(found) != 1:
        return None
    handler = found[0]
    if (type(handler) is not logging.StreamHandler or handler.filters or level < handler.level
            or type(handler.formatter) is not JsonFormatter or not handler.formatter.redacts):
        return None
    return handler


def _error_code(media: object) -> str | None:
    if isinstance(media, dict) and isinstance(media.get("error"), str):
        return media["error"]
    return None
