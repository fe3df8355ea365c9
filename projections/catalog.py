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
from eventsourcing.persistence import IntegrityError, OperationalError, Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from domain.clients import ANONYMOUS_ID
from domain.discovery import ListingDetails, query_params
from domain.listing import DiscoveryListing
from domain.networks import X402_VERSION, network
from projections import catalog_search as search
from projections.runner import catch_up
from projections.sql import Cursor, SqlView, values

SERVED_PROVIDER = ("name", "description", "url")  # provider.contact is accepted, stored, never served
# The counts and the order of pairs of tags are kept (filled once for an older catalog): the marker row says so.
PAIRS_KEPT = "kept:pair order"
# The filter terms (network, payTo, scheme, extension) and the search index are kept too (filled once likewise).
SEARCH_KEPT = "kept:terms and search"
UPSERT_COUNT = ("INSERT INTO catalog_counts VALUES (?, ?) ON CONFLICT (filter) DO UPDATE "
                "SET n = catalog_counts.n + excluded.n")


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    total: int


@dataclass(frozen=True)
class SearchPage:
    items: list[dict[str, Any]]
    cursor: search.Key | None  # the last item's place, when more follow
    partial: bool  # the answer was cut (never: every match is reachable through the cursor)


class CatalogView(SqlView):
    tables: tuple[str, ...] = (
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
        # What keeps a query's cost independent of the catalog's size (docs/performance.md): each filter's
        # pages are read from an index in the served order, and each filter's total is kept as a count.
        "CREATE INDEX IF NOT EXISTS catalog_listings_type_order ON catalog_listings (type, last_updated DESC, "
        "listing_id)",
        "CREATE TABLE IF NOT EXISTS catalog_tag_order (tag TEXT NOT NULL, listing_id TEXT NOT NULL, "
        "type TEXT NOT NULL, last_updated TEXT NOT NULL, PRIMARY KEY (tag, listing_id))",
        "CREATE INDEX IF NOT EXISTS catalog_tag_order_page ON catalog_tag_order (tag, last_updated DESC, listing_id)",
        "CREATE INDEX IF NOT EXISTS catalog_tag_order_type_page ON catalog_tag_order (tag, type, last_updated DESC, "
        "listing_id)",
        "CREATE TABLE IF NOT EXISTS catalog_counts (filter TEXT PRIMARY KEY, n BIGINT NOT NULL)",
        # Two tags' pages, like one tag's: each pair of a listing's tags (`a,b` in code-point order), in order.
        "CREATE TABLE IF NOT EXISTS catalog_pair_order (pair TEXT NOT NULL, listing_id TEXT NOT NULL, "
        "type TEXT NOT NULL, last_updated TEXT NOT NULL, PRIMARY KEY (pair, listing_id))",
        "CREATE INDEX IF NOT EXISTS catalog_pair_order_page ON catalog_pair_order (pair, last_updated DESC, "
        "listing_id)",
        "CREATE INDEX IF NOT EXISTS catalog_pair_order_type_page ON catalog_pair_order (pair, type, "
        "last_updated DESC, listing_id)",
        # The filter terms of each listing (`network:<CAIP-2>`, `payTo:<address>`, `scheme:<name>`,
        # `extension:<key>`; projections/catalog_search.py), in the served order like a tag's.
        "CREATE TABLE IF NOT EXISTS catalog_terms (term TEXT NOT NULL, listing_id TEXT NOT NULL, "
        "type TEXT NOT NULL, last_updated TEXT NOT NULL, PRIMARY KEY (term, listing_id))",
        "CREATE INDEX IF NOT EXISTS catalog_terms_page ON catalog_terms (term, last_updated DESC, listing_id)",
        "CREATE INDEX IF NOT EXISTS catalog_terms_type_page ON catalog_terms (term, type, last_updated DESC, "
        "listing_id)",
    )
    # The search index: the engine's own tables, in the subclasses (projections/catalog_search.py).
    # A catalog built before the order and count tables existed gets them filled once, from its rows, when its
    # view is created with an empty count table (a table the projection has written to is never empty again).
    backfill = (
        "INSERT INTO catalog_tag_order SELECT t.tag, t.listing_id, l.type, l.last_updated FROM catalog_tags t "
        "JOIN catalog_listings l ON l.listing_id = t.listing_id WHERE NOT EXISTS (SELECT 1 FROM catalog_tag_order)",
        "INSERT INTO catalog_counts SELECT f, n FROM ("
        "SELECT '' AS f, COUNT(*) AS n FROM catalog_listings "
        "UNION ALL SELECT 'type:' || type, COUNT(*) FROM catalog_listings GROUP BY type "
        "UNION ALL SELECT 'tag:' || tag, COUNT(*) FROM catalog_tag_order GROUP BY tag "
        "UNION ALL SELECT 'type:' || type || ' tag:' || tag, COUNT(*) FROM catalog_tag_order GROUP BY type, tag"
        ") AS counted",
    )

    def create_table(self) -> None:
        super().create_table()  # type: ignore[misc]
        self._fill_pairs()
        self._fill_terms_and_search()

    def _fill_terms_and_search(self) -> None:
        """A catalog from before the terms and the search index: both filled once from its items."""
        if self.rows("SELECT filter FROM catalog_counts WHERE filter = ?", (SEARCH_KEPT,)):
            return
        try:
            with self.datastore.transaction(commit=True) as c:
                c.execute(self.sql("INSERT INTO catalog_counts VALUES (?, 1)"), (SEARCH_KEPT,))
                cursor = Cursor(c, self)
                cursor.execute("DELETE FROM catalog_counts WHERE filter LIKE ? OR filter LIKE ? OR filter LIKE ? "
                               "OR filter LIKE ?", ("term:%", "type:% term:%", "with:%", "type:% with:%"))
                cursor.execute("DELETE FROM catalog_terms")
                self.clear_search(cursor)
                c.execute(self.sql("SELECT listing_id, type, last_updated, item FROM catalog_listings "
                                   "ORDER BY last_updated, listing_id"))
                for key, kind, moment, served in [values(r) for r in c.fetchall()]:
                    item = json.loads(served)
                    tags = tuple((item.get("metadata") or {}).get("tags") or ())
                    _write_terms(cursor, key, kind, moment, search.terms(item), tags)
                    self.write_search(cursor, key, moment, item)
        except (IntegrityError, OperationalError):
            pass  # another process filled them at the same moment

    def write_search(self, c: Any, key: str, moment: str, served: dict[str, Any]) -> None:
        """Index (or index again) a listing's served item."""
        raise NotImplementedError

    def delete_search(self, c: Any, key: str) -> None:
        raise NotImplementedError

    def clear_search(self, c: Any) -> None:
        raise NotImplementedError

    def search_tier(self, c: Any, tier: int, query: str, where: str, params: list[Any], below: int | None,
                    limit: int) -> list[tuple[int, str]]:
        """(seq, listing id) of at most `limit` listings of one tier of the ranking (`catalog_search.TIERS`) that
        pass the filters (`where`, on `x`), newest write first, those before `below` only when given."""
        raise NotImplementedError

    def _fill_pairs(self) -> None:
        kept = [r[0] for r in self.rows("SELECT filter FROM catalog_counts WHERE filter IN ('', ?)", (PAIRS_KEPT,))]
        if PAIRS_KEPT in kept:
            return  # the usual case: nothing to fill, and no write at start-up
        try:
            with self.datastore.transaction(commit=True) as c:
                # The marker first: a second process filling at the same moment fails here, all rolled back.
                c.execute(self.sql("INSERT INTO catalog_counts VALUES (?, 1)"), (PAIRS_KEPT,))
                if not kept:  # a catalog from before the order and count tables
                    for statement in self.backfill:
                        c.execute(self.sql(statement))
                c.execute(self.sql("DELETE FROM catalog_counts WHERE filter = 'kept:pairs' OR filter LIKE ? "
                                   "OR filter LIKE ?"), ("tags:%", "type:% tags:%"))  # counted for a while alone
                c.execute(self.sql("DELETE FROM catalog_pair_order"))
                self._backfill_pairs(c)
        except (IntegrityError, OperationalError):
            pass  # another process filled them at the same moment (or holds the lock: the next start fills them)

    def _backfill_pairs(self, c: Any) -> None:
        """The kept counts and order of each pair of tags, from the tag order's rows (a catalog from before they
        were kept). Done here rather than in SQL so that a pair orders its tags as `_write_tags` does, whatever
        the database's collation."""
        c.execute(self.sql("SELECT listing_id, type, last_updated, tag FROM catalog_tag_order ORDER BY listing_id"))
        listings: dict[str, tuple[str, str, list[str]]] = {}
        for listing, kind, moment, tag in (values(r) for r in c.fetchall()):
            listings.setdefault(listing, (kind, moment, []))[2].append(tag)
        counts: dict[str, int] = {}
        for listing, (kind, moment, tags) in listings.items():
            for key in _pair_keys(kind, tags):
                counts[key] = counts.get(key, 0) + 1
            for pair in _pairs(tags):
                c.execute(self.sql("INSERT INTO catalog_pair_order VALUES (?, ?, ?, ?)"), (pair, listing, kind, moment))
        for key, n in counts.items():
            c.execute(self.sql(UPSERT_COUNT), (key, n))

    def get_page(self, kind: str | None, tags: tuple[str, ...], limit: int, offset: int,
                 terms: tuple[str, ...] = ()) -> Page:
        """One page in a stable order (most recently updated first, then by id) and the total, read together.

        The page's ids come from one index in the served order (the listings' own, by type, or by the first
        tag's or term's, the rarest of those asked), so reading a page costs the same however large the catalog;
        only the offset costs (the index entries skipped, never the listings), and a page in the second half is
        read from the other end of the index, so the last page costs what the first does. With at most two tags
        and terms, the total is a kept count; with more, it counts the rarest one's listings that have the
        others."""
        tags, terms = tuple(dict.fromkeys(tags)), tuple(dict.fromkeys(terms))
        with self.datastore.transaction(commit=False) as c:
            def count(key: str) -> int:
                c.execute(self.sql("SELECT n FROM catalog_counts WHERE filter = ?"), (key,))
                rows = c.fetchall()
                return int(values(rows[0])[0]) if rows else 0

            type_key = f"type:{kind}" if kind else ""
            keys = [("tag", t) for t in tags] + [("term", t) for t in terms]
            others: list[tuple[str, str]] = []
            if not keys:
                total = count(type_key)
                source, params = "catalog_listings x WHERE 1 = 1", []
            elif len(tags) == 2 and not terms:  # the pair's own order
                source, params = "catalog_pair_order x WHERE x.pair = ?", [_pairs(tags)[0]]
                total = count(_pair_keys(kind, tags)[0])
            else:
                ranked = sorted(keys, key=lambda k: (count(f"{type_key} {k[0]}:{k[1]}".lstrip()), k))
                (table, first), others = ranked[0], ranked[1:]
                source, params = ("catalog_tag_order x WHERE x.tag = ?" if table == "tag"
                                  else "catalog_terms x WHERE x.term = ?"), [first]
                total = count(f"{type_key} {table}:{first}".lstrip())
            if kind:
                source += " AND x.type = ?"
                params.append(kind)
            where, extra = _exists(others)
            source += where
            params += extra
            if len(others) == 1:  # a term and a tag, or two terms: their kept count
                total = count(f"{type_key} {_with(f'{table}:{first}', ':'.join(others[0]))}".lstrip())
            elif others:
                c.execute(self.sql(f"SELECT COUNT(*) FROM {source}"), tuple(params))
                total = int(values(c.fetchone())[0])
            order = "x.last_updated DESC, x.listing_id"
            if total - offset - limit < offset:  # nearer the end: the page read from the index's other end
                order, limit, offset = "x.last_updated ASC, x.listing_id DESC", min(limit, total - offset), max(
                    total - offset - limit, 0)
            items: list[dict[str, Any]] = []
            if limit > 0:
                c.execute(self.sql(
                    "SELECT l.item FROM catalog_listings l JOIN ("
                    f"SELECT x.listing_id, x.last_updated FROM {source} ORDER BY {order} LIMIT ? OFFSET ?"
                    ") AS page ON page.listing_id = l.listing_id ORDER BY page.last_updated DESC, page.listing_id"),
                    (*params, limit, offset))
                items = [json.loads(values(row)[0]) for row in c.fetchall()]
        return Page(items, total)

    def search(self, query: str, kind: str | None, tags: tuple[str, ...], terms: tuple[str, ...], limit: int,
               after: search.Key | None = None) -> SearchPage:
        """The listings matching every word of `query` and the filters, ranked, the page after `after`: each tier
        read in the index's own order, as far as the page needs (`catalog_search.TIERS`)."""
        where, params = "", []
        if kind:
            where, params = " AND EXISTS (SELECT 1 FROM catalog_listings t WHERE t.listing_id = x.listing_id " \
                            "AND t.type = ?)", [kind]
        more, extra = _exists([("tag", t) for t in dict.fromkeys(tags)] + [("term", t) for t in dict.fromkeys(terms)])
        where, params = where + more, params + extra
        first = after.tier if after is not None else 0
        found: list[tuple[search.Key, str]] = []
        with self.datastore.transaction(commit=False) as c:
            cursor = Cursor(c, self)
            for tier in search.TIERS[first:]:
                below = after.seq if after is not None and tier == first else None
                found += [(search.Key(tier, seq), listing)
                          for seq, listing in self.search_tier(cursor, tier, query, where, params, below,
                                                               limit + 1 - len(found))]
                if len(found) > limit:
                    break
            page = found[:limit]
            served: dict[str, dict[str, Any]] = {}
            if page:
                ids = [listing for _, listing in page]
                rows = cursor.execute(f"SELECT listing_id, item FROM catalog_listings WHERE listing_id IN "
                                      f"({', '.join('?' for _ in ids)})", ids).fetchall()
                served = {values(r)[0]: json.loads(values(r)[1]) for r in rows}
        items = [served[listing] for _, listing in page if listing in served]
        return SearchPage(items, page[-1][0] if len(found) > limit else None, False)


    def list_owned(self, owner: str) -> list[tuple[str, dict[str, Any]]]:
        """(listing id, served item) of each listing `owner` (a client id, `merchant:<uuid>`) owns."""
        rows = self.rows("SELECT l.listing_id, l.item FROM catalog_listings l JOIN catalog_owners o ON "
                         "o.listing_id = l.listing_id WHERE o.owner = ? ORDER BY l.last_updated DESC, l.listing_id",
                         (owner,))
        return [(r[0], json.loads(r[1])) for r in rows]

    def get_rows(self) -> list[tuple[Any, ...]]:
        """Every row with its tags, in id order: what two catalogs are compared by (`paywarden audit rebuild
        --check` compares every table, the tag order and the counts too)."""
        rows = self.rows("SELECT l.listing_id, l.resource, l.method, l.type, l.last_updated, l.enabled, l.item "
                         "FROM catalog_listings l ORDER BY l.listing_id")
        tags: dict[str, list[str]] = {}
        for listing, tag in self.rows("SELECT listing_id, tag FROM catalog_tags ORDER BY listing_id, tag"):
            tags.setdefault(listing, []).append(tag)
        return [(*r[:5], bool(r[5]), json.loads(r[6]), tags.get(r[0], [])) for r in rows]


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
        DiscoveryListing.Enabled, DiscoveryListing.Delisted,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: DiscoveryListing.Registered, tracking: Tracking) -> None:
        details = ListingDetails.from_dict(e.details)
        key, moment = str(e.originator_id), timestamp(e.verified_at)
        served = item(e.resource, e.owner, details, e.offers, e.verified_at)
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO catalog_listings VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (key, e.resource, e.method, details.type, moment, True, json.dumps(served)))
            _write_tags(c, key, details.type, moment, details.tags)
            _write_terms(c, key, details.type, moment, search.terms(served), details.tags)
            self.view.write_search(c, key, moment, served)
            c.execute("INSERT INTO catalog_owners VALUES (?, ?)", (key, e.owner))

    @process_event.register
    def _(self, e: DiscoveryListing.MetadataUpdated, tracking: Tracking) -> None:
        details, key, moment = ListingDetails.from_dict(e.details), str(e.originator_id), timestamp(e.verified_at)
        with self.view.tracked(tracking) as c:
            resource = values(c.execute("SELECT resource FROM catalog_listings WHERE listing_id = ?",
                                         (key,)).fetchone())[0]
            _delete_terms(c, key)
            _delete_tags(c, key)
            served = item(resource, e.owner, details, e.offers, e.verified_at)
            c.execute("UPDATE catalog_listings SET type = ?, last_updated = ?, item = ? WHERE listing_id = ?",
                      (details.type, moment, json.dumps(served), key))
            _write_tags(c, key, details.type, moment, details.tags)
            _write_terms(c, key, details.type, moment, search.terms(served), details.tags)
            self.view.write_search(c, key, moment, served)
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
            _delete_terms(c, str(e.originator_id))
            _delete_tags(c, str(e.originator_id))
            self.view.delete_search(c, str(e.originator_id))
            for table in ("catalog_owners", "catalog_listings"):
                c.execute(f"DELETE FROM {table} WHERE listing_id = ?", (str(e.originator_id),))


