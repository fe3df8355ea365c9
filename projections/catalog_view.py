"""The catalog's tables and its two queries, common to both stores: a page of the list (`get_page`) and a page of
a search (`search`), each read in one transaction. The stores' own search index is in `projections/catalog.py`
(`SqliteCatalogView`, `PostgresCatalogView`); the kept orders and counts in `projections/catalog_counts.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import IntegrityError, OperationalError

from application.listings import Listings
from projections import catalog_search as search
from projections.catalog_counts import UPSERT_COUNT, exists, pair_keys, pairs, with_key, write_terms
from projections.reshape import ReshapedView, Shape
from projections.sql import Cursor, values

# The counts and the order of pairs of tags are kept (filled once for an older catalog): the marker row says so.
PAIRS_KEPT = "kept:pair order"
# The filter terms (network, payTo, scheme, extension) and the search index are kept too (filled once likewise).
SEARCH_KEPT = "kept:terms and search"


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    total: int


@dataclass(frozen=True)
class SearchPage:
    items: list[dict[str, Any]]
    cursor: search.Key | None  # the last item's place, when more follow
    partial: bool  # the answer was cut (never: every match is reachable through the cursor)


class CatalogView(ReshapedView):
    # A catalog of the release before listings were declared by their owners (no `catalog_proposals`) served what
    # payers wrote (title, tags, provider) where the events now hold proposals: rebuilt from the listings' events.
    shape = Shape(Listings.name, ("catalog_proposals", "proposal"),
                  ("catalog_listings", "catalog_tags", "catalog_owners", "catalog_tag_order", "catalog_counts",
                   "catalog_pair_order", "catalog_terms", "catalog_search", "catalog_search_rows"),
                  anchor="catalog_listings")
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
        # The latest payment's proposal of a listing whose owner has not declared it (what the console offers to
        # confirm): never served.
        "CREATE TABLE IF NOT EXISTS catalog_proposals (listing_id TEXT PRIMARY KEY, proposal TEXT NOT NULL)",
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
        super().create_table()
        self._fillpairs()
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
                    write_terms(cursor, key, kind, moment, search.terms(item), tags)
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

    def _fillpairs(self) -> None:
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
                self._backfillpairs(c)
        except (IntegrityError, OperationalError):
            pass  # another process filled them at the same moment (or holds the lock: the next start fills them)

    def _backfillpairs(self, c: Any) -> None:
        """The kept counts and order of each pair of tags, from the tag order's rows (a catalog from before they
        were kept). Done here rather than in SQL so that a pair orders its tags as `write_tags` does, whatever
        the database's collation."""
        c.execute(self.sql("SELECT listing_id, type, last_updated, tag FROM catalog_tag_order ORDER BY listing_id"))
        listings: dict[str, tuple[str, str, list[str]]] = {}
        for listing, kind, moment, tag in (values(r) for r in c.fetchall()):
            listings.setdefault(listing, (kind, moment, []))[2].append(tag)
        counts: dict[str, int] = {}
        for listing, (kind, moment, tags) in listings.items():
            for key in pair_keys(kind, tags):
                counts[key] = counts.get(key, 0) + 1
            for pair in pairs(tags):
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
                source, params = "catalog_pair_order x WHERE x.pair = ?", [pairs(tags)[0]]
                total = count(pair_keys(kind, tags)[0])
            else:
                ranked = sorted(keys, key=lambda k: (count(f"{type_key} {k[0]}:{k[1]}".lstrip()), k))
                (table, first), others = ranked[0], ranked[1:]
                source, params = ("catalog_tag_order x WHERE x.tag = ?" if table == "tag"
                                  else "catalog_terms x WHERE x.term = ?"), [first]
                total = count(f"{type_key} {table}:{first}".lstrip())
            if kind:
                source += " AND x.type = ?"
                params.append(kind)
            where, extra = exists(others)
            source += where
            params += extra
            if len(others) == 1:  # a term and a tag, or two terms: their kept count
                total = count(f"{type_key} {with_key(f'{table}:{first}', ':'.join(others[0]))}".lstrip())
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
        more, extra = exists([("tag", t) for t in dict.fromkeys(tags)] + [("term", t) for t in dict.fromkeys(terms)])
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


    def list_owned(self, owner: str) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
        """(listing id, served item, the proposal it could confirm or None) of each listing `owner` (a client id,
        `merchant:<uuid>`) owns."""
        rows = self.rows("SELECT l.listing_id, l.item, p.proposal FROM catalog_listings l JOIN catalog_owners o ON "
                         "o.listing_id = l.listing_id LEFT JOIN catalog_proposals p ON p.listing_id = l.listing_id "
                         "WHERE o.owner = ? ORDER BY l.last_updated DESC, l.listing_id", (owner,))
        return [(r[0], json.loads(r[1]), json.loads(r[2]) if r[2] else None) for r in rows]

    def get_rows(self) -> list[tuple[Any, ...]]:
        """Every row with its tags, in id order: what two catalogs are compared by (`paywarden audit rebuild
        --check` compares every table, the tag order and the counts too)."""
        rows = self.rows("SELECT l.listing_id, l.resource, l.method, l.type, l.last_updated, l.enabled, l.item "
                         "FROM catalog_listings l ORDER BY l.listing_id")
        tags: dict[str, list[str]] = {}
        for listing, tag in self.rows("SELECT listing_id, tag FROM catalog_tags ORDER BY listing_id, tag"):
            tags.setdefault(listing, []).append(tag)
        return [(*r[:5], bool(r[5]), json.loads(r[6]), tags.get(r[0], [])) for r in rows]

