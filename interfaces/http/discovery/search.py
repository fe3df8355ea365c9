"""GET /discovery/search: a ranked full-text search over the catalog, with the list's filters (`resources.py`).

No authentication; 60 requests per minute per IP; each answer cached 60 s like the list's. The cursor is opaque to
readers: the last item's place in the ranking and a digest of the query it belongs to, MAC'd with a key derived
from `PAYWARDEN_SECRET_KEY`; any cursor that is not one of ours for this search is `400 invalid_cursor`
(docs/discovery.md).
"""

from __future__ import annotations

from typing import Any

import falcon
from marshmallow import ValidationError, fields, validate, validates

from application.ports import QueryCache
from domain.networks import X402_VERSION
from interfaces.http.common.errors import WireError
from interfaces.http.discovery.resources import CachedDiscoveryQuery, DiscoveryFilterSchema, finite
from projections.catalog import CatalogView, search_resources
from projections.catalog_search import MAX_QUERY_CHARS, CursorError, Key, fingerprint, query_problem


class DiscoverySearchQuerySchema(DiscoveryFilterSchema):
    query = fields.String(required=True, validate=validate.Length(max=MAX_QUERY_CHARS))
    limit = fields.Integer(validate=validate.Range(1, 100), load_default=20)
    cursor = fields.Raw(load_default=None)  # checked by the resource: a bad one is `invalid_cursor`, not a query's

    @validates("query")
    def _words(self, value: str, **_: Any) -> None:
        problem = query_problem(value)
        if problem and len(value) <= MAX_QUERY_CHARS:  # the length is the field's own (documented) rule
            raise ValidationError(problem)

    def complete(self, data: dict[str, Any]) -> dict[str, Any]:
        data["fingerprint"] = fingerprint(data["query"], data["filters"])
        data["key"] = f"search|v1|{data['fingerprint']}|{data['limit']}|{data['cursor'] or ''}"
        return data


def read_cursor(cursor: Any, searched: str, secret: bytes) -> Key | None:
    """The place a search's `cursor` names (None when absent), or `400 invalid_cursor`."""
    if cursor is None:
        return None
    try:
        return Key.from_token(cursor, searched, secret)
    except CursorError as bad:
        raise WireError("invalid_cursor", falcon.HTTP_400, f"cursor: {bad}") from None


class DiscoverySearchResource(CachedDiscoveryQuery):
    schema = DiscoverySearchQuerySchema()

    def __init__(self, catalog: CatalogView, cache: QueryCache, cursor_key: bytes) -> None:
        super().__init__(catalog, cache)
        self._cursor_key = cursor_key

    def prepare(self, query: dict[str, Any]) -> dict[str, Any]:
        query["after"] = read_cursor(query["cursor"], query["fingerprint"], self._cursor_key)
        return query

    def answer(self, query: dict[str, Any]) -> dict[str, Any]:
        page = search_resources(self._catalog, query["query"], query["type"], query["tags"], query["terms"],
                                query["limit"], query["after"])
        cursor = page.cursor.token(query["fingerprint"], self._cursor_key) if page.cursor else None
        return {"x402Version": X402_VERSION, "resources": finite(page.items), "partialResults": page.partial,
                "pagination": {"limit": query["limit"], "cursor": cursor}}
