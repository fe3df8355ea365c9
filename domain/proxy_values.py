"""A proxy service's values and the rules on them: where its traffic goes (`BaseUrl`, built and checked by
`build_base_url`), its priced routes (`Route`), the checks on names and addresses, and the errors a refused change
raises. The ProxyService aggregate that holds them, and its events, are in domain/proxy_service.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from solders.pubkey import Pubkey

from domain.access import PER_REQUEST, AccessRuleError, check_access
from domain.errors import DomainError
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
    access: str = PER_REQUEST  # or once-paid (domain/access.py); routes recorded before the rule are per-request
    access_seconds: int | None = None

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
        try:
            fields["access"], fields["access_seconds"] = check_access(fields.get("access", PER_REQUEST),
                                                                      fields.get("access_seconds"))
        except AccessRuleError as bad:
            raise ProxyServiceError(str(bad), field=bad.field) from None
        bazaar = fields.get("bazaar")
        if bazaar is not None and (not isinstance(bazaar, dict) or len(json.dumps(bazaar)) >= 8192):
            raise ProxyServiceError("bazaar is an object under 8 KB", field="bazaar")
        return cls(**fields)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_address(text: Any) -> bool:
    try:
        return isinstance(text, str) and str(Pubkey.from_string(text)) == text
    except ValueError:
        return False


def check_name(name: str) -> str:
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 100 or not name.isprintable():
        raise ProxyServiceError("a name is 1 to 100 printable characters", field="name")
    return name.strip()
