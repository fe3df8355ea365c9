"""GET /discovery/search: a ranked full-text search over the catalog, with the list's filters (`resources.py`).

No authentication; 60 requests per minute per IP; each answer cached 60 s like the list's. The cursor is opaque to
readers: the last item's place in the ranking and a digest of the query it belongs to (docs/discovery.md).
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates

from domain.networks import X402_VERSION
from interfaces.http.discovery.resources import CachedDiscoveryQuery, DiscoveryFilterSchema, finite
from projections.catalog import search_resources
from projections.catalog_search import MAX_QUERY_CHARS, Key, fingerprint, query_problem


class DiscoverySearchQuerySchema(DiscoveryFilterSchema):
    query = fields.String(required=True, validate=validate.Length(max=MAX_QUERY_CHARS))
    limit = fields.Integer(validate=validate.Range(1, 100), load_default=20)
    cursor = fields.String(load_default=None, validate=validate.Length(1, 512))

    @validates("query")
    def _words(self, value: str, **_: Any) -> None:
        problem = query_problem(value)
        if problem and len(value) <= MAX_QUERY_CHARS:  # the length is the field's own (documented) rule
            raise ValidationError(problem)

    def complete(self, data: dict[str, Any]) -> dict[str, Any]:
        data["fingerprint"] = fingerprint(data["query"], data["filters"])
        try:
            data["after"] = Key.from_token(data["cursor"], data["fingerprint"]) if data["cursor"] else None
        except ValueError:
            raise ValidationError("not a cursor of this search (send the same query and filters)",
                                  field_name="cursor") from None
        data["key"] = f"search|v1|{data['fingerprint']}|{data['limit']}|{data['cursor'] or ''}"
        return data


class DiscoverySearchResource(CachedDiscoveryQuery):
    schema = DiscoverySearchQuerySchema()

    def answer(self, query: dict[str, Any]) -> dict[str, Any]:
        page = search_resources(self._catalog, query["query"], query["type"], query["tags"], query["terms"],
                                query["limit"], query["after"])
        return {"x402Version": X402_VERSION, "resources": finite(page.items), "partialResults": page.partial,
                "pagination": {"limit": query["limit"],
                               "cursor": page.cursor.token(query["fingerprint"]) if page.cursor else None}}
