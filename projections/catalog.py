"""The discovery catalog read model: every listing, in the exact item shape of GET /discovery/resources.

`CatalogProjection` follows the Listings notification log; each write is one transaction with its tracking record,
so an event is applied exactly once however often the worker is killed and restarted. `rebuild` builds a catalog
from scratch out of the event store (what an auditor compares a live catalog with). `list_resources` reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import singledispatchmethod
from typing import Any

from eventsourcing.application import Application
from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from domain.clients import ANONYMOUS_ID
from domain.discovery import ListingDetails, query_params
from domain.listing import DiscoveryListing
from domain.networks import X402_VERSION, network
from projections.runner import catch_up
from projections.sql import SqlView, values

SERVED_PROVIDER = ("name", "description", "url")  # provider.contact is accepted, stored, never served


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    total: int


class CatalogView(SqlView):
    tables = (
        "CREATE TABLE IF NOT EXISTS catalog_listings (listing_id TEXT PRIMARY KEY, resource TEXT NOT NULL, "
        "method TEXT NOT NULL, type TEXT NOT NULL, last_updated TEXT NOT NULL, enabled BOOLEAN NOT NULL, "
        "item TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS catalog_tags (listing_id TEXT NOT NULL, tag TEXT NOT NULL, "
        "PRIMARY KEY (listing_id, tag))",
        "CREATE INDEX IF NOT EXISTS catalog_listings_order ON catalog_listings (last_updated DESC, listing_id)",
        "CREATE INDEX IF NOT EXISTS catalog_tags_tag ON catalog_tags (tag, listing_id)",
        # Who owns each listing (the console's "your listings"); a delisted listing leaves all three tables.
        "CREATE TABLE IF NOT EXISTS catalog_owners (listing_id TEXT PRIMARY KEY, owner TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS catalog_owners_owner ON catalog_owners (owner, listing_id)",
    )

    def get_page(self, kind: str | None, tags: tuple[str, ...], limit: int, offset: int) -> Page:
        """One page in a stable order (most recently updated first, then by id) and the total, read together."""
        where, params = ["1 = 1"], []
        if kind:
            where.append("l.type = ?")
            params.append(kind)
        for tag in tags:
            where.append("EXISTS (SELECT 1 FROM catalog_tags t WHERE t.listing_id = l.listing_id AND t.tag = ?)")
            params.append(tag)
        condition = " AND ".join(where)
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.sql(f"SELECT COUNT(*) FROM catalog_listings l WHERE {condition}"), tuple(params))
            total = values(c.fetchone())[0]
            c.execute(self.sql(f"SELECT l.item FROM catalog_listings l WHERE {condition} "
                               "ORDER BY l.last_updated DESC, l.listing_id LIMIT ? OFFSET ?"),
                      (*params, limit, offset))
            items = [json.loads(values(row)[0]) for row in c.fetchall()]
        return Page(items, int(total))

    def list_owned(self, owner: str) -> list[tuple[str, dict[str, Any]]]:
        """(listing id, served item) of each listing `owner` (a client id, `merchant:<uuid>`) owns."""
        rows = self.rows("SELECT l.listing_id, l.item FROM catalog_listings l JOIN catalog_owners o ON "
                         "o.listing_id = l.listing_id WHERE o.owner = ? ORDER BY l.last_updated DESC, l.listing_id",
                         (owner,))
        return [(r[0], json.loads(r[1])) for r in rows]

    def get_rows(self) -> list[tuple[Any, ...]]:
        """Every row with its tags, in id order: what two catalogs are compared by."""
        rows = self.rows("SELECT l.listing_id, l.resource, l.method, l.type, l.last_updated, l.enabled, l.item "
                         "FROM catalog_listings l ORDER BY l.listing_id")
        tags = self.rows("SELECT listing_id, tag FROM catalog_tags ORDER BY listing_id, tag")
        return [(*r[:5], bool(r[5]), json.loads(r[6]), [t[1] for t in tags if t[0] == r[0]]) for r in rows]


class SqliteCatalogView(CatalogView, SQLiteTrackingRecorder):
    pass


class PostgresCatalogView(CatalogView, PostgresTrackingRecorder):
    paramstyle = "format"


class CatalogProjection(Projection[CatalogView]):
    name = "catalog"
    topics = tuple(get_topic(cls) for cls in (
        DiscoveryListing.Registered, DiscoveryListing.MetadataUpdated, DiscoveryListing.Disabled,
        DiscoveryListing.Enabled, DiscoveryListing.Delisted,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: DiscoveryListing.Registered, tracking: Tracking) -> None:
        details = ListingDetails.from_dict(e.details)
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO catalog_listings VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (str(e.originator_id), e.resource, e.method, details.type, timestamp(e.verified_at), True,
                       json.dumps(item(e.resource, e.owner, details, e.offers, e.verified_at))))
            _write_tags(c, str(e.originator_id), details.tags)
            c.execute("INSERT INTO catalog_owners VALUES (?, ?)", (str(e.originator_id), e.owner))

    @process_event.register
    def _(self, e: DiscoveryListing.MetadataUpdated, tracking: Tracking) -> None:
        details, key = ListingDetails.from_dict(e.details), str(e.originator_id)
        with self.view.tracked(tracking) as c:
            resource = values(c.execute("SELECT resource FROM catalog_listings WHERE listing_id = ?",
                                         (key,)).fetchone())[0]
            c.execute("UPDATE catalog_listings SET type = ?, last_updated = ?, item = ? WHERE listing_id = ?",
                      (details.type, timestamp(e.verified_at),
                       json.dumps(item(resource, e.owner, details, e.offers, e.verified_at)), key))
            c.execute("DELETE FROM catalog_tags WHERE listing_id = ?", (key,))
            _write_tags(c, key, details.tags)
            c.execute("DELETE FROM catalog_owners WHERE listing_id = ?", (key,))
            c.execute("INSERT INTO catalog_owners VALUES (?, ?)", (key, e.owner))

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
            for table in ("catalog_tags", "catalog_owners", "catalog_listings"):
                c.execute(f"DELETE FROM {table} WHERE listing_id = ?", (str(e.originator_id),))


def _write_tags(c: Any, key: str, tags: tuple[str, ...]) -> None:
    for tag in tags:
        c.execute("INSERT INTO catalog_tags VALUES (?, ?)", (key, tag))


# -- the served shape -----------------------------------------------------------------------------------------


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds: fixed width, so it also sorts as text."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def item(resource: str, owner: str, details: ListingDetails, offers: list[dict[str, Any]],
         verified_at: datetime) -> dict[str, Any]:
    """The served item; title, tags and provider only for a listing a registered account owns (SPEC.md)."""
    registered = owner != ANONYMOUS_ID
    served: dict[str, Any] = {
        "resource": resource, "type": details.type, "method": details.method, "x402Version": X402_VERSION,
        "accepts": [_accept(offer, details) for offer in offers], "lastUpdated": timestamp(verified_at),
    }
    if registered and details.provider:
        served["provider"] = {k: details.provider[k] for k in SERVED_PROVIDER if k in details.provider}
    metadata: dict[str, Any] = {"title": details.title} if registered and details.title else {}
    metadata["description"] = details.description
    if registered:
        metadata["tags"] = list(details.tags)
    served["metadata"] = metadata
    return served


def _accept(offer: dict[str, Any], details: ListingDetails) -> dict[str, Any]:
    known = network(offer["network"])
    symbol = "USDC" if known is not None and known.usdc_mint == offer["asset"] else offer["asset"]
    output = details.output or {}
    return {
        "scheme": offer["scheme"], "network": offer["network"], "maxAmountRequired": str(offer["amount"]),
        "asset": offer["asset"], "payTo": offer["pay_to"], "maxTimeoutSeconds": offer["max_timeout_seconds"],
        "description": offer["description"] or details.description,
        "mimeType": offer["mime_type"] or output.get("type", ""),
        "outputSchema": {
            "input": {"method": details.method, "type": details.type, "queryParams": query_params(details)},
            "output": {"type": output.get("type") or offer["mime_type"], "schema": output.get("schema") or {}},
        },
        "extra": {
            "asset": symbol,
            "pricing": details.pricing or {"model": "per_request", "amount": str(offer["amount"]), "asset": symbol},
        },
    }


# -- queries --------------------------------------------------------------------------------------------------


def list_resources(view: CatalogView, kind: str | None = None, tags: tuple[str, ...] = (), limit: int = 20,
                   offset: int = 0) -> Page:
    return view.get_page(kind, tuple(t.lower() for t in tags), limit, offset)


def rebuild(listings: Application, view: CatalogView) -> int:
    """Fill an empty catalog view from the Listings event store, from the first event; return how many."""
    if view.max_tracking_id(listings.name) is not None:
        raise ValueError("rebuild needs an empty catalog view")
    return catch_up(listings, CatalogProjection(view))