def _write_tags(c: Any, key: str, kind: str, moment: str, tags: tuple[str, ...]) -> None:
    """A listing's tags, its rows in the tag order, and its place in the kept counts."""
    for tag in tags:
        c.execute("INSERT INTO catalog_tags VALUES (?, ?)", (key, tag))
        c.execute("INSERT INTO catalog_tag_order VALUES (?, ?, ?, ?)", (tag, key, kind, moment))
    for pair in _pairs(tags):
        c.execute("INSERT INTO catalog_pair_order VALUES (?, ?, ?, ?)", (pair, key, kind, moment))
    _count(c, kind, tags, +1)


def _delete_tags(c: Any, key: str) -> None:
    """Undo `_write_tags` for a listing (before it changes or leaves)."""
    kind = values(c.execute("SELECT type FROM catalog_listings WHERE listing_id = ?", (key,)).fetchone())[0]
    tags = tuple(values(r)[0] for r in c.execute("SELECT tag FROM catalog_tags WHERE listing_id = ?",
                                                  (key,)).fetchall())
    c.execute("DELETE FROM catalog_tags WHERE listing_id = ?", (key,))
    for tag in tags:
        c.execute("DELETE FROM catalog_tag_order WHERE tag = ? AND listing_id = ?", (tag, key))
    for pair in _pairs(tags):
        c.execute("DELETE FROM catalog_pair_order WHERE pair = ? AND listing_id = ?", (pair, key))
    _count(c, kind, tags, -1)


