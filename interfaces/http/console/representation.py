"""Services, routes and priced tools as the console API and the CLI show them (the upstream credential only as
"set")."""

from __future__ import annotations

from typing import Any

from domain.mcp_tools import ToolPrice
from domain.money import is_usdc, usdc
from domain.proxy_service import ProxyService, Route

DEFAULT_PROXY_URL = "http://127.0.0.1:8405"


def gateway_url(service: ProxyService, proxy_url: str) -> str:
    return f"{(proxy_url or DEFAULT_PROXY_URL).rstrip('/')}/{service.slug}"


def service_json(service: ProxyService, proxy_url: str) -> dict[str, Any]:
    base = service.base
    return {
        "id": str(service.id), "name": service.name, "type": "Proxy", "baseUrl": service.base_url,
        "slug": service.slug, "gatewayUrl": gateway_url(service, proxy_url), "active": service.active,
        "domain": base.domain, "subdomain": base.subdomain or None, "pathSuffix": base.path_suffix or None,
        "port": base.port, "bodyLimit": service.body_limit, "passCookies": service.pass_cookies,
        "upstreamAuth": {"header": service.auth_header, "set": True} if service.auth_header else None,
        "routes": len(service.routes), "kind": service.kind, "tools": len(service.tools),
    }


def route_json(route: Route) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": route.id, "method": route.method, "path": route.path, "price": str(route.price),
        "priceUsdc": usdc(route.price, grouped=False) if is_usdc(route.network, route.asset) else None,
        "network": route.network, "asset": route.asset, "payTo": route.pay_to,
        "maxTimeoutSeconds": route.max_timeout_seconds, "settle": route.settle, "access": route.access,
        "accessSeconds": route.access_seconds,
    }
    if route.description:
        body["description"] = route.description
    if route.mime_type:
        body["mimeType"] = route.mime_type
    if route.bazaar:
        body["bazaar"] = route.bazaar
    return body


def tool_json(tool: ToolPrice) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": tool.name, "price": str(tool.price),
        "priceUsdc": usdc(tool.price, grouped=False) if is_usdc(tool.network, tool.asset) else None,
        "network": tool.network, "asset": tool.asset, "payTo": tool.pay_to,
        "maxTimeoutSeconds": tool.max_timeout_seconds,
    }
    if tool.description:
        body["description"] = tool.description
    if tool.input_schema is not None:
        body["inputSchema"] = tool.input_schema
    return body
