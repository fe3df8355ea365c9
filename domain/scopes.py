"""Keys scoped to a proxy service: which payment terms such a key may verify and settle.

A scoped key pays only for what one of its service's routes charges: the same scheme (`exact`), network, asset,
`payTo` and amount. When the payload names its resource, the resource's path must match the route's pattern
(after the service's path suffix, or the gateway's `/{slug}` prefix, is removed), and when its bazaar metadata
names the HTTP method, the method must be the route's. The resource's host is not compared: a merchant's server
behind a reverse proxy often sees another host name than its public one, and the money is bound by the terms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from domain.networks import SCHEME_EXACT
from domain.proxy_service import Route
from domain.routes import matches, normalize_path
from domain.x402 import PaymentPayload, Requirements


@dataclass(frozen=True)
class ServiceScope:
    """The service a key is scoped to: its slug, base-URL path suffix and routes in creation order (as the
    service_scopes read model keeps them)."""

    service_id: str
    slug: str
    path_suffix: str
    routes: tuple[Route, ...]

    def allows(self, payload: PaymentPayload, terms: Requirements) -> bool:
        paths, method = resource_paths(payload.resource, self.slug, self.path_suffix), request_method(payload)
        return any(_same_terms(route, terms) and _same_request(route, paths, method) for route in self.routes)

    def routes_for(self, path: str | None) -> list[Route]:
        """The routes whose pattern matches `path` (any method); all of them without a path."""
        if path is None:
            return list(self.routes)
        normalized = normalize_path(path if path.startswith("/") else "/" + path)
        return [r for r in self.routes if matches("*", r.path, "GET", normalized)]

    def networks(self, served: Iterable[str], routes: Sequence[Route] | None = None) -> list[str]:
        wanted = {r.network for r in (self.routes if routes is None else routes)}
        return [n for n in served if n in wanted]


def _same_terms(route: Route, terms: Requirements) -> bool:
    return (terms.scheme == SCHEME_EXACT and terms.network == route.network and terms.asset == route.asset
            and terms.pay_to == route.pay_to and terms.amount == route.price)


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
    for prefix in (f"/{path_suffix}" if path_suffix else "", f"/{slug}"):
        if prefix and (path.lower() == prefix.lower() or path.lower().startswith(prefix.lower() + "/")):
            found.append(path[len(prefix):] or "/")
    return found


def request_method(payload: PaymentPayload) -> str | None:
    """The HTTP method the bazaar metadata names (`extensions.bazaar.info.input.method`), if any."""
    bazaar = payload.extensions.get("bazaar") if isinstance(payload.extensions, dict) else None
    info = bazaar.get("info") if isinstance(bazaar, dict) else None
    given = info.get("input") if isinstance(info, dict) else None
    method = given.get("method") if isinstance(given, dict) else None
    return method.upper() if isinstance(method, str) and method else None
