"""The served item of a catalog listing: the exact shape of an item of GET /discovery/resources, built once per
listing event by `CatalogProjection` and stored as JSON (docs/discovery.md, "The served item")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from domain.clients import ANONYMOUS_ID
from domain.discovery import ListingDetails, query_params
from domain.networks import X402_VERSION, network

SERVED_PROVIDER = ("name", "description", "url")  # provider.contact is accepted, stored, never served


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds: fixed width, so it also sorts as text."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def item(resource: str, owner: str, proposal: ListingDetails, offers: list[dict[str, Any]],
         verified_at: datetime, declared: ListingDetails | None = None) -> dict[str, Any]:
    """The served item: what the merchant declared, else the latest payment's proposal without title, tags or
    provider (docs/discovery.md, "Whose a listing is"); never those of the anonymous identity."""
    registered = owner != ANONYMOUS_ID and declared is not None
    details = declared if registered and declared is not None else proposal.proposed()
    served: dict[str, Any] = {
        "resource": resource, "type": details.type, "method": details.method, "x402Version": X402_VERSION,
        "accepts": [_accept(offer, details) for offer in offers], "lastUpdated": timestamp(verified_at),
    }
    if registered and details.provider:
        served["provider"] = {k: details.provider[k] for k in SERVED_PROVIDER if k in details.provider}
    metadata: dict[str, Any] = {"title": details.title} if registered and details.title else {}
    metadata["description"] = details.description
    if registered:
        metadata["tags"] = list(details.tags)
    served["metadata"] = metadata
    return served


def _accept(offer: dict[str, Any], details: ListingDetails) -> dict[str, Any]:
    known = network(offer["network"])
    symbol = "USDC" if known is not None and known.usdc_mint == offer["asset"] else offer["asset"]
    output = details.output or {}
    return {
        "scheme": offer["scheme"], "network": offer["network"], "maxAmountRequired": str(offer["amount"]),
        "asset": offer["asset"], "payTo": offer["pay_to"], "maxTimeoutSeconds": offer["max_timeout_seconds"],
        "description": offer["description"] or details.description,
        "mimeType": offer["mime_type"] or output.get("type", ""),
        "outputSchema": {
            "input": _input(details),
            "output": {"type": output.get("type") or offer["mime_type"], "schema": output.get("schema") or {}},
        },
        "extra": {
            "asset": symbol,
            "pricing": details.pricing or {"model": "per_request", "amount": str(offer["amount"]), "asset": symbol},
        },
    }



def _input(details: ListingDetails) -> dict[str, Any]:
    """`outputSchema.input`: how to call the resource. An MCP tool: its name, description, transport and input
    schema (a `tools/call` of that name over the MCP server at `resource`); else the method, the transport type
    (`http`, as x402 clients read it), the query parameters, and a route's path parameters."""
    if details.tool is not None:
        return {"type": "mcp", "method": details.method, "toolName": details.tool["name"],
                "description": details.tool["description"], "transport": details.tool["transport"],
                "inputSchema": details.tool["inputSchema"]}
    served: dict[str, Any] = {"method": details.method, "type": details.type, "queryParams": query_params(details)}
    if details.path_params:
        served["pathParams"] = dict.fromkeys(details.path_params, "string")
    return served
