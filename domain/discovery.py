"""Discovery rules: what `extensions.bazaar` may register, and which of its fields an account kind keeps.

Pure: no I/O. Whether a hostname resolves to public addresses is a fact the application asks its `Resolver` port
for and hands to `check_addresses`; every other rule is decided here from the values alone.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from domain.errors import DomainError

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
TYPES = ("http", "websocket", "grpc", "mcp")
TRANSPORTS = ("streamable-http", "sse")  # an MCP tool's (the x402 SDK's `McpTransport`)
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-/]{1,128}$")
MAX_INFO_BYTES = 8 * 1024  # `info` must be under this (serialized compact JSON, UTF-8)
MAX_SCHEMA_BYTES = 4 * 1024  # a custom schema may be up to this
MAX_HOSTNAME = 253
MAX_URL = 2048
MAX_TAGS = 10
MAX_TEXT = {"title": 120, "description": 1024, "name": 120, "url": MAX_URL, "contact": 256, "type": 255,
            "model": 64, "amount": 64, "asset": 64}
TAG = re.compile(r"^[a-z0-9](?:[a-z0-9 ._+-]{0,48}[a-z0-9+])?$")
LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
PRINTABLE = re.compile(r"^[\x21-\x7e]+$")
# Names that never reach the public internet (RFC 6761, RFC 6762, RFC 8375, common private suffixes).
PRIVATE_NAMES = ("localhost", "localdomain", "local", "internal", "intranet", "lan", "home.arpa", "test", "invalid",
                 "example", "onion")
DEFAULT_PORTS = {"http": 80, "https": 443}


class Reason(StrEnum):
    """Why a registration was skipped: logged and counted, never answered to the caller."""

    INVALID_EXTENSION = "invalid_extension"
    MISSING_RESOURCE = "missing_resource"
    INVALID_URL = "invalid_url"
    INVALID_HOSTNAME = "invalid_hostname"
    HOSTNAME_TOO_LONG = "hostname_too_long"
    PRIVATE_ADDRESS = "private_address"
    UNRESOLVABLE = "unresolvable"
    INFO_TOO_LARGE = "info_too_large"
    SCHEMA_TOO_LARGE = "schema_too_large"
    INVALID_METHOD = "invalid_method"
    INVALID_TYPE = "invalid_type"
    INVALID_FIELD = "invalid_field"
    NOT_OWNER = "not_owner"  # the URL is not on the merchant's verified domains or gateway, or another owns it
    INVALID_ROUTE_TEMPLATE = "invalid_route_template"


class DiscoveryInvalidError(DomainError):
    """A registration the discovery rules refuse; `reason` is what the skip is counted under."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class ResourceUrl:
    """A resource URL in canonical form: lowercase scheme and host, no default port, no fragment."""

    url: str
    host: str
    is_address: bool  # the host is an IP literal, so there is nothing to resolve


