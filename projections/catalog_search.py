"""The catalog's search index and its filter terms: written by `CatalogProjection` in the same transaction as the
listing's row, read by `GET /discovery/search` and the filtered `GET /discovery/resources` (docs/discovery.md).

Matching is the store's own full-text engine: SQLite FTS5 on the embedded default, PostgreSQL `tsvector` with a
GIN index and `websearch_to_tsquery` on production. Both are given the same words: a listing's text is split into
words here (`words`), once, so the two engines index, and a query matches, exactly the same words. The engine
returns the most recent matches (a window of at most `WINDOW`); `rank` orders that window, the same on both.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

WINDOW = 1000  # the matches ranked per query; more and the answer says `partialResults`
MAX_QUERY_CHARS = 200
MAX_QUERY_WORDS = 10
MAX_SCHEMA_NAMES = 200  # field names taken from one schema (a schema is at most 4096 bytes anyway)
WORD = re.compile(r"[^\W_]+")
EXTENSION = "bazaar"  # every listing entered the catalog through `extensions.bazaar`: the one extension it carries


def words(text: str) -> list[str]:
    """The words of a text, lowercased and without diacritics, each once, in order: letters and digits, split on
    everything else (so `city_name`, `city-name` and `city name` are the same two words)."""
    plain = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    return list(dict.fromkeys(WORD.findall(plain.lower())))


def query_problem(query: str) -> str | None:
    """Why a search query cannot be searched for, or None: the one rule the API and the console apply."""
    if len(query) > MAX_QUERY_CHARS:
        return f"at most {MAX_QUERY_CHARS} characters"
    found = words(query)
    if not found:
        return "empty: give at least one word (letters or digits)"
    if len(found) > MAX_QUERY_WORDS:
        return f"at most {MAX_QUERY_WORDS} words"
    return None


def normal(text: str) -> str:
    """A title, tag or query compared whole: lowercased, whitespace collapsed."""
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class Document:
    """What the index holds for one listing: the exact title and tags (for the exact-match rank), the heading's
    words (title and tags) and the body's (description, the URL's host and path, the provider's name, the input
    and output schema's field names)."""

    title: str
    tags: str  # comma-separated (a tag has no comma)
    head: str
    body: str

    def row(self) -> tuple[str, str, str, str]:
        return self.title, self.tags, self.head, self.body


def document(item: dict[str, Any]) -> Document:
    """The index's document of a served catalog item (so what a reader cannot see, nobody can search for)."""
    metadata, provider = item.get("metadata") or {}, item.get("provider") or {}
    title, tags = str(metadata.get("title") or ""), [str(t) for t in metadata.get("tags") or ()]
    url = urlsplit(item["resource"])
    names: list[str] = []
    for accept in item.get("accepts") or ():
        schema = accept.get("outputSchema") or {}
        names.extend((schema.get("input") or {}).get("queryParams") or {})
        names.extend(_field_names((schema.get("output") or {}).get("schema")))
    body = [str(metadata.get("description") or ""), url.hostname or "", url.path, str(provider.get("name") or ""),
            *names[:MAX_SCHEMA_NAMES]]
    head = words(" ".join([title, *tags]))
    return Document(normal(title), ",".join(tags), " ".join(head), " ".join(words(" ".join(body))))


def _field_names(schema: Any) -> Iterable[str]:
    """The property names of a JSON Schema, nested objects and array items included."""
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for name, sub in properties.items():
                yield str(name)
                yield from _field_names(sub)
        yield from _field_names(schema.get("items"))


def terms(item: dict[str, Any]) -> list[str]:
    """The filter terms of a served item: each accepted network, payTo and scheme, and its extension."""
    found: list[str] = []
    for accept in item.get("accepts") or ():
        found += [f"network:{accept['network']}", f"payTo:{accept['payTo']}", f"scheme:{accept['scheme']}"]
    found.append(f"extension:{EXTENSION}")
    return list(dict.fromkeys(found))


