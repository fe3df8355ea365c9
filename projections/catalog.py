"""The discovery catalog read model: every listing, in the exact item shape of GET /discovery/resources.

`CatalogProjection` follows the Listings notification log; each write is one transaction with its tracking record,
so an event is applied exactly once however often the worker is killed and restarted. `rebuild` builds a catalog
from scratch out of the event store (what an auditor compares a live catalog with). `list_resources` and
`search_resources` read it. The tables and the two queries common to both stores are `catalog_view.CatalogView`;
each store's search index is its subclass here; the served shape is `catalog_item`, the kept orders and counts
`catalog_counts`, the search's words and ranking `catalog_search`.
"""

from __future__ import annotations

import json
from functools import singledispatchmethod
from typing import Any

from eventsourcing.application import Application
from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from domain.clients import ANONYMOUS_ID
from domain.discovery import ListingDetails
from domain.listing import DiscoveryListing, ResourceClaim
from projections import catalog_search as search
from projections.catalog_counts import delete_tags, delete_terms, write_tags, write_terms
from projections.catalog_item import item, timestamp
from projections.catalog_view import CatalogView, Page, SearchPage
from projections.runner import catch_up
from projections.sql import values

__all__ = ["CatalogProjection", "CatalogView", "Page", "PostgresCatalogView", "SearchPage", "SqliteCatalogView",
           "item", "list_resources", "rebuild", "search_resources", "timestamp"]


class SqliteCatalogView(CatalogView, SQLiteTrackingRecorder):
    tables = (*CatalogView.tables, *search.SQLITE_TABLES)
    # Each listing's place in the index's order (its FTS rowid) is the index's own: a catalog filled from its
    # items numbers them in another order than a replay of its events. What is indexed is compared, in
    # catalog_search.
    not_from_events = ("catalog_search_rows",)

    def write_search(self, c: Any, key: str, moment: str, served: dict[str, Any]) -> None:
        self.delete_search(c, key)
        # The newest write takes the lowest rowid (one below the lowest): FTS5 reads a match in ascending rowid
        # order far faster than in descending (which loads a long doclist whole), so newest first is ascending.
        lowest = c.execute("SELECT rowid FROM catalog_search ORDER BY rowid LIMIT 1").fetchall()
        row = (int(values(lowest[0])[0]) if lowest else 0) - 1
        c.execute("INSERT INTO catalog_search (rowid, listing_id, last_updated, exact, head, every) "
                  "VALUES (?, ?, ?, ?, ?, ?)", (row, key, moment, *search.sqlite_row(search.document(served))))
        c.execute("INSERT INTO catalog_search_rows VALUES (?, ?)", (key, row))

    def clear_search(self, c: Any) -> None:
        c.execute("DELETE FROM catalog_search")
        c.execute("DELETE FROM catalog_search_rows")

    def delete_search(self, c: Any, key: str) -> None:
        found = c.execute("SELECT row FROM catalog_search_rows WHERE listing_id = ?", (key,)).fetchall()
        if found:
            c.execute("DELETE FROM catalog_search WHERE rowid = ?", (values(found[0])[0],))
            c.execute("DELETE FROM catalog_search_rows WHERE listing_id = ?", (key,))

    def search_tier(self, c: Any, tier: int, query: str, where: str, params: list[Any], below: int | None,
                    limit: int) -> list[tuple[int, str]]:
        bound, bounds = (" AND x.rowid > ?", [-below]) if below is not None else ("", [])  # seq = -rowid
        rows = c.execute(f"SELECT x.rowid, x.listing_id FROM catalog_search x WHERE catalog_search MATCH ?{bound}"
                         f"{where} ORDER BY x.rowid LIMIT ?",
                         (search.sqlite_match(tier, query), *bounds, *params, limit)).fetchall()
        return [(-int(values(r)[0]), values(r)[1]) for r in rows]


class PostgresCatalogView(CatalogView, PostgresTrackingRecorder):
    paramstyle = "format"
    tables = (*CatalogView.tables, *search.POSTGRES_TABLES)
    not_from_events = ("catalog_search_rows",)  # as on SQLite

    def write_search(self, c: Any, key: str, moment: str, served: dict[str, Any]) -> None:
        self.delete_search(c, key)
        c.execute("INSERT INTO catalog_search (listing_id, last_updated, exact, head, body) VALUES (?, ?, ?, ?, ?)",
                  (key, moment, *search.document(served).row()))
        c.execute("INSERT INTO catalog_search_rows SELECT ?, COALESCE(MAX(row), 0) + 1 FROM catalog_search_rows",
                  (key,))

    def delete_search(self, c: Any, key: str) -> None:
        c.execute("DELETE FROM catalog_search WHERE listing_id = ?", (key,))
        c.execute("DELETE FROM catalog_search_rows WHERE listing_id = ?", (key,))

    def clear_search(self, c: Any) -> None:
        c.execute("DELETE FROM catalog_search")
        c.execute("DELETE FROM catalog_search_rows")

    def search_tier(self, c: Any, tier: int, query: str, where: str, params: list[Any], below: int | None,
                    limit: int) -> list[tuple[int, str]]:
        bound, bounds = (" AND o.row < ?", [below]) if below is not None else ("", [])
        rows = c.execute("SELECT o.row, x.listing_id FROM catalog_search x JOIN catalog_search_rows o ON "
                         f"o.listing_id = x.listing_id WHERE {search.postgres_match(tier)}{bound}{where} "
                         "ORDER BY o.row DESC LIMIT ?",
                         (*search.postgres_params(tier, query), *bounds, *params, limit)).fetchall()
        return [(int(values(r)[0]), values(r)[1]) for r in rows]



