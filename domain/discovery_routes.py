"""One listing per route (docs/discovery.md, "One listing per route"): a route pattern as the x402 SDK's Bazaar
writes its `routeTemplate`, and a paid URL replaced by the template it is an instance of. Pure."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from domain.discovery import DiscoveryInvalidError, Reason, ResourceUrl

PARAM = re.compile(r"^:([A-Za-z_][A-Za-z0-9_]{0,63})$")
TEMPLATE_SEGMENT = re.compile(r"^[A-Za-z0-9._~!$&'()+,;=@%-]{1,256}$")


def route_template(pattern: str) -> tuple[str, tuple[str, ...]]:
    """A route pattern (the x402 SDK's syntax: `*`, `[param]`, `:param`) as the SDK's Bazaar writes a
    `routeTemplate`: every parameter `:name`, each segment holding a `*` one parameter `:var1`, `:var2`, ...; with
    the names of its parameters. A pattern without any is its own template."""
    segments, names, wild = [], [], 0
    for segment in pattern.split("/"):
        bracket = re.fullmatch(r"\[([A-Za-z_]\w*)\]", segment)
        if bracket or PARAM.fullmatch(segment):
            name = bracket.group(1) if bracket else segment[1:]
        elif "*" in segment:
            wild += 1
            name = f"var{wild}"
        else:
            segments.append(segment)
            continue
        segments.append(f":{name}")
        names.append(name)
    return "/".join(segments) or "/", tuple(names)


def apply_route_template(resource: ResourceUrl, template: Any) -> tuple[ResourceUrl, tuple[str, ...]]:
    """The resource URL of a payment that names its route's template (`extensions.bazaar.routeTemplate`): the
    template in place of the paid path, when the paid path is an instance of it (each `:name` one segment, every
    other segment equal), so that a template names only the route the payment was for."""
    if not isinstance(template, str) or not template.startswith("/") or len(template) > 512:
        raise DiscoveryInvalidError(Reason.INVALID_ROUTE_TEMPLATE, "routeTemplate is a path starting with /")
    wanted, paid = template.split("/")[1:], urlsplit(resource.url).path.split("/")[1:]
    names = []
    for want in wanted:
        if (param := PARAM.fullmatch(want)) is not None:
            names.append(param.group(1))
        elif not TEMPLATE_SEGMENT.fullmatch(want) or want in (".", ".."):
            raise DiscoveryInvalidError(Reason.INVALID_ROUTE_TEMPLATE, f"routeTemplate segment {want!r} is refused")
    if len(wanted) != len(paid) or any(not PARAM.fullmatch(w) and w != p for w, p in zip(wanted, paid, strict=True)) \
            or any(PARAM.fullmatch(w) and not p for w, p in zip(wanted, paid, strict=True)):
        raise DiscoveryInvalidError(Reason.INVALID_ROUTE_TEMPLATE, "the paid path is not an instance of routeTemplate")
    if len(set(names)) != len(names):
        raise DiscoveryInvalidError(Reason.INVALID_ROUTE_TEMPLATE, "routeTemplate names a parameter twice")
    parts = urlsplit(resource.url)
    return replace(resource, url=urlunsplit((parts.scheme, parts.netloc, template, "", ""))), tuple(names)


def route_params(url: str) -> tuple[str, ...]:
    """The parameter names of a template URL's path (`/quotes/:var1` → `var1`)."""
    return tuple(m.group(1) for seg in urlsplit(url).path.split("/") if (m := PARAM.fullmatch(seg)) is not None)