def _write_terms(c: Any, key: str, kind: str, moment: str, terms: list[str], tags: tuple[str, ...]) -> None:
    """A listing's filter terms in their order, and in the kept counts: each term's (`term:<t>`) and each pair's of
    a term and another term or a tag (`with:<a>|<b>`), each also with the type, so that a query with two filters
    reads its total as one with a tag or two does."""
    for term in terms:
        c.execute("INSERT INTO catalog_terms VALUES (?, ?, ?, ?)", (term, key, kind, moment))
    _count_terms(c, kind, terms, tags, +1)


def _delete_terms(c: Any, key: str) -> None:
    """Undo `_write_terms` for a listing (before it changes or leaves, and before `_delete_tags`)."""
    found = [values(r) for r in c.execute("SELECT term, type FROM catalog_terms WHERE listing_id = ?",
                                          (key,)).fetchall()]
    if found:
        tags = tuple(values(r)[0] for r in c.execute("SELECT tag FROM catalog_tags WHERE listing_id = ?",
                                                      (key,)).fetchall())
        _count_terms(c, found[0][1], [term for term, _ in found], tags, -1)
    c.execute("DELETE FROM catalog_terms WHERE listing_id = ?", (key,))


def _count_terms(c: Any, kind: str, terms: list[str], tags: tuple[str, ...], delta: int) -> None:
    keys = [f"term:{t}" for t in terms]
    pairs = [_with(a, b) for i, a in enumerate(keys) for b in [*keys[i + 1:], *(f"tag:{t}" for t in tags)]]
    for counted in (*keys, *pairs):
        for typed in (counted, f"type:{kind} {counted}"):
            c.execute(UPSERT_COUNT, (typed, delta))