class CatalogProjection(Projection[CatalogView]):
    name = "catalog"
    topics = tuple(get_topic(cls) for cls in (
        DiscoveryListing.Registered, DiscoveryListing.MetadataUpdated, DiscoveryListing.Disabled,
        DiscoveryListing.Enabled, DiscoveryListing.Delisted, DiscoveryListing.Confirmed,
        # Nothing to show, but followed all the same: the catalog's position then reaches the end of the Listings
        # log, which is what a reader waiting for its writes waits for.
        ResourceClaim.Claimed, ResourceClaim.Transferred,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: DiscoveryListing.Registered, tracking: Tracking) -> None:
        details, declared = ListingDetails.from_dict(e.details), _declared(e)
        key, moment = str(e.originator_id), timestamp(e.verified_at)
        served = item(e.resource, e.owner, details, e.offers, e.verified_at, declared)
        shown = _shown(served)
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO catalog_listings VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (key, e.resource, e.method, details.type, moment, True, json.dumps(served)))
            write_tags(c, key, details.type, moment, shown)
            write_terms(c, key, details.type, moment, search.terms(served), shown)
            self.view.write_search(c, key, moment, served)
            c.execute("INSERT INTO catalog_owners VALUES (?, ?)", (key, e.owner))
            _write_proposal(c, key, e.owner, e.details, declared)

    @process_event.register
    def _(self, e: DiscoveryListing.MetadataUpdated, tracking: Tracking) -> None:
        self._rewrite(e, tracking)

    @process_event.register
    def _(self, e: DiscoveryListing.Confirmed, tracking: Tracking) -> None:
        self._rewrite(e, tracking)

    def _rewrite(self, e: DiscoveryListing.MetadataUpdated | DiscoveryListing.Confirmed, tracking: Tracking) -> None:
        details, declared = ListingDetails.from_dict(e.details), _declared(e)
        key, moment = str(e.originator_id), timestamp(e.verified_at)
        with self.view.tracked(tracking) as c:
            resource = values(c.execute("SELECT resource FROM catalog_listings WHERE listing_id = ?",
                                         (key,)).fetchone())[0]
            delete_terms(c, key)
            delete_tags(c, key)
            served = item(resource, e.owner, details, e.offers, e.verified_at, declared)
            shown = _shown(served)
            c.execute("UPDATE catalog_listings SET type = ?, last_updated = ?, item = ? WHERE listing_id = ?",
                      (served["type"], moment, json.dumps(served), key))
            write_tags(c, key, served["type"], moment, shown)
            write_terms(c, key, served["type"], moment, search.terms(served), shown)
            self.view.write_search(c, key, moment, served)
            c.execute("DELETE FROM catalog_owners WHERE listing_id = ?", (key,))
            c.execute("INSERT INTO catalog_owners VALUES (?, ?)", (key, e.owner))
            _write_proposal(c, key, e.owner, e.details, declared)

    @process_event.register
    def _(self, e: DiscoveryListing.Disabled, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE catalog_listings SET enabled = ? WHERE listing_id = ?", (False, str(e.originator_id)))

    @process_event.register
    def _(self, e: DiscoveryListing.Enabled, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE catalog_listings SET enabled = ? WHERE listing_id = ?", (True, str(e.originator_id)))

    @process_event.register
    def _(self, e: DiscoveryListing.Delisted, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            delete_terms(c, str(e.originator_id))
            delete_tags(c, str(e.originator_id))
            self.view.delete_search(c, str(e.originator_id))
            for table in ("catalog_owners", "catalog_proposals", "catalog_listings"):
                c.execute(f"DELETE FROM {table} WHERE listing_id = ?", (str(e.originator_id),))



def _declared(e: Any) -> ListingDetails | None:
    """The merchant's declaration an event carries (none in events recorded before declarations)."""
    declared = getattr(e, "declared", None)
    return ListingDetails.from_dict(declared) if declared is not None else None


def _shown(served: dict[str, Any]) -> tuple[str, ...]:
    """The tags a served item shows: the ones a tag filter finds it by."""
    return tuple((served.get("metadata") or {}).get("tags") or ())


def _write_proposal(c: Any, key: str, owner: str, proposal: dict[str, Any], declared: ListingDetails | None) -> None:
    """What the owner's console offers to confirm: the latest proposal, while it is not what the catalog shows."""
    c.execute("DELETE FROM catalog_proposals WHERE listing_id = ?", (key,))
    if owner != ANONYMOUS_ID and (declared is None or declared.as_dict() != proposal):
        c.execute("INSERT INTO catalog_proposals VALUES (?, ?)", (key, json.dumps(proposal)))


# -- queries --------------------------------------------------------------------------------------------------


def list_resources(view: CatalogView, kind: str | None = None, tags: tuple[str, ...] = (), limit: int = 20,
                   offset: int = 0, terms: tuple[str, ...] = ()) -> Page:
    """A page of the catalog; `terms` are filter terms (`network:<id>`, `payTo:<address>`, `scheme:<name>`,
    `extension:<key>`), every one of them required, like every tag."""
    return view.get_page(kind, tuple(t.lower() for t in tags), limit, offset, terms)


def search_resources(view: CatalogView, query: str, kind: str | None = None, tags: tuple[str, ...] = (),
                     terms: tuple[str, ...] = (), limit: int = 20, after: search.Key | None = None) -> SearchPage:
    """The listings matching every word of `query` and every filter, ranked; the page after `after`."""
    return view.search(query, kind, tuple(t.lower() for t in tags), terms, limit, after)


def rebuild(listings: Application, view: CatalogView) -> int:
    """Fill an empty catalog view from the Listings event store, from the first event; return how many."""
    if view.max_tracking_id(listings.name) is not None:
        raise ValueError("rebuild needs an empty catalog view")
    return catch_up(listings, CatalogProjection(view))
