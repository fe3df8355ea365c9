"""The console's route form read into `ProxyServices.add_route`'s terms: the price in USDC, the settle mode, the
payment's description, MIME type and timeout, and the discovery fields that make the route's `bazaar` metadata
(what `paywarden route add --bazaar` takes as JSON): title, description, tags, provider, input and output schemas.

The metadata is checked by the catalog's own rule (`domain.discovery.parse_info`, which a payment carrying it meets
later), so a form the catalog would refuse is refused here, beside its field, instead of at the first payment.
"""

from __future__ import annotations

import json
from typing import Any

from domain.discovery import DiscoveryInvalidError, parse_info
from domain.money import AmountError, parse_usdc
from domain.proxy_service import ProxyServiceError

# Form field → where a refusal of the catalog's rule is shown (by the first word of its message).
DISCOVERY_FIELDS = (("tags", "discovery_tags"), ("a tag", "discovery_tags"), ("title", "discovery_title"),
                    ("provider", "provider_url"), ("input", "input_schema"), ("output", "output_schema"),
                    ("description", "discovery_description"))


def route_terms(form: dict[str, str], *, production: bool) -> dict[str, Any]:
    """`add_route`'s keyword arguments from the form but method, path and pay-to; ProxyServiceError names the
    form's field."""
    terms: dict[str, Any] = {"settle": form.get("settle") or "after", "access": form.get("access") or "per-request"}
    if form.get("access_seconds"):
        if not form["access_seconds"].strip().isdigit():
            raise ProxyServiceError("accessSeconds is a whole number of seconds", field="access_seconds")
        terms["access_seconds"] = int(form["access_seconds"])
    for wire, name in (("description", "description"), ("mime_type", "mime_type")):
        if form.get(wire):
            terms[name] = form[wire]
    if form.get("max_timeout_seconds"):
        try:
            terms["max_timeout_seconds"] = int(form["max_timeout_seconds"])
        except ValueError:
            raise ProxyServiceError("maxTimeoutSeconds is a number", field="max_timeout_seconds") from None
    try:
        terms["price"] = parse_usdc(form.get("price", ""))
    except AmountError as refused:
        raise ProxyServiceError(str(refused), field="price") from None
    bazaar = discovery_of(form, production=production)
    if bazaar is not None:
        terms["bazaar"] = bazaar
    return terms


def discovery_of(form: dict[str, str], *, production: bool) -> dict[str, Any] | None:
    """The route's discovery metadata from the form's discovery fields; None when "List in the discovery catalog"
    is not ticked."""
    if not form.get("discovery"):
        return None
    info: dict[str, Any] = {}
    for field, key in (("discovery_title", "title"), ("discovery_description", "description")):
        if form.get(field, "").strip():
            info[key] = form[field].strip()
    tags = [t.strip() for t in form.get("discovery_tags", "").split(",") if t.strip()]
    if tags:
        info["tags"] = tags
    provider = {k: form[f].strip() for f, k in (("provider_name", "name"), ("provider_url", "url"))
                if form.get(f, "").strip()}
    if provider:
        info["provider"] = provider
    for field, key, kind in (("input_schema", "input", "http"), ("output_schema", "output", "json")):
        if form.get(field, "").strip():
            info[key] = {"type": kind, "schema": _json_object(form[field], field)}
    try:
        parse_info({"info": info}, registered=True, production=production)
    except DiscoveryInvalidError as refused:
        field = next((f for word, f in DISCOVERY_FIELDS if refused.message.startswith(word)), "discovery")
        raise ProxyServiceError(refused.message, field=field) from None
    return info


def _json_object(text: str, field: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as bad:
        raise ProxyServiceError(f"not JSON: {bad.msg} at line {bad.lineno}, column {bad.colno}", field=field) from None
    if not isinstance(value, dict):
        raise ProxyServiceError("a JSON Schema is an object ({...})", field=field)
    return value