def _with(a: str, b: str) -> str:
    """The count key of two filters (`tag:<t>` or `term:<t>`; neither holds a `|`), in code-point order."""
    return "with:" + "|".join(sorted((a, b)))


def _exists(keys: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """The condition (on `x.listing_id`) that a listing has every tag and term of `keys`."""
    where, params = "", []
    for table, value in keys:
        where += (" AND EXISTS (SELECT 1 FROM catalog_tags o WHERE o.listing_id = x.listing_id AND o.tag = ?)"
                  if table == "tag" else
                  " AND EXISTS (SELECT 1 FROM catalog_terms o WHERE o.term = ? AND o.listing_id = x.listing_id)")
        params.append(value)
    return where, params


def _count(c: Any, kind: str, tags: tuple[str, ...], delta: int) -> None:
    for key in ("", f"type:{kind}", *(f"tag:{t}" for t in tags), *(f"type:{kind} tag:{t}" for t in tags),
                *_pair_keys(kind, tags)):
        c.execute(UPSERT_COUNT, (key, delta))


def _pairs(tags: tuple[str, ...] | list[str]) -> list[str]:
    """Every pair of the tags, `a,b` with the tags in code-point order (a tag has no comma)."""
    ordered = sorted(set(tags))
    return [f"{a},{b}" for i, a in enumerate(ordered) for b in ordered[i + 1:]]


def _pair_keys(kind: str | None, tags: tuple[str, ...] | list[str]) -> list[str]:
    """The count keys of every pair of a listing's tags (`tags:a,b`), each also with the listing's type: a query
    for two tags reads its total from one of them."""
    pairs = [f"tags:{p}" for p in _pairs(tags)]
    return [*(f"type:{kind} {p}" for p in pairs), *pairs] if kind else pairs


# -- the served shape -----------------------------------------------------------------------------------------


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds: fixed width, so it also sorts as text."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def item(resource: str, owner: str, details: ListingDetails, offers: list[dict[str, Any]],
         verified_at: datetime) -> dict[str, Any]:
    """The served item; title, tags and provider only for a listing a registered account owns
    (docs/architecture.md#the-interface-contract)."""
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