# -- ranking --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    listing_id: str
    last_updated: str
    title: str
    tags: str
    head: str

    def rank(self, query: str, asked: list[str]) -> Key:
        """0: the query is one of the tags or the whole title; 1: every word is in the title or tags; 2: the words
        are found elsewhere too. Then most recently updated first, then by id, as the list orders."""
        if query in self.tags.split(",") or query == self.title:
            tier = 0
        elif set(asked) <= set(self.head.split()):
            tier = 1
        else:
            tier = 2
        return Key(tier, self.last_updated, self.listing_id)


@dataclass(frozen=True, order=False)
class Key:
    """A place in a search's ranking; as a cursor (`token`), tied to the search it came from (`fingerprint`)."""

    tier: int
    last_updated: str
    listing_id: str

    def token(self, fingerprint: str) -> str:
        text = json.dumps([self.tier, self.last_updated, self.listing_id, fingerprint], separators=(",", ":"))
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def from_token(cls, token: str, fingerprint: str) -> Key:
        """The place a cursor names; ValueError when it is not one, or is another search's."""
        try:
            tier, moment, listing, of = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        except (ValueError, TypeError, binascii.Error):
            raise ValueError("not a cursor") from None
        if of != fingerprint or not isinstance(tier, int) or not isinstance(moment, str) or \
                not isinstance(listing, str):
            raise ValueError("not a cursor of this search")
        return cls(tier, moment, listing)

    def after(self, other: Key) -> bool:
        """Whether this key is ranked after `other`."""
        if self.tier != other.tier:
            return self.tier > other.tier
        if self.last_updated != other.last_updated:
            return self.last_updated < other.last_updated
        return self.listing_id > other.listing_id


def fingerprint(query: str, filters: str) -> str:
    """What a search is, for its cursors: the query's words, the query compared whole, and the filters."""
    return hashlib.sha256(f"{' '.join(words(query))}|{normal(query)}|{filters}".encode()).hexdigest()[:16]


def ranked(candidates: list[Candidate], query: str) -> list[tuple[Key, Candidate]]:
    asked = words(query)
    keyed = [(c.rank(normal(query), asked), c) for c in candidates]
    keyed.sort(key=lambda kc: kc[0].listing_id)
    keyed.sort(key=lambda kc: kc[0].last_updated, reverse=True)
    keyed.sort(key=lambda kc: kc[0].tier)
    return keyed


# -- the two engines' SQL -------------------------------------------------------------------------------------

SQLITE_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS catalog_search USING fts5(listing_id UNINDEXED, last_updated UNINDEXED, "
    "title UNINDEXED, tags UNINDEXED, head, body, tokenize = 'unicode61')",
    # The FTS row of each listing (FTS5 finds a row by its rowid only); a newer change gets a higher rowid.
    "CREATE TABLE IF NOT EXISTS catalog_search_rows (listing_id TEXT PRIMARY KEY, row INTEGER NOT NULL)",
)
POSTGRES_TABLES = (
    "CREATE TABLE IF NOT EXISTS catalog_search (listing_id TEXT PRIMARY KEY, last_updated TEXT NOT NULL, "
    "title TEXT NOT NULL, tags TEXT NOT NULL, head TEXT NOT NULL, body TEXT NOT NULL, "
    "document tsvector GENERATED ALWAYS AS (to_tsvector('simple', head || ' ' || body)) STORED)",
    "CREATE INDEX IF NOT EXISTS catalog_search_document ON catalog_search USING GIN (document)",
    "CREATE INDEX IF NOT EXISTS catalog_search_order ON catalog_search (last_updated DESC, listing_id)",
)


def sqlite_match(query_words: list[str]) -> str:
    """An FTS5 expression: every word (each a run of letters and digits, quoted), in any indexed column."""
    return " ".join(f'"{w}"' for w in query_words)
