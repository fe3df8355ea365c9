"""The OpenAPI 3.1 document of the public API, generated with apispec from the marshmallow wire schemas.

Requests use the schemas the resources load with; responses use the schemas they dump with, narrowed per status
(a 200 verify is `isValid: true` with `payer`; a 400 names a reason code). Bodies the resources build without a
schema (supported, discovery, errors, health) are described by `response_schemas`. Served at GET /openapi.json.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

import falcon
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from marshmallow import Schema, fields

from domain.codes import Code
from interfaces.http.common.requestlog import REQUEST_ID, SANE_REQUEST_ID
from interfaces.http.discovery.resources import DiscoveryQuerySchema
from interfaces.http.discovery.search import DiscoverySearchQuerySchema
from interfaces.http.facilitator.response_schemas import (
    DiscoveryResponseSchema,
    DiscoverySearchResponseSchema,
    ErrorSchema,
    HealthSchema,
    PaymentSchema,
    ReadinessSchema,
    SupportedResponseSchema,
)
from interfaces.http.facilitator.schemas import (
    Atomic,
    PaymentRequestSchema,
    SettleResponseSchema,
    SupportedQuerySchema,
    VerifyResponseSchema,
)

UNAUTHORIZED = ("missing_api_key", "invalid_api_key", "revoked_api_key", "key_environment_mismatch", "service_deleted")
FAILURES = sorted(c.value for c in Code if c not in (Code.SETTLEMENT_PENDING,))


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _narrow(base: str, **rules: Any) -> dict[str, Any]:
    properties = {k: v for k, v in rules.items() if k != "required"}
    return {"allOf": [_ref(base), {"properties": properties, "required": rules.get("required", [])}]}


def _json(description: str, schema: dict[str, Any], **headers: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}, "headers": headers}


RETRY_AFTER = {"description": "seconds to wait", "required": True, "schema": {"type": "integer", "minimum": 1}}


def _payment_responses(operation: str) -> dict[str, Any]:
    if operation == "verify":
        ok = _json("valid", _narrow("VerifyResponse", isValid={"const": True}, required=["payer"]))
        failed = _narrow("VerifyResponse", isValid={"const": False}, invalidReason={"enum": FAILURES},
                         required=["invalidReason"])
        unexpected = _narrow("VerifyResponse", isValid={"const": False},
                             invalidReason={"const": Code.UNEXPECTED_VERIFY_ERROR.value}, required=["invalidReason"])
    else:
        settled = _narrow("SettleResponse", success={"const": True}, required=["transaction", "network", "payer"])
        pending = _narrow("SettleResponse", success={"const": False},
                          errorReason={"const": Code.SETTLEMENT_PENDING.value},
                          required=["errorReason", "transaction", "network"])
        ok = _json("settled (confirmed on chain); or `settlement_pending`: broadcast, not yet confirmed within the "
                   "budget — retry the same settle (x402 v2 clients retry once, on a 200)",
                   {"oneOf": [settled, pending]})
        failed = _narrow("SettleResponse", success={"const": False}, errorReason={"enum": FAILURES},
                         required=["errorReason"])
        unexpected = _narrow("SettleResponse", success={"const": False},
                             errorReason={"const": Code.UNEXPECTED_SETTLE_ERROR.value}, required=["errorReason"])
    replayed = {"description": "`true` when this is the stored result of an earlier identical request",
                "schema": {"type": "string", "enum": ["true"]}}
    ok["headers"]["Idempotent-Replayed"] = replayed
    responses = {
        "200": ok,
        "400": _json("the payment or the request is invalid: the reason code says why", failed,
                     **{"Idempotent-Replayed": replayed}),
        "401": _json("no, a malformed, an unknown or a revoked API key, or one scoped to a deleted proxy service",
                     _error(UNAUTHORIZED)),
        "413": _json("the body exceeds 64 KB (reason invalid_payload)", failed),
        "415": _json("the body is not application/json (reason invalid_payload)", failed),
        "429": _json("rate limited", _error(("rate_limited",)), **{"Retry-After": RETRY_AFTER}),
        "500": _json("server fault (chain or database unreachable): retry", unexpected),
    }
    return responses


IDEMPOTENCY_KEY_PARAMETER = {
    "in": "header", "name": "Idempotency-Key", "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e][\\x20-\\x7e]*$"},
    "description": "the merchant's own key for this settle (Stripe's convention): a retry with the same key after "
                   "a lost answer gets the stored result; a settled payment answers every other settle "
                   "`duplicate_settlement`",
}


PAYMENT_ID_PARAMETER = {
    "in": "path", "name": "payment_id", "required": True, "description": "the payment's id (a UUID)",
    "schema": {"type": "string", "format": "uuid",
               "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
}


def _error(codes: tuple[str, ...]) -> dict[str, Any]:
    return _narrow("Error", error={"enum": list(codes)})


def _common_errors(*statuses: str) -> dict[str, Any]:
    described = {"400": "invalid query parameters", "401": "no, a malformed, an unknown or a revoked API key",
                 "429": "rate limited", "500": "server fault: retry"}
    responses = {s: _json(described[s], _ref("Error")) for s in statuses}
    if "429" in responses:
        responses["429"] = _json("rate limited", _error(("rate_limited",)), **{"Retry-After": RETRY_AFTER})
    return responses


def _atomic_pattern(self: Any, field: fields.Field, **_: Any) -> dict[str, Any]:
    return {"pattern": "^[0-9]{1,20}$", "description": "atomic units (USDC: 6 decimals)"} if isinstance(
        field, Atomic) else {}


def _query(schema: type[Schema]) -> dict[str, Any]:
    return {"in": "query", "schema": schema}


def _version() -> str:
    try:
        return metadata.version("paywarden")
    except metadata.PackageNotFoundError:
        return "0"


def build_document(*, anonymous: bool = False) -> dict[str, Any]:
    plugin = MarshmallowPlugin()
    spec = APISpec(title="Paywarden", version=_version(), openapi_version="3.1.0", plugins=[plugin], info={
        "description": "x402 v2 `exact` payments in USDC on Solana: verify, settle, supported kinds, a payment's "
                       "history, discovery."})
    plugin.converter.add_attribute_function(_atomic_pattern)  # type: ignore[union-attr]
    spec.components.security_scheme("bearerAuth", {
        "type": "http", "scheme": "bearer", "description": "an API key: pw_live_… (mainnet) or pw_test_… (devnet)"})
    for name, schema in (("PaymentRequest", PaymentRequestSchema), ("VerifyResponse", VerifyResponseSchema),
                         ("SettleResponse", SettleResponseSchema), ("Error", ErrorSchema),
                         ("SupportedResponse", SupportedResponseSchema), ("DiscoveryResponse", DiscoveryResponseSchema),
                         ("DiscoverySearchResponse", DiscoverySearchResponseSchema),
                         ("Health", HealthSchema), ("Readiness", ReadinessSchema), ("Payment", PaymentSchema)):
        spec.components.schema(name, schema=schema)
    security: list[dict[str, list[str]]] = [{"bearerAuth": []}, *([{}] if anonymous else [])]
    body = {"required": True, "content": {"application/json": {"schema": _ref("PaymentRequest")}}}
    summaries = {"verify": "Verify a payment without executing it on chain",
                 "settle": "Verify a payment and execute it on chain"}
    for prefix, suffix in (("", ""), ("/v1", "V1")):
        for operation, summary in summaries.items():
            spec.path(f"{prefix}/{operation}", operations={"post": {
                "operationId": operation + suffix, "summary": summary, "security": security, "requestBody": body,
                "parameters": [IDEMPOTENCY_KEY_PARAMETER] if operation == "settle" else [],
                "responses": _payment_responses(operation)}})
        spec.path(f"{prefix}/supported", operations={"get": {
            "operationId": "supported" + suffix, "summary": "The payment kinds this client may use",
            "security": security, "parameters": [_query(SupportedQuerySchema)],
            "responses": {"200": _json("supported kinds", _ref("SupportedResponse")),
                          **_common_errors("400", "401", "429", "500")}}})
    spec.path("/v1/payments/{payment_id}", operations={"get": {
        "operationId": "getPaymentV1", "summary": "A payment of yours and its event timeline",
        "description": "From the payments read model, which trails the writers by the projection worker's poll "
                       "interval (0.2 s): a payment just answered may be 404 for that long.",
        "security": security, "parameters": [PAYMENT_ID_PARAMETER],
        "responses": {"200": _json("the payment and every event of it, in order", _ref("Payment")),
                      "401": _json("no, a malformed, an unknown or a revoked API key", _error(UNAUTHORIZED)),
                      "404": _json("no payment of yours has this id (another client's is unknown alike)",
                                   _ref("Error")),
                      **_common_errors("429", "500")}}})
    spec.path("/discovery/resources", operations={"get": {
        "operationId": "listDiscoveryResources", "summary": "The public catalog of paid resources (cached 60 s)",
        "security": [], "parameters": [_query(DiscoveryQuerySchema)],
        "description": "Every filter given must hold (AND). A parameter not described here is a 400 naming it.",
        "responses": {"200": _json("a page of the catalog", _ref("DiscoveryResponse")),
                      **_common_errors("400", "429", "500")}}})
    spec.path("/discovery/search", operations={"get": {
        "operationId": "searchDiscoveryResources", "summary": "A ranked full-text search of the catalog (cached 60 s)",
        "description": "Every word of `query` must occur in a listing's title, tags, description, URL host or path, "
                       "provider name or schema field names; listings whose tag or title is the query come first, "
                       "then those with every word in the title or tags, then the rest, each most recently updated "
                       "first. The list's filters apply (AND). A parameter not described here is a 400 naming it.",
        "security": [], "parameters": [_query(DiscoverySearchQuerySchema)],
        "responses": {"200": _json("a page of matches", _ref("DiscoverySearchResponse")),
                      **_common_errors("400", "429", "500")}}})
    spec.path("/healthz", operations={"get": {
        "operationId": "healthz", "summary": "The process answers", "security": [],
        "responses": {"200": _json("alive", _ref("Health"))}}})
    spec.path("/readyz", operations={"get": {
        "operationId": "readyz", "summary": "Event store, Redis, each network's RPC and fee payer balances answer",
        "security": [], "responses": {"200": _json("ready", _ref("Readiness")),
                                      "503": _json("not ready: the failing checks say why", _ref("Readiness"))}}})
    spec.path("/metrics", operations={"get": {
        "operationId": "metrics", "summary": "Prometheus metrics (text format)", "security": [],
        "responses": {"200": {"description": "the Prometheus text exposition format",
                              "content": {"text/plain": {"schema": {"type": "string"}}}}}}})
    spec.path("/openapi.json", operations={"get": {
        "operationId": "openapi", "summary": "This document", "security": [],
        "responses": {"200": _json("OpenAPI 3.1", {"type": "object"})}}})
    document = spec.to_dict()
    _tidy_parameters(document)
    _add_request_id(document)
    return document


PARAMETERS = {
    "type": "only resources of this type",
    "tags": "comma-separated, case-insensitive; a resource must carry every one (at most 10 tags of at most 50 "
            "characters)",
    "limit": "page size", "offset": "items to skip",
    "network": "only resources accepting payment on this CAIP-2 network", "payTo": "only resources paying this "
    "address", "scheme": "only resources accepting this payment scheme", "extensions": "comma-separated extension "
    "keys; a resource must carry every one (each listing carries `bazaar`, the extension it was registered by)",
    "query": "words to find (1-200 characters, at most 10 words of letters or digits; every word must match)",
    "cursor": "`pagination.cursor` of the previous page of the same search",
    "service": "the slug of one of your proxy services (your scoped key's own): only the kinds of its routes matching "
               "`path`, or of an mcp service's priced tools; 400 `unknown_service` when it charges nothing there",
    "path": "with `service`: the path its routes must match (an mcp service's priced tools are at `/`)",
}


def _tidy_parameters(document: dict[str, Any]) -> None:
    """Loader-side defaults (None, an empty tuple) mean "absent" on the wire: no null, no default in the doc."""
    for item in document["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                parameter.setdefault("description", PARAMETERS.get(parameter["name"], ""))
                schema = parameter["schema"]
                if schema.get("default") in (None, "()"):
                    schema.pop("default", None)
                if isinstance(schema.get("type"), list):
                    schema["type"] = next(t for t in schema["type"] if t != "null")
                if "enum" in schema:
                    schema["enum"] = [v for v in schema["enum"] if v is not None]


def _add_request_id(document: dict[str, Any]) -> None:
    echoed = {"description": "the caller's sane X-Request-Id, or one made for this request", "required": True,
              "schema": {"type": "string", "pattern": f"^{SANE_REQUEST_ID.pattern}$"}}
    offered = {"in": "header", "name": REQUEST_ID, "required": False, "schema": {"type": "string"},
               "description": "echoed when at most 64 characters of [A-Za-z0-9._-]; otherwise replaced"}
    for item in document["paths"].values():
        for operation in item.values():
            operation.setdefault("parameters", []).append(offered)
            for response in operation["responses"].values():
                response.setdefault("headers", {})[REQUEST_ID] = echoed


class OpenApiResource:
    def __init__(self, document: dict[str, Any]) -> None:
        self._document = document

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._document
