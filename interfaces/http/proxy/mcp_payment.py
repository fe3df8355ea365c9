"""x402's MCP transport as the official SDK speaks it (`x402.mcp`), for one priced tool.

- payment required: the `tools/call` answered with a tool result `isError: true` whose `structuredContent` is the
  x402 v2 `PaymentRequired` (and its JSON as the first text content, the SDK's fallback);
- the payment: the client's `PaymentPayload` in the call's `params._meta["x402/payment"]`;
- the settle answer: the tool's result with `_meta["x402/payment-response"]` (an x402 `SettleResponse`).
The discovery metadata is the SDK's Bazaar MCP extension (`declare_mcp_discovery_extension`'s shape): the tool's
name, description and input schema, `transport: "streamable-http"`.
"""

from __future__ import annotations

import json
from typing import Any

from domain.mcp_tools import ToolPrice
from domain.x402 import PaymentPayload, Requirements
from interfaces.http.proxy.payment import BadPaymentHeaderError, accepted_terms, requirements_json

PAYMENT_META, RESPONSE_META = "x402/payment", "x402/payment-response"
MAX_PAYMENT_BYTES = 48 * 1024
_INPUT_SCHEMA = {  # the JSON Schema of `info`, as the SDK declares it for an MCP tool
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "required": ["input"],
    "properties": {"input": {
        "type": "object", "required": ["type", "toolName", "inputSchema"], "additionalProperties": False,
        "properties": {"type": {"type": "string", "const": "mcp"}, "toolName": {"type": "string"},
                       "inputSchema": {"type": "object"}, "description": {"type": "string"},
                       "transport": {"type": "string", "enum": ["streamable-http", "sse"]}}}},
}


def tool_requirements(tool: ToolPrice, fee_payer: str) -> Requirements:
    return Requirements(scheme="exact", network=tool.network, amount=tool.price, asset=tool.asset,
                        pay_to=tool.pay_to, max_timeout_seconds=tool.max_timeout_seconds,
                        extra={"feePayer": fee_payer})


def tool_resource(tool: ToolPrice, url: str) -> dict[str, Any]:
    """The payment's resource: the gateway URL (what an agent configures) with the tool as its fragment
    (`{gateway}#get_weather`), so the payments list, CSV, charts, webhooks and audit history, which show a payment's
    resource URL, name the service and the tool; a catalog drops the fragment (the SDK's Bazaar does), keeping the
    tool's name from the Bazaar MCP extension."""
    return {"url": f"{url}#{tool.name}", "description": tool.description or f"Tool: {tool.name}",
            "mimeType": "application/json"}


def bazaar_extension(tool: ToolPrice) -> dict[str, Any]:
    info: dict[str, Any] = {"type": "mcp", "toolName": tool.name, "inputSchema": tool.input_schema or {
        "type": "object"}, "transport": "streamable-http"}
    if tool.description:
        info["description"] = tool.description
    return {"info": {"input": info}, "schema": _INPUT_SCHEMA}


def payment_required_result(tool: ToolPrice, terms: Requirements, url: str, error: str,
                            response: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tool result that asks for a payment (with the failed settle answer when a settle failed, as the SDK
    puts it, in the `PaymentRequired` under `x402/payment-response`)."""
    required: dict[str, Any] = {"x402Version": 2, "error": error, "resource": tool_resource(tool, url),
                                "accepts": [requirements_json(terms)],
                                "extensions": {"bazaar": bazaar_extension(tool)}}
    if response is not None:
        required[RESPONSE_META] = response
    return {"content": [{"type": "text", "text": json.dumps(required)}], "structuredContent": required,
            "isError": True}


def payment_of(params: dict[str, Any]) -> Any:
    meta = params.get("_meta")
    return meta.get(PAYMENT_META) if isinstance(meta, dict) else None


def without_payment(message: dict[str, Any]) -> dict[str, Any]:
    """The call as the upstream gets it: `_meta["x402/payment"]` removed, the rest of `_meta` (a progress token)
    kept."""
    params = dict(message.get("params") or {})
    meta = params.get("_meta")
    if isinstance(meta, dict) and PAYMENT_META in meta:
        rest = {k: v for k, v in meta.items() if k != PAYMENT_META}
        if rest:
            params["_meta"] = rest
        else:
            del params["_meta"]
    return {**message, "params": params}


def tool_payload(payment: Any, tool: ToolPrice, url: str) -> PaymentPayload:
    """The client's payload (an object, or its JSON as a string, as the SDK reads either) as it wrote it (its
    `accepted` terms are checked against the tool's by the payment's own checks, application/payment_checks.py),
    with the gateway's own resource and discovery extension: the tool price is the authority on what is sold."""
    if isinstance(payment, str):
        if len(payment) > MAX_PAYMENT_BYTES:
            raise BadPaymentHeaderError("x402/payment is too large")
        try:
            payment = json.loads(payment)
        except ValueError:
            raise BadPaymentHeaderError("x402/payment is not JSON") from None
    if not isinstance(payment, dict) or payment.get("x402Version") != 2:
        raise BadPaymentHeaderError("x402/payment must be an x402 v2 PaymentPayload")
    inner = payment.get("payload")
    transaction = inner.get("transaction") if isinstance(inner, dict) else None
    if not isinstance(transaction, str) or not transaction or len(transaction) > MAX_PAYMENT_BYTES:
        raise BadPaymentHeaderError("x402/payment carries no payload.transaction")
    accepted = payment.get("accepted")
    return PaymentPayload(transaction=transaction, accepted=None if accepted is None else accepted_terms(accepted),
                          resource=tool_resource(tool, url), extensions={"bazaar": bazaar_extension(tool)})