def parse_resource_url(raw: Any, *, production: bool, what: str = "the resource URL") -> ResourceUrl:
    """The URL rules, for the resource URL and for `provider.url` alike (`what` names it in messages)."""
    if not isinstance(raw, str) or not raw or len(raw) > MAX_URL or not PRINTABLE.fullmatch(raw):
        raise DiscoveryInvalidError(Reason.INVALID_URL, f"{what} must be printable ASCII of 1-2048 characters")
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as bad:
        raise DiscoveryInvalidError(Reason.INVALID_URL, f"{what} does not parse: {bad}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise DiscoveryInvalidError(Reason.INVALID_URL, f"{what} must use http:// or https://")
    if parts.username is not None or parts.password is not None:
        raise DiscoveryInvalidError(Reason.INVALID_URL, f"{what} must not carry credentials")
    host = (parts.hostname or "").rstrip(".")
    address = _address(host)
    if address is None:
        _check_hostname(host, production=production)
    elif production and not is_public(address):
        raise DiscoveryInvalidError(Reason.PRIVATE_ADDRESS, f"{address} is not a public address")
    netloc = f"[{host}]" if address is not None and address.version == 6 else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    url = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    return ResourceUrl(url=url, host=host, is_address=address is not None)


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _check_hostname(host: str, *, production: bool) -> None:
    if len(host) > MAX_HOSTNAME:
        raise DiscoveryInvalidError(Reason.HOSTNAME_TOO_LONG, f"the hostname has {len(host)} characters; at most 253")
    labels = host.split(".")
    if not host or not all(LABEL.fullmatch(label) for label in labels):
        raise DiscoveryInvalidError(Reason.INVALID_HOSTNAME, f"{host!r} is not an RFC 1123 hostname")
    if labels[-1].isdigit():
        # RFC 1123 2.1: a top-level label is alphabetic; all-digit names are addresses in disguise (127.1).
        raise DiscoveryInvalidError(Reason.INVALID_HOSTNAME, f"{host!r} is neither a hostname nor a dotted address")
    if production and (len(labels) < 2 or any(host == n or host.endswith("." + n) for n in PRIVATE_NAMES)):
        raise DiscoveryInvalidError(Reason.PRIVATE_ADDRESS, f"{host} is not a public internet name")


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Globally routable unicast: not loopback, private, link-local, reserved, multicast or unspecified; an IPv6
    address that embeds an IPv4 one (mapped, compatible, 6to4, Teredo, NAT64) only if every embedded one is too."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address in LOCAL_NAT64:
            return False  # RFC 8215: local-use translation, never globally routed; the IPv4 may sit at any offset
        elif not all(_routable(embedded) for embedded in embedded_ipv4(address)):
            return False
    return _routable(address)


# IPv6 ranges that carry an IPv4 address in their low 32 bits (RFC 4291 2.5.5.1, RFC 6052) and a local-use
# NAT64 prefix (RFC 8215) whose embedding offset depends on the operator's prefix length.
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to: 6to4 (2002::/16), Teredo (2001::/32: server and client),
    NAT64 (64:ff9b::/96) and IPv4-compatible (::/96) addresses."""
    found: list[ipaddress.IPv4Address] = []
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in NAT64 or address in IPV4_COMPATIBLE:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _routable(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address.is_global and not (
        address.is_private or address.is_loopback or address.is_link_local or address.is_reserved
        or address.is_multicast or address.is_unspecified
    )


def check_addresses(host: str, addresses: list[str]) -> None:
    """In production every address the hostname resolves to must be public (one private answer is enough)."""
    if not addresses:
        raise DiscoveryInvalidError(Reason.UNRESOLVABLE, f"{host} does not resolve")
    for text in addresses:
        address = _address(text.split("%", 1)[0])
        if address is None or not is_public(address):
            raise DiscoveryInvalidError(Reason.PRIVATE_ADDRESS, f"{host} resolves to {text}, not a public address")


@dataclass(frozen=True)
class ListingDetails:
    """What a listing keeps of `extensions.bazaar.info`, after validation and gating by account kind."""

    type: str = "http"
    method: str = "GET"
    description: str = ""
    title: str | None = None
    tags: tuple[str, ...] = ()
    input: dict[str, Any] | None = None  # {"type": MIME, "schema": JSON Schema}
    output: dict[str, Any] | None = None
    provider: dict[str, str] | None = None  # name, description, url, contact (contact is never served)
    pricing: dict[str, str] | None = None  # model, amount, asset
    path_params: tuple[str, ...] = ()  # the names of the route template's parameters (one listing per route)
    tool: dict[str, Any] | None = None  # an MCP tool: name, description, transport, inputSchema

    @property
    def key(self) -> str:
        """What, beside the URL, tells this listing from others: the method, and an MCP tool's name."""
        return f"{self.method} {self.tool['name']}" if self.tool else self.method

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = list(self.tags)
        for name in ("path_params", "tool"):  # so a listing without them records what it did before the fields
            if not data[name]:
                del data[name]
        if self.path_params:
            data["path_params"] = list(self.path_params)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ListingDetails:
        return cls(**{**data, "tags": tuple(data.get("tags") or ()),
                      "path_params": tuple(data.get("path_params") or ())})

    def proposed(self) -> ListingDetails:
        """What the catalog shows of a payment's proposal that its merchant has not declared: no title, tags or
        provider (what a payer could use to pass as someone else)."""
        return replace(self, title=None, tags=(), provider=None)


def size(value: Any) -> int:
    """Bytes of compact JSON; a value JSON cannot carry (NaN, Infinity, anything nested absurdly) is refused."""
    try:
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())
    except (ValueError, TypeError, RecursionError):
        raise DiscoveryInvalidError(Reason.INVALID_FIELD,
                                    "info holds a value JSON cannot carry (NaN, Infinity)") from None


