"""GET /discovery/resources: the public catalog. No authentication; 60 requests per minute per IP; cached 60 s.

The filters (`type`, `tags`, `network`, `payTo`, `scheme`, `extensions`) are shared with GET /discovery/search
(`search.py`); an unknown parameter is a 400 naming it (docs/discovery.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import falcon
from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validate

from application.ports import DISCOVERY_TTL_SECONDS, QueryCache
from domain.discovery import TAG, TYPES
from domain.networks import X402_VERSION
from interfaces.http.common.errors import WireError
from projections.catalog import CatalogView, list_resources

MAX_FILTER_TAGS = 10


class Tags(fields.Field[tuple[str, ...]]):
    """Comma-separated tags (at most 600 characters), trimmed and lowercased, empty items ignored; each one a tag
    could be (`domain.discovery.TAG`), so nothing a store cannot hold (a NUL) reaches its query."""

    _text = fields.String(validate=validate.Length(max=600))

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> tuple[str, ...]:
        text = self._text.deserialize(value, attr, data, **kwargs)
        tags = tuple(dict.fromkeys(t.strip().lower() for t in text.split(",") if t.strip()))
        if len(tags) > MAX_FILTER_TAGS or not all(TAG.fullmatch(t) for t in tags):
            raise ValidationError(f"at most {MAX_FILTER_TAGS} tags, each 1-50 of a-z 0-9 space . _ + -")
        return tags


class Keys(fields.Field[tuple[str, ...]]):
    """Comma-separated extension keys (at most 10 of at most 64 of `A-Z a-z 0-9 . _ -`); empty items ignored."""

    _text = fields.String(validate=validate.Length(max=700))
    _key = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> tuple[str, ...]:
        text = self._text.deserialize(value, attr, data, **kwargs)
        keys = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
        if len(keys) > MAX_FILTER_TAGS or not all(self._key.match(k) for k in keys):
            raise ValidationError(f"at most {MAX_FILTER_TAGS} keys of 1-64 letters, digits, '.', '_' or '-'")
        return keys


class DiscoveryFilterSchema(Schema):
    """What a listing must have to be listed or found: every filter given (AND)."""

    class Meta:
        unknown = RAISE  # a parameter we do not know is a 400 naming it, never silently dropped

    type = fields.String(validate=validate.OneOf(TYPES), load_default=None)
    tags = Tags(load_default=())
    network = fields.String(load_default=None, validate=validate.Regexp(
        r"^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$", error="a CAIP-2 network id, <namespace>:<reference>"))
    pay_to = fields.String(data_key="payTo", load_default=None, validate=validate.Regexp(
        r"^[A-Za-z0-9]{1,128}$", error="an address: 1-128 letters and digits"))
    scheme = fields.String(load_default=None, validate=validate.Regexp(
        r"^[a-z0-9_-]{1,32}$", error="a scheme name: 1-32 of a-z 0-9 _ -"))
    extensions = Keys(load_default=())

    @post_load
    def _terms(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        data["terms"] = tuple(
            [f"network:{data['network']}"] * bool(data["network"]) + [f"payTo:{data['pay_to']}"] * bool(
                data["pay_to"]) + [f"scheme:{data['scheme']}"] * bool(data["scheme"])
            + [f"extension:{k}" for k in data["extensions"]])
        data["filters"] = f"{data['type'] or ''}|{','.join(sorted(data['tags']))}|{','.join(sorted(data['terms']))}"
        return self.complete(data)

    def complete(self, data: dict[str, Any]) -> dict[str, Any]:
        """The rest of the loaded query (its cache key): one hook, so the order of loading is plain."""
        return data


class DiscoveryQuerySchema(DiscoveryFilterSchema):
    limit = fields.Integer(validate=validate.Range(1, 100), load_default=20)
    offset = fields.Integer(validate=validate.Range(0, 10_000_000), load_default=0)

    def complete(self, data: dict[str, Any]) -> dict[str, Any]:
        data["key"] = f"v2|{data['filters']}|{data['limit']}|{data['offset']}"
        return data


def load_query(schema: Schema, params: Mapping[str, Any]) -> dict[str, Any]:
    """The query loaded, or a 400 `invalid_query` naming each bad or unknown parameter."""
    try:
        loaded: dict[str, Any] = schema.load(params)
    except ValidationError as e:
        errors = e.messages if isinstance(e.messages, dict) else {"query": e.messages}
        message = "; ".join(f"{name}: {' '.join(map(str, why))}" for name, why in sorted(errors.items()))
        raise WireError("invalid_query", falcon.HTTP_400, message) from None
    return loaded


def finite(value: Any) -> Any:
    """The value with every NaN or infinity replaced by null: the catalog is strict JSON whatever was stored
    (the rules refuse such numbers since issue 10; a listing recorded before keeps its other fields)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


class CachedDiscoveryQuery:
    """A public discovery GET: its query validated by `schema`, answered by `answer` once per cache key (the
    query's `key`) within the cache's time to live, under the per-IP limit."""

    rate_limit = "ip"
    schema: Schema

    def __init__(self, catalog: CatalogView, cache: QueryCache) -> None:
        self._catalog, self._cache = catalog, cache

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        query = self.prepare(load_query(self.schema, req.params))
        body = self._cache.get(query["key"])
        if body is None:
            body = self.answer(query)
            self._cache.put(query["key"], body)
        resp.media = body
        resp.set_header("Cache-Control", f"public, max-age={DISCOVERY_TTL_SECONDS}")

    def prepare(self, query: dict[str, Any]) -> dict[str, Any]:
        """The loaded query completed with what needs more than the schema (a search's cursor), before the cache."""
        return query

    def answer(self, query: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class DiscoveryResourcesResource(CachedDiscoveryQuery):
    schema = DiscoveryQuerySchema()

    def answer(self, query: dict[str, Any]) -> dict[str, Any]:
        page = list_resources(self._catalog, query["type"], query["tags"], query["limit"], query["offset"],
                              query["terms"])
        return {"x402Version": X402_VERSION, "items": finite(page.items),
                "pagination": {"total": page.total, "limit": query["limit"], "offset": query["offset"]}}
