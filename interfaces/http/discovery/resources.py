"""GET /discovery/resources: the public catalog. No authentication; 60 requests per minute per IP; cached 60 s."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import falcon
from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, validate

from application.ports import DISCOVERY_TTL_SECONDS, QueryCache
from domain.discovery import TYPES
from domain.networks import X402_VERSION
from interfaces.http.common.errors import WireError
from projections.catalog import CatalogView, list_resources

MAX_FILTER_TAGS = 10


class Tags(fields.Field[tuple[str, ...]]):
    """Comma-separated tags (at most 600 characters), lowercased; empty items ignored."""

    _text = fields.String(validate=validate.Length(max=600))

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> tuple[str, ...]:
        text = self._text.deserialize(value, attr, data, **kwargs)
        tags = tuple(dict.fromkeys(t.strip().lower() for t in text.split(",") if t.strip()))
        if len(tags) > MAX_FILTER_TAGS or any(len(t) > 50 for t in tags):
            raise ValidationError(f"at most {MAX_FILTER_TAGS} tags of at most 50 characters")
        return tags


class DiscoveryQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    type = fields.String(validate=validate.OneOf(TYPES), load_default=None)
    tags = Tags(load_default=())
    limit = fields.Integer(validate=validate.Range(1, 100), load_default=20)
    offset = fields.Integer(validate=validate.Range(0, 10_000_000), load_default=0)

    @post_load
    def _key(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        data["key"] = f"v1|{data['type'] or ''}|{','.join(sorted(data['tags']))}|{data['limit']}|{data['offset']}"
        return data


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


class DiscoveryResourcesResource:
    rate_limit = "ip"

    def __init__(self, catalog: CatalogView, cache: QueryCache) -> None:
        self._catalog, self._cache, self._schema = catalog, cache, DiscoveryQuerySchema()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        query = self._load(req.params)
        body = self._cache.get(query["key"])
        if body is None:
            page = list_resources(self._catalog, query["type"], query["tags"], query["limit"], query["offset"])
            body = {"x402Version": X402_VERSION, "items": finite(page.items),
                    "pagination": {"total": page.total, "limit": query["limit"], "offset": query["offset"]}}
            self._cache.put(query["key"], body)
        resp.media = body
        resp.set_header("Cache-Control", f"public, max-age={DISCOVERY_TTL_SECONDS}")

    def _load(self, params: Mapping[str, Any]) -> dict[str, Any]:
        errors = self._schema.validate(params)
        if errors:
            message = "; ".join(f"{name}: {' '.join(map(str, why))}" for name, why in sorted(errors.items()))
            raise WireError("invalid_query", falcon.HTTP_400, message)
        return self._schema.load(params)
