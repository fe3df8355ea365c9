"""MCP services behind the proxy: the service kinds and a tool's price.

A proxy service is of kind `http` (priced routes, docs/proxy.md) or `mcp` (an MCP server on the Streamable HTTP
transport, docs/mcp.md). An `mcp` service prices tools by name: a `tools/call` of a priced tool pays `price`
atomic units of `asset` to `pay_to` on `network`; every other tool and every other method passes free.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from domain.proxy_values import MAX_PRICE, ProxyServiceError, is_address

KIND_HTTP, KIND_MCP = "http", "mcp"
KINDS = (KIND_HTTP, KIND_MCP)
# The MCP specification's tool name rule (revision 2025-11-25, "Tool names"): 1 to 128 of A-Z a-z 0-9 _ - .
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
MAX_SCHEMA_BYTES = 8192


class ToolNotPricedError(ProxyServiceError):
    """No priced tool of that name on the service (unpricing it is unpricing nothing)."""


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ProxyServiceError(f"a service's kind is one of {', '.join(KINDS)}", field="kind")
    return kind


def check_tool_name(name: Any) -> str:
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ProxyServiceError("a tool name is 1 to 128 of A-Z, a-z, 0-9, _, - and .", field="tool")
    return name


@dataclass(frozen=True)
class ToolPrice:
    """What one call of an MCP tool costs, and the tool as the upstream describes it (for the catalog)."""

    name: str
    price: int
    network: str
    asset: str
    pay_to: str
    max_timeout_seconds: int = 60
    description: str = ""
    input_schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @classmethod
    def checked(cls, **fields: Any) -> ToolPrice:
        check_tool_name(fields.get("name"))
        price = fields.get("price")
        if not isinstance(price, int) or isinstance(price, bool) or not 0 < price <= MAX_PRICE:
            raise ProxyServiceError("price is a positive whole number of atomic units", field="price")
        if not is_address(fields.get("pay_to")):
            raise ProxyServiceError("payTo is a Solana address (base58, 32 bytes)", field="payTo")
        timeout = fields.get("max_timeout_seconds", 60)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 3600:
            raise ProxyServiceError("maxTimeoutSeconds is 1 to 3600", field="maxTimeoutSeconds")
        text = fields.get("description", "")
        if not isinstance(text, str) or len(text) > 500 or not text.isprintable():
            raise ProxyServiceError("description is at most 500 printable characters", field="description")
        schema = fields.get("input_schema")
        if schema is not None and (not isinstance(schema, dict) or len(json.dumps(schema)) > MAX_SCHEMA_BYTES):
            raise ProxyServiceError(f"inputSchema is a JSON object of at most {MAX_SCHEMA_BYTES} bytes",
                                    field="inputSchema")
        return cls(**fields)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def listed_terms(listed: Iterable[Mapping[str, Any]], name: str) -> dict[str, Any]:
    """A price's terms from the tool as the MCP server lists it (`tools/list`): its description (the first 500
    characters) and input schema, for the catalog. A tool the server does not list is refused."""
    tool = next((t for t in listed if t.get("name") == name), None)
    if tool is None:
        raise ProxyServiceError(f"the MCP server lists no tool {name}", field="tool")
    schema = tool.get("inputSchema")
    return {"description": str(tool.get("description") or "")[:500],
            **({"input_schema": schema} if isinstance(schema, dict) else {})}


def tool_via(service_id: str, tool: str) -> str:
    """The door a tool call's payment is answered by, in the payment's events: `mcp:<service id>:<tool>`."""
    return f"mcp:{service_id}:{tool}"
