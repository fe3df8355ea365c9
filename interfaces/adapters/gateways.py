"""The `Gateways` port over the proxy's services: the route a gateway URL (`{proxy}/{slug}/…`) is paid through,
whose it is, and its discovery settings, for the discovery follower (application/listings.py)."""

from __future__ import annotations

from urllib.parse import urlsplit

from application.ports import GatewayRoute
from application.proxy_services import ProxyServices
from domain.clients import merchant_client_id
from domain.discovery import is_loopback
from domain.discovery_routes import route_template
from domain.merchant import merchant_id


class ProxyGateways:
    """`public_url`: the proxy's configured address (`PAYWARDEN_PROXY_URL`); without one, the sandbox's gateway
    URLs are the listener's own, on a loopback host, so any loopback URL's first segment is read as a slug."""

    def __init__(self, proxies: ProxyServices, public_url: str = "", *, sandbox: bool = False) -> None:
        self._proxies, self._public, self._sandbox = proxies, public_url.rstrip("/"), sandbox

    def find_gateway_route(self, url: str, method: str) -> GatewayRoute | None:
        base = self._base(url)
        if base is None:
            return None
        slug, _, path = url[len(base):].lstrip("/").partition("/")
        service = self._proxies.get_by_slug(slug) if slug else None
        if service is None:
            return None
        owner = merchant_client_id(merchant_id(service.merchant))
        route = self._proxies.match(service, method, "/" + path.split("?")[0])
        if route is None:  # the gateway is the service's merchant's all the same (an MCP server's URL, say)
            return GatewayRoute(owner=owner, resource=url.split("?")[0], info=None)
        info = dict(route.bazaar) if route.bazaar else None
        if info is not None and route.method != "*":
            info.setdefault("method", route.method)
        template, _ = route_template(route.path)
        return GatewayRoute(owner=owner, resource=f"{base}/{slug}{template}", info=info)

    def _base(self, url: str) -> str | None:
        if self._public:
            return self._public if url.startswith(self._public + "/") else None
        parts = urlsplit(url)
        if not self._sandbox or not is_loopback(parts.hostname or ""):
            return None
        return f"{parts.scheme}://{parts.netloc}"

