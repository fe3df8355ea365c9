"""The ProxyService aggregate: a merchant's backend behind the transparent proxy, its routes and upstream auth.

A service has a base URL (built from a verified domain, an optional subdomain and path suffix; HTTPS, or
`http://localhost:<port>` in sandbox mode), a slug (claimed separately, see domain/slugs.py), an active flag,
an optional upstream auth header whose value is held only as ciphertext, a request body limit, and its priced
routes (entities of the service: method, x402 path pattern, price, terms). Deleting it is refused while routes
exist. The values and their checks are in domain/proxy_values.py (re-exported here); the events stay in this
module, whose name is part of every stored event's topic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.mcp_tools import KIND_HTTP, KIND_MCP, ToolNotPricedError, ToolPrice
from domain.merchant import merchant_id
from domain.proxy_values import (
    DEFAULT_BODY_LIMIT,
    HEADER_NAME,
    MAX_BODY_LIMIT,
    MAX_PRICE,
    RESERVED_AUTH_HEADERS,
    SANDBOX_HOST,
    SANDBOX_MERCHANT,
    BaseUrl,
    ProxyServiceConflictError,
    ProxyServiceError,
    Route,
    build_base_url,
    check_name,
    is_address,
    localhost_refusal,
)

__all__ = [
    "DEFAULT_BODY_LIMIT", "MAX_BODY_LIMIT", "MAX_PRICE", "SANDBOX_HOST", "SANDBOX_MERCHANT", "SERVICE_NAMESPACE",
    "BaseUrl", "Delivery", "MerchantServices", "ProxyService", "ProxyServiceConflictError", "ProxyServiceError",
    "Route", "build_base_url", "check_name", "delivery_id", "is_address", "localhost_refusal", "service_id",
    "services_index_id",
]

SERVICE_NAMESPACE = uuid5(NAMESPACE_URL, "https://paywarden.dev/services")


def service_id(merchant: str, token: str) -> UUID:
    """A service's id, derived from its merchant and a creation token (a request id, so a retried create is
    the same service)."""
    return uuid5(SERVICE_NAMESPACE, f"{merchant}/{token}")


class ProxyService(Aggregate):
    pass_cookies = False  # Cookie and Set-Cookie pass through only when the merchant opts in (also for snapshots
    # taken before the setting existed)
    kind = KIND_HTTP  # or mcp (domain/mcp_tools.py), chosen at creation; services made before kinds are http

    class Created(Aggregate.Created):
        merchant: str
        token: str
        name: str
        domain: str
        subdomain: str
        path_suffix: str
        port: int | None
        slug: str

    class Renamed(Aggregate.Event):
        name: str

    class BaseUrlChanged(Aggregate.Event):
        domain: str
        subdomain: str
        path_suffix: str
        port: int | None
        slug: str

    class Activated(Aggregate.Event):
        pass

    class Deactivated(Aggregate.Event):
        pass

    class UpstreamAuthSet(Aggregate.Event):
        header: str
        ciphertext: str  # the value, encrypted by the application; never the plain value

    class UpstreamAuthCleared(Aggregate.Event):
        pass

    class BodyLimitSet(Aggregate.Event):
        limit: int

    class CookiesPassed(Aggregate.Event):
        enabled: bool

    class RouteAdded(Aggregate.Event):
        route: dict[str, Any]

    class RouteRemoved(Aggregate.Event):
        route_id: str

    class Deleted(Aggregate.Event):
        pass

    class KindChosen(Aggregate.Event):
        kind: str

    class ToolPriced(Aggregate.Event):
        tool: dict[str, Any]

    class ToolUnpriced(Aggregate.Event):
        name: str

    @staticmethod
    def create_id(merchant: str, token: str, **_: Any) -> UUID:
        return service_id(merchant, token)

    @classmethod
    def create(cls, merchant: str, token: str, name: str, base: BaseUrl, slug: str) -> ProxyService:
        return cls(merchant=merchant, token=token, name=check_name(name), domain=base.domain,
                   subdomain=base.subdomain, path_suffix=base.path_suffix, port=base.port, slug=slug)

    @event(Created)
    def __init__(self, merchant: str, token: str, name: str, domain: str, subdomain: str, path_suffix: str,
                 port: int | None, slug: str) -> None:
        self.merchant, self.name, self.slug = merchant, name, slug
        self.base = BaseUrl(domain, subdomain, path_suffix, port)
        self.active, self.deleted = True, False
        self.auth_header: str | None = None
        self.auth_ciphertext: str | None = None
        self.body_limit = DEFAULT_BODY_LIMIT
        self.routes: dict[str, Route] = {}

    @property
    def base_url(self) -> str:
        return self.base.url

    @property
    def tools(self) -> Mapping[str, ToolPrice]:
        """An mcp service's priced tools by name (none in a snapshot taken before tools were priced)."""
        return vars(self).get("priced_tools") or {}

    def rename(self, name: str) -> None:
        self._alive()
        if check_name(name) != self.name:
            self._rename(name=name)

    @event(Renamed)
    def _rename(self, name: str) -> None:
        self.name = name

    def change_base_url(self, base: BaseUrl, slug: str) -> None:
        self._alive()
        self._change_base_url(domain=base.domain, subdomain=base.subdomain, path_suffix=base.path_suffix,
                              port=base.port, slug=slug)

    @event(BaseUrlChanged)
    def _change_base_url(self, domain: str, subdomain: str, path_suffix: str, port: int | None, slug: str) -> None:
        self.base, self.slug = BaseUrl(domain, subdomain, path_suffix, port), slug

    def set_active(self, active: bool) -> None:
        self._alive()
        if active and not self.active:
            self._activate()
        elif not active and self.active:
            self._deactivate()

    @event(Activated)
    def _activate(self) -> None:
        self.active = True

    @event(Deactivated)
    def _deactivate(self) -> None:
        self.active = False

    def set_upstream_auth(self, header: str, ciphertext: str) -> None:
        self._alive()
        if not HEADER_NAME.fullmatch(header or "") or header.lower() in RESERVED_AUTH_HEADERS:
            raise ProxyServiceError(f"{header!r} cannot carry upstream auth (a header name the proxy manages)",
                                    field="upstreamAuth")
        self._set_upstream_auth(header=header, ciphertext=ciphertext)

    @event(UpstreamAuthSet)
    def _set_upstream_auth(self, header: str, ciphertext: str) -> None:
        self.auth_header, self.auth_ciphertext = header, ciphertext

    def clear_upstream_auth(self) -> None:
        self._alive()
        if self.auth_header is not None:
            self._clear_upstream_auth()

    @event(UpstreamAuthCleared)
    def _clear_upstream_auth(self) -> None:
        self.auth_header = self.auth_ciphertext = None

    def set_body_limit(self, limit: int) -> None:
        self._alive()
        if not isinstance(limit, int) or not 1 <= limit <= MAX_BODY_LIMIT:
            raise ProxyServiceError(f"the body limit is 1 to {MAX_BODY_LIMIT} bytes", field="bodyLimit")
        if limit != self.body_limit:
            self._set_body_limit(limit=limit)

    @event(BodyLimitSet)
    def _set_body_limit(self, limit: int) -> None:
        self.body_limit = limit

    def set_pass_cookies(self, enabled: bool) -> None:
        """Whether the client's `Cookie` reaches the upstream and the upstream's `Set-Cookie` the client."""
        if enabled != self.pass_cookies:
            self._set_pass_cookies(enabled=enabled)

    @event(CookiesPassed)
    def _set_pass_cookies(self, enabled: bool) -> None:
        self.pass_cookies = enabled

    def choose_kind(self, kind: str) -> None:
        """An `mcp` service's kind is chosen in the save that creates it, before any route or tool."""
        self._alive()
        if self.routes or self.tools or self.kind != KIND_HTTP:
            raise ProxyServiceConflictError("a service's kind is chosen when it is created", field="kind")
        if kind != self.kind:
            self._choose_kind(kind=kind)

    @event(KindChosen)
    def _choose_kind(self, kind: str) -> None:
        self.kind = kind

    def price_tool(self, tool: ToolPrice) -> None:
        """Price an MCP tool by name (a new price for a priced tool replaces the old one)."""
        self._alive()
        if self.kind != KIND_MCP:
            raise ProxyServiceConflictError("tools are priced on an mcp service; this one takes routes",
                                            field="tool")
        current = self.tools.get(tool.name)
        if current is None or current.as_dict() != tool.as_dict():
            self._price_tool(tool=tool.as_dict())

    @event(ToolPriced)
    def _price_tool(self, tool: dict[str, Any]) -> None:
        self.priced_tools = {**self.tools, tool["name"]: ToolPrice(**tool)}

    def unprice_tool(self, name: str) -> None:
        self._alive()
        if name not in self.tools:
            raise ToolNotPricedError(f"no priced tool {name}", field="tool")
        self._unprice_tool(name=name)

    @event(ToolUnpriced)
    def _unprice_tool(self, name: str) -> None:
        self.priced_tools = {k: v for k, v in self.tools.items() if k != name}

    def add_route(self, route: Route) -> None:
        self._alive()
        if self.kind == KIND_MCP:
            raise ProxyServiceConflictError("an mcp service prices tools, not routes", field="path")
        if route.id in self.routes or any((r.method, r.path) == (route.method, route.path)
                                          for r in self.routes.values()):
            raise ProxyServiceConflictError(f"a route {route.method} {route.path} already exists", field="path")
        self._add_route(route=route.as_dict())

    @event(RouteAdded)
    def _add_route(self, route: dict[str, Any]) -> None:
        self.routes[route["id"]] = Route(**route)

    def remove_route(self, route_id: str) -> None:
        self._alive()
        if route_id not in self.routes:
            raise ProxyServiceError(f"no route {route_id}", field="routeId")
        self._remove_route(route_id=route_id)

    @event(RouteRemoved)
    def _remove_route(self, route_id: str) -> None:
        del self.routes[route_id]

    def delete(self) -> None:
        self._alive()
        if self.routes:
            raise ProxyServiceConflictError(f"the service has {len(self.routes)} route(s); delete them first")
        if self.tools:
            raise ProxyServiceConflictError(f"the service has {len(self.tools)} priced tool(s); unprice them first")
        self._delete()

    @event(Deleted)
    def _delete(self) -> None:
        self.deleted, self.active = True, False

    def _alive(self) -> None:
        if self.deleted:
            raise ProxyServiceConflictError("the service was deleted")


