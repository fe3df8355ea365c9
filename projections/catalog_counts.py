"""The catalog's kept orders and counts: each tag's, each pair of tags', each filter term's listings in the
served order, and how many listings each of those (and each type) has, so that a filtered page and its total cost
the same however large the catalog (docs/discovery.md). Written in the listing's own transaction by
`CatalogProjection`; read by `CatalogView.get_page` and `CatalogView.search`.
"""

from __future__ import annotations

from typing import Any

from projections.sql import values

UPSERT_COUNT = ("INSERT INTO catalog_counts VALUES (?, ?) ON CONFLICT (filter) DO UPDATE "
                "SET n = catalog_counts.n + excluded.n")


def write_tags(c: Any, key: str, kind: str, moment: str, tags: tuple[str, ...]) -> None:
    """A listing's tags, its rows in the tag order, and its place in the kept counts."""
    for tag in tags:
        c.execute("INSERT INTO catalog_tags VALUES (?, ?)", (key, tag))
        c.execute("INSERT INTO catalog_tag_order VALUES (?, ?, ?, ?)", (tag, key, kind, moment))
    for pair in pairs(tags):
        c.execute("INSERT INTO catalog_pair_order VALUES (?, ?, ?, ?)", (pair, key, kind, moment))
    count_tags(c, kind, tags, +1)


def delete_tags(c: Any, key: str) -> None:
    """Undo `write_tags` for a listing (before it changes or leaves)."""
    kind = values(c.execute("SELECT type FROM catalog_listings WHERE listing_id = ?", (key,)).fetchone())[0]
    tags = tuple(values(r)[0] for r in c.execute("SELECT tag FROM catalog_tags WHERE listing_id = ?",
                                                  (key,)).fetchall())
    c.execute("DELETE FROM catalog_tags WHERE listing_id = ?", (key,))
    for tag in tags:
        c.execute("DELETE FROM catalog_tag_order WHERE tag = ? AND listing_id = ?", (tag, key))
    for pair in pairs(tags):
        c.execute("DELETE FROM catalog_pair_order WHERE pair = ? AND listing_id = ?", (pair, key))
    count_tags(c, kind, tags, -1)


def write_terms(c: Any, key: str, kind: str, moment: str, terms: list[str], tags: tuple[str, ...]) -> None:
    """A listing's filter terms in their order, and in the kept counts: each term's (`term:<t>`) and each pair's of
    a term and another term or a tag (`with:<a>|<b>`), each also with the type, so that a query with two filters
    reads its total as one with a tag or two does."""
    for term in terms:
        c.execute("INSERT INTO catalog_terms VALUES (?, ?, ?, ?)", (term, key, kind, moment))
    count_terms(c, kind, terms, tags, +1)


def delete_terms(c: Any, key: str) -> None:
    """Undo `write_terms` for a listing (before it changes or leaves, and before `delete_tags`)."""
    found = [values(r) for r in c.execute("SELECT term, type FROM catalog_terms WHERE listing_id = ?",
                                          (key,)).fetchall()]
    if found:
        tags = tuple(values(r)[0] for r in c.execute("SELECT tag FROM catalog_tags WHERE listing_id = ?",
                                                      (key,)).fetchall())
        count_terms(c, found[0][1], [term for term, _ in found], tags, -1)
    c.execute("DELETE FROM catalog_terms WHERE listing_id = ?", (key,))


def count_terms(c: Any, kind: str, terms: list[str], tags: tuple[str, ...], delta: int) -> None:
    keys = [f"term:{t}" for t in terms]
    pairs = [with_key(a, b) for i, a in enumerate(keys) for b in [*keys[i + 1:], *(f"tag:{t}" for t in tags)]]
    for counted in (*keys, *pairs):
        for typed in (counted, f"type:{kind} {counted}"):
            c.execute(UPSERT_COUNT, (typed, delta))


def with_key(a: str, b: str) -> str:
    """The count key of two filters (`tag:<t>` or `term:<t>`; neither holds a `|`), in code-point order."""
    return "with:" + "|".join(sorted((a, b)))


def exists(keys: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """The condition (on `x.listing_id`) that a listing has every tag and term of `keys`."""
    where, params = "", []
    for table, value in keys:
        where += (" AND EXISTS (SELECT 1 FROM catalog_tags o WHERE o.listing_id = x.listing_id AND o.tag = ?)"
                  if table == "tag" else
                  " AND EXISTS (SELECT 1 FROM catalog_terms o WHERE o.term = ? AND o.listing_id = x.listing_id)")
        params.append(value)
    return where, params


def count_tags(c: Any, kind: str, tags: tuple[str, ...], delta: int) -> None:
    for key in ("", f"type:{kind}", *(f"tag:{t}" for t in tags), *(f"type:{kind} tag:{t}" for t in tags),
                *pair_keys(kind, tags)):
        c.execute(UPSERT_COUNT, (key, delta))


def pairs(tags: tuple[str, ...] | list[str]) -> list[str]:
    """Every pair of the tags, `a,b` with the tags in code-point order (a tag has no comma)."""
    ordered = sorted(set(tags))
    return [f"{a},{b}" for i, a in enumerate(ordered) for b in ordered[i + 1:]]


def pair_keys(kind: str | None, tags: tuple[str, ...] | list[str]) -> list[str]:
    """The count keys of every pair of a listing's tags (`tags:a,b`), each also with the listing's type: a query
    for two tags reads its total from one of them."""
    keys = [f"tags:{p}" for p in pairs(tags)]
    return [*(f"type:{kind} {p}" for p in keys), *keys] if kind else keys

