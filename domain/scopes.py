"""Keys scoped to a proxy service: which payment terms such a key may verify and settle.

A scoped key pays only for what one of its service's routes (an `http` service) or priced tools (an `mcp` service)
charges: the same scheme (`exact`), network, asset, `payTo` and amount. When the payload names its resource, the
resource's path must match the route's pattern (after the service's path suffix, or the gateway's `/{slug}` prefix,
is removed), and when its bazaar metadata names the HTTP method, the method must be the route's. A tool's resource
is the service's endpoint with the tool's name as its fragment (`{gateway}#get_weather`, or the merchant's own
`https://weather.example/mcp#get_weather`), or the x402 SDK's default `mcp://tool/get_weather`; a tool the resource
or the Bazaar MCP extension (`extensions.bazaar.info.input.toolName`) names must be the priced tool. The
resource's host is not compared: a merchant's server behind a reverse proxy often sees another host name than its
public one, and the money is bound by the terms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from domain.mcp_tools import KIND_HTTP, KIND_MCP, ToolPrice
from domain.networks import SCHEME_EXACT
from domain.proxy_service import Route
from domain.routes import matches, normalize_path
from domain.x402 import PaymentPayload, Requirements


@dataclass(frozen=True)
class ServiceScope:
    """The service a key is scoped to: its slug, base-URL path suffix, routes and priced tools in the order they
    were added (as the service_scopes read model keeps them), and its kind."""

    service_id: str
    slug: str
    path_suffix: str
    routes: tuple[Route, ...]
    tools: tuple[ToolPrice, ...] = ()
    kind: str = KIND_HTTP

    @property
    def priced(self) -> str:
        """What the service charges for, in words: its routes, or an `mcp` service's priced tools."""
        return "priced tools" if self.kind == KIND_MCP else "routes"

    def allows(self, payload: PaymentPayload, terms: Requirements) -> bool:
        paths, method = resource_paths(payload.resource, self.slug, self.path_suffix), request_method(payload)
        if any(_same_terms(route, terms) and _same_request(route, paths, method) for route in self.routes):
            return True
        return any(_same_terms(tool, terms) and _same_call(tool, payload, paths) for tool in self.tools)

    def routes_for(self, path: str | None) -> list[Route]:
        """The routes whose pattern matches `path` (any method); all of them without a path."""
        if path is None:
            return list(self.routes)
        normalized = normalize_path(path if path.startswith("/") else "/" + path)
        return [r for r in self.routes if matches("*", r.path, "GET", normalized)]

    def terms_for(self, path: str | None) -> Sequence[Route | ToolPrice]:
        """What the service charges at `path` (`/supported?service=&path=`): the routes matching it, and, at the
        service's endpoint itself (`/`, or no path), its priced tools."""
        at_endpoint = path is None or normalize_path(path if path.startswith("/") else "/" + path) == "/"
        return [*self.routes_for(path), *(self.tools if at_endpoint else ())]

    def networks(self, served: Iterable[str], priced: Sequence[Route | ToolPrice] | None = None) -> list[str]:
        """The networks of `served` that the service's routes and tools (or those `priced`) charge on."""
        every: Sequence[Route | ToolPrice] = [*self.routes, *self.tools] if priced is None else priced
        wanted = {p.network for p in every}
        return [n for n in served if n in wanted]


def _same_terms(priced: Route | ToolPrice, terms: Requirements) -> bool:
    return (terms.scheme == SCHEME_EXACT and terms.network == priced.network and terms.asset == priced.asset
            and terms.pay_to == priced.pay_to and terms.amount == priced.price)


def _same_call(tool: ToolPrice, payload: PaymentPayload, paths: list[str] | None) -> bool:
    """The resource, when named, is the tool (or the service's endpoint, naming no tool), and the Bazaar MCP
    extension, when it names a tool, names this one."""
    if paths is not None and resource_tool(payload.resource, paths) not in ("", tool.name):
        return False
    return requested_tool(payload) in (None, tool.name)


def _same_request(route: Route, paths: list[str] | None, method: str | None) -> bool:
    if paths is None:  # the payload names no resource: the terms decide
        return True
    return any(matches("*" if method is None else route.method, route.path, method or "GET", p) for p in paths)


def resource_paths(resource: dict[str, Any] | None, slug: str, path_suffix: str) -> list[str] | None:
    """The paths, relative to the service, a resource URL may ask for: as it is, without the base URL's path
    suffix, without the gateway's `/{slug}`. None when the payload names no resource URL."""
    url = (resource or {}).get("url")
    if not isinstance(url, str) or not url:
        return None
    path = normalize_path(urlsplit(url).path or "/")
    found = [path]
    for prefix in ("/" + path_suffix.strip("/") if path_suffix.strip("/") else "", f"/{slug}"):  # "/v1" as kept
        if prefix and (path.lower() == prefix.lower() or path.lower().startswith(prefix.lower() + "/")):
            found.append(path[len(prefix):] or "/")
    return found


def resource_tool(resource: dict[str, Any] | None, paths: list[str]) -> str | None:
    """The tool a payload's resource URL (whose `resource_paths` are `paths`) names: the x402 SDK's
    `mcp://tool/<name>`, or the fragment of a URL of the service's endpoint (its path `/` once the path suffix or
    `/{slug}` is removed), "" when that URL has no fragment; None when the URL is not one of the service's tools."""
    parts = urlsplit(str((resource or {}).get("url")))
    if parts.scheme.lower() == "mcp" and parts.netloc.lower() == "tool":
        return unquote(parts.path[1:]) or None
    return unquote(parts.fragment) if "/" in paths else None


def requested_tool(payload: PaymentPayload) -> str | None:
    """The tool the Bazaar MCP extension names (`extensions.bazaar.info.input.toolName`), if any."""
    given = _bazaar_input(payload)
    name = given.get("toolName") if given is not None else None
    return name if isinstance(name, str) else None


def request_method(payload: PaymentPayload) -> str | None:
    """The HTTP method the bazaar metadata names (`extensions.bazaar.info.input.method`), if any."""
    given = _bazaar_input(payload)
    method = given.get("method") if given is not None else None
    return method.upper() if isinstance(method, str) and method else None


def _bazaar_input(payload: PaymentPayload) -> dict[str, Any] | None:
    bazaar = payload.extensions.get("bazaar") if isinstance(payload.extensions, dict) else None
    info = bazaar.get("info") if isinstance(bazaar, dict) else None
    given = info.get("input") if isinstance(info, dict) else None
    return given if isinstance(given, dict) else None
