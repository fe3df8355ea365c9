"""The ProxyService aggregate: a merchant's backend behind the transparent proxy, its routes and upstream auth.

A service has a base URL (built from a verified domain, an optional subdomain and path suffix; HTTPS, or
`http://localhost:<port>` in sandbox mode), a slug (claimed separately, see domain/slugs.py), an active flag,
an optional upstream auth header whose value is held only as ciphertext, a request body limit, and its priced
routes (entities of the service: method, x402 path pattern, price, terms). Deleting it is refused while routes
exist.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from solders.pubkey import Pubkey

from domain.errors import DomainError
from domain.merchant import merchant_id
from domain.routes import check_method, check_pattern

LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
SUFFIX = re.compile(r"^(/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)+$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")
RESERVED_AUTH_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
    "proxy-authorization", "proxy-authenticate", "x-paywarden-payment-hash", "payment-signature", "x-payment",
    "cookie", "content-type",
})
DEFAULT_BODY_LIMIT = 64 * 1024
MAX_BODY_LIMIT = 10 * 1024 * 1024
MAX_PRICE = 10**15
SANDBOX_HOST = "localhost"
SANDBOX_MERCHANT = "sandbox"  # the merchant `paywarden up` makes: the only one that may proxy to localhost
SERVICE_NAMESPACE = uuid5(NAMESPACE_URL, "https://paywarden.dev/services")


class ProxyServiceError(DomainError):
    """A service or route change the rules refuse; `field` names the input at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ProxyServiceConflictError(ProxyServiceError):
    """The change conflicts with the service's state (routes still exist, a route already exists, deleted)."""


@dataclass(frozen=True)
class BaseUrl:
    """Where a service's traffic goes: `https://[subdomain.]domain[/path/suffix]` (or sandbox localhost)."""

    domain: str
    subdomain: str = ""
    path_suffix: str = ""
    port: int | None = None

    @property
    def host(self) -> str:
        return f"{self.subdomain}.{self.domain}" if self.subdomain else self.domain

    @property
    def url(self) -> str:
        if self.domain == SANDBOX_HOST:
            return f"http://localhost:{self.port}{self.path_suffix}"
        return f"https://{self.host}{self.path_suffix}"


def build_base_url(domain: str, subdomain: str = "", path_suffix: str = "", port: int | None = None, *,
                   sandbox: bool) -> BaseUrl:
    domain = (domain or "").strip().lower().rstrip(".")
    subdomain = (subdomain or "").strip().lower().strip(".")
    suffix = (path_suffix or "").strip()
    if subdomain and not all(LABEL.fullmatch(label) for label in subdomain.split(".")):
        raise ProxyServiceError("a subdomain is dot-separated labels of a-z, 0-9 and -", field="subdomain")
    if suffix:
        suffix = "/" + suffix.strip("/")
        if not SUFFIX.fullmatch(suffix) or any(seg in (".", "..") for seg in suffix.split("/")):
            raise ProxyServiceError("a path suffix is URL path segments without . or .. (no query)",
                                    field="pathSuffix")
    if domain == SANDBOX_HOST:
        if not sandbox:
            raise ProxyServiceError("http://localhost is allowed in sandbox mode only", field="domain")
        if subdomain:
            raise ProxyServiceError("localhost takes no subdomain", field="subdomain")
        if not isinstance(port, int) or not 1 <= port <= 65535:
            raise ProxyServiceError("a localhost service needs its port (1-65535)", field="port")
        return BaseUrl(domain, "", suffix, port)
    if port is not None:
        raise ProxyServiceError("a port is only for a sandbox localhost service; HTTPS uses 443", field="port")
    if not domain or not all(LABEL.fullmatch(label) for label in domain.split(".")) or "." not in domain:
        raise ProxyServiceError(f"{domain!r} is not a domain name", field="domain")
    if len(f"{subdomain}.{domain}") > 253:
        raise ProxyServiceError("the host is longer than 253 characters", field="subdomain")
    return BaseUrl(domain, subdomain, suffix, None)


def localhost_refusal(base: BaseUrl, own_ports: frozenset[int]) -> str | None:
    """Why a sandbox `http://localhost:<port>` service may not be proxied, or None: never to a port of Paywarden's
    own listeners (its API's /metrics, the console, the localnet). Who may use localhost at all is the domain rule:
    a merchant whose `localhost` is verified, which only the sandbox merchant's is (`up` pre-verifies it)."""
    if base.domain == SANDBOX_HOST and base.port in own_ports:
        return f"port {base.port} is one of Paywarden's own listeners"
    return None


@dataclass(frozen=True)
class Route:
    """One priced route: requests matching `method` and the x402 `path` pattern pay `price` atomic units."""

    id: str
    method: str
    path: str
    price: int
    network: str
    asset: str
    pay_to: str
    max_timeout_seconds: int = 60
    description: str = ""
    mime_type: str = ""
    settle: str = "after"
    bazaar: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @classmethod
    def checked(cls, **fields: Any) -> Route:
        fields["method"] = check_method(fields.get("method", ""))
        fields["path"] = check_pattern(fields.get("path", ""))
        price = fields.get("price")
        if not isinstance(price, int) or isinstance(price, bool) or not 0 < price <= MAX_PRICE:
            raise ProxyServiceError("price is a positive whole number of atomic units", field="price")
        if not is_address(fields.get("pay_to")):
            raise ProxyServiceError("payTo is a Solana address (base58, 32 bytes)", field="payTo")
        timeout = fields.get("max_timeout_seconds", 60)
        if not isinstance(timeout, int) or not 1 <= timeout <= 3600:
            raise ProxyServiceError("maxTimeoutSeconds is 1 to 3600", field="maxTimeoutSeconds")
        if fields.get("settle", "after") not in ("after", "before"):
            raise ProxyServiceError("settle is after or before", field="settle")
        for name, limit in (("description", 500), ("mime_type", 100)):
            text = fields.get(name, "")
            if not isinstance(text, str) or len(text) > limit or not text.isprintable():
                raise ProxyServiceError(f"{name} is at most {limit} printable characters", field=name)
        bazaar = fields.get("bazaar")
        if bazaar is not None and (not isinstance(bazaar, dict) or len(json.dumps(bazaar)) >= 8192):
            raise ProxyServiceError("bazaar is an object under 8 KB", field="bazaar")
        return cls(**fields)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def service_id(merchant: str, token: str) -> UUID:
    """A service's id, derived from its merchant and a creation token (a request id, so a retried create is
    the same service)."""
    return uuid5(SERVICE_NAMESPACE, f"{merchant}/{token}")


class ProxyService(Aggregate):
    pass_cookies = False  # Cookie and Set-Cookie pass through only when the merchant opts in (also for snapshots
    # taken before the setting existed)

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

    def add_route(self, route: Route) -> None:
        self._alive()
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
        self._delete()

    @event(Deleted)
    def _delete(self) -> None:
        self.deleted, self.active = True, False

    def _alive(self) -> None:
        if self.deleted:
            raise ProxyServiceConflictError("the service was deleted")


def is_address(text: Any) -> bool:
    try:
        return isinstance(text, str) and str(Pubkey.from_string(text)) == text
    except ValueError:
        return False


def check_name(name: str) -> str:
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 100 or not name.isprintable():
        raise ProxyServiceError("a name is 1 to 100 printable characters", field="name")
    return name.strip()


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
