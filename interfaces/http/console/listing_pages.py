"""A merchant declares what the catalog shows of its listing: the proposal the latest payment carried (title,
tags, provider, descriptions, schemas), confirmed from the Discovery page or the console's API. Until then the
catalog shows neither title, tags nor provider of it (docs/discovery.md, "Whose a listing is")."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import falcon

from domain.clients import merchant_client_id
from domain.merchant import UnknownObjectError
from interfaces.http.console.api import session_of
from interfaces.http.console.collaborators import Catalog, Resource, mount
from interfaces.http.console.pages import Page, form_of, templates


def confirm(c: Catalog, merchant_id: str, listing: str, proposal: Any) -> None:
    """The owner's confirmation of `proposal` (what it was shown); a stale or foreign one is a 404."""
    try:
        listing_uuid = UUID(listing)
    except ValueError:
        raise UnknownObjectError(f"no listing {listing}", field="id") from None
    if c.listings is None or not isinstance(proposal, dict):
        raise UnknownObjectError(f"no listing {listing}", field="id")
    c.listings.confirm(listing_uuid, merchant_client_id(merchant_id), proposal)


class ConfirmListingPage(Page[Catalog]):
    route = "/listings/{listing_id}/confirm"

    def on_post(self, req: falcon.Request, resp: falcon.Response, listing_id: str) -> None:
        try:
            proposal = json.loads(form_of(req).get("proposal") or "null")
        except ValueError:
            proposal = None
        confirm(self._c, req.context.session.merchant_id, listing_id, proposal)
        raise falcon.HTTPSeeOther("/discovery?done=confirmed")


class ListingConfirmResource(Resource[Catalog]):
    """`POST /api/v1/listings/{id}/confirm` with `{"proposal": <the listing's proposal as listed>}`: 204."""

    route = "/api/v1/listings/{listing_id}/confirm"

    def on_post(self, req: falcon.Request, resp: falcon.Response, listing_id: str) -> None:
        body = req.get_media(default_when_empty=None)
        confirm(self._c, session_of(req).merchant_id, listing_id, body.get("proposal") if isinstance(body, dict)
                else None)
        resp.status = falcon.HTTP_204


def add_routes(app: falcon.App, c: Catalog) -> None:
    mount(app, (ListingConfirmResource,), c)
    mount(app, (ConfirmListingPage,), c, templates())