class MerchantServices(Aggregate):
    """The ids of one merchant's services, saved with each creation and deletion (the list the console shows)."""

    class Started(Aggregate.Created):
        merchant: str

    class ServiceAdded(Aggregate.Event):
        service_id: str

    class ServiceRemoved(Aggregate.Event):
        service_id: str

    @staticmethod
    def create_id(merchant: str) -> UUID:
        return services_index_id(str(merchant_id(merchant)))

    @event(Started)
    def __init__(self, merchant: str) -> None:
        self.merchant = merchant
        self.service_ids: list[str] = []

    @event(ServiceAdded)
    def add(self, service_id: str) -> None:
        self.service_ids.append(service_id)

    @event(ServiceRemoved)
    def remove(self, service_id: str) -> None:
        self.service_ids.remove(service_id)


class Delivery(Aggregate):
    """A paid response the proxy committed to serve, as releases before the delivery rule moved into the payment
    recorded it (one per payment). No longer created: the payment's single success answer is the delivery (its
    `via` names the proxy route); kept so the events stored under this topic stay readable."""

    class Committed(Aggregate.Created):
        payment_key: str
        service_id: str
        route_id: str

    @staticmethod
    def create_id(payment_key: str, **_: Any) -> UUID:
        return delivery_id(payment_key)

    @event(Committed)
    def __init__(self, payment_key: str, service_id: str, route_id: str) -> None:
        self.payment_key, self.service_id, self.route_id = payment_key, service_id, route_id


def services_index_id(merchant_uuid: str) -> UUID:
    """The id of a merchant's service list, from the merchant's id (what the console knows a merchant by)."""
    return uuid5(SERVICE_NAMESPACE, f"merchant-services/{merchant_uuid}")


def delivery_id(payment_key: str) -> UUID:
    return uuid5(SERVICE_NAMESPACE, f"delivery/{payment_key}")