def parse_info(bazaar: Any, *, registered: bool, production: bool = False) -> ListingDetails:
    """Validate `extensions.bazaar.info`; keep only documented fields, and title/tags/provider if registered."""
    if not isinstance(bazaar, dict):
        raise DiscoveryInvalidError(Reason.INVALID_EXTENSION, "extensions.bazaar must be an object")
    info = bazaar.get("info", {})
    if not isinstance(info, dict):
        raise DiscoveryInvalidError(Reason.INVALID_EXTENSION, "extensions.bazaar.info must be an object")
    if size(info) >= MAX_INFO_BYTES:
        raise DiscoveryInvalidError(Reason.INFO_TOO_LARGE, f"info is {size(info)} bytes; it must be under 8 KB")
    if isinstance(info.get("input"), dict) and info["input"].get("type") == "mcp":
        return _mcp(info, registered=registered, production=production)
    method = _text(info, "method", "GET").upper()
    if method not in METHODS:
        raise DiscoveryInvalidError(Reason.INVALID_METHOD, f"method must be one of {', '.join(METHODS)}")
    kind = _text(info, "type", "http").lower()
    if kind not in TYPES or kind == "mcp":  # an MCP tool is described in the SDK's shape (`info.input`)
        raise DiscoveryInvalidError(Reason.INVALID_TYPE, f"type must be one of {', '.join(TYPES)}")
    details = ListingDetails(
        type=kind, method=method, description=_text(info, "description", ""),
        input=_schema(info, "input"), output=_schema(info, "output"),
        pricing=_fields(info, "pricing", ("model", "amount", "asset")),
    )
    return _registered(details, info, registered=registered, production=production)


def _mcp(info: dict[str, Any], *, registered: bool, production: bool) -> ListingDetails:
    """An MCP tool as the x402 SDK's `declare_mcp_discovery_extension` builds it: `info.input` with `type: mcp`,
    `toolName`, `description`, `transport`, `inputSchema` (`example` and `output` are not kept)."""
    given = info["input"]
    name = given.get("toolName")
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise DiscoveryInvalidError(Reason.INVALID_FIELD, "input.toolName is 1-128 of A-Z a-z 0-9 _ . - /")
    transport = _text(given, "transport", "streamable-http")
    if transport not in TRANSPORTS:
        raise DiscoveryInvalidError(Reason.INVALID_FIELD, f"input.transport is one of {', '.join(TRANSPORTS)}")
    schema = given.get("inputSchema")
    if not isinstance(schema, dict):
        raise DiscoveryInvalidError(Reason.INVALID_FIELD, "input.inputSchema must be a JSON Schema object")
    if size(schema) > MAX_SCHEMA_BYTES:
        raise DiscoveryInvalidError(Reason.SCHEMA_TOO_LARGE, f"inputSchema is {size(schema)} bytes; at most 4 KB")
    description = _text(given, "description", "") or _text(info, "description", "")
    tool = {"name": name, "description": description, "transport": transport, "inputSchema": schema}
    details = ListingDetails(type="mcp", method="POST", description=description, tool=tool,
                             input={"type": "application/json", "schema": schema})
    return _registered(details, info, registered=registered, production=production)


def _registered(details: ListingDetails, info: dict[str, Any], *, registered: bool,
                production: bool) -> ListingDetails:
    """The details with the title, tags and provider a registered account may give."""
    if not registered:
        return details
    title = _text(info, "title", "") or None
    provider = _fields(info, "provider", ("name", "description", "url", "contact"))
    if provider and "url" in provider:
        parse_resource_url(provider["url"], production=production, what="provider.url")
    return replace(details, title=title, tags=_tags(info), provider=provider)


def _text(data: dict[str, Any], name: str, default: str) -> str:
    value = data.get(name, default)
    if name == "amount" and isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # a price may be written as a number; it is kept and served as a string
    if not isinstance(value, str) or len(value) > MAX_TEXT.get(name, 1024):
        raise DiscoveryInvalidError(Reason.INVALID_FIELD,
                                    f"{name} must be a string of at most {MAX_TEXT.get(name, 1024)}")
    return value.strip()


def _fields(info: dict[str, Any], name: str, documented: tuple[str, ...]) -> dict[str, str] | None:
    value = info.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DiscoveryInvalidError(Reason.INVALID_FIELD, f"{name} must be an object")
    kept = {k: text for k in documented if value.get(k) is not None and (text := _text(value, k, ""))}
    return kept or None


def _schema(info: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = info.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DiscoveryInvalidError(Reason.INVALID_FIELD, f"{name} must be an object")
    kept: dict[str, Any] = {}
    if value.get("type") is not None:
        kept["type"] = _text(value, "type", "")
    schema = value.get("schema")
    if schema is not None:
        if not isinstance(schema, dict):
            raise DiscoveryInvalidError(Reason.INVALID_FIELD, f"{name}.schema must be a JSON Schema object")
        if size(schema) > MAX_SCHEMA_BYTES:
            raise DiscoveryInvalidError(Reason.SCHEMA_TOO_LARGE, f"{name}.schema is {size(schema)} bytes; at most 4 KB")
        kept["schema"] = schema
    return kept or None


def _tags(info: dict[str, Any]) -> tuple[str, ...]:
    tags = info.get("tags", [])
    if not isinstance(tags, list) or len(tags) > MAX_TAGS or not all(isinstance(t, str) for t in tags):
        raise DiscoveryInvalidError(Reason.INVALID_FIELD, f"tags must be a list of at most {MAX_TAGS} strings")
    lowered = [t.strip().lower() for t in tags]
    if not all(TAG.fullmatch(t) for t in lowered):
        raise DiscoveryInvalidError(Reason.INVALID_FIELD, "a tag is 1-50 of a-z 0-9 space . _ + - (no commas)")
    return tuple(dict.fromkeys(lowered))


def provider_url(details: ListingDetails, *, production: bool) -> ResourceUrl | None:
    """`provider.url` under the resource URL's rules (its host is resolved like the resource's), if any."""
    url = (details.provider or {}).get("url")
    return parse_resource_url(url, production=production, what="provider.url") if url else None


def query_params(details: ListingDetails) -> dict[str, str]:
    """`outputSchema.input.queryParams`: each property of the input schema, by its declared JSON type."""
    properties = ((details.input or {}).get("schema") or {}).get("properties") or {}
    if not isinstance(properties, dict):
        return {}
    return {str(name): str(spec.get("type", "string")) if isinstance(spec, dict) else "string"
            for name, spec in properties.items()}


# -- whose a resource is (docs/discovery.md, "Whose a listing is") ------------------------------------------------

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """`localhost` (and its subdomains) or a loopback address: the only hosts the sandbox lists for anyone."""
    host = host.lower().rstrip(".")
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    address = _address(host.strip("[]"))
    return address is not None and address.is_loopback


def on_domains(host: str, domains: Iterable[str]) -> bool:
    """The host is one of `domains` or a subdomain of one (`api.shop.example` is on `shop.example`)."""
    host = host.lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in (d.lower().rstrip(".") for d in domains) if d)


def check_owner(resource: ResourceUrl, domains: Iterable[str], *, sandbox: bool) -> None:
    """A merchant lists a URL on one of its verified domains; the sandbox also lists loopback hosts for anyone."""
    if on_domains(resource.host, domains) or (sandbox and is_loopback(resource.host)):
        return
    raise DiscoveryInvalidError(Reason.NOT_OWNER, f"{resource.host} is not a verified domain of the merchant")
