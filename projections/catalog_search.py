"""The catalog's search index and its filter terms: written by `CatalogProjection` in the same transaction as the
listing's row, read by `GET /discovery/search` and the filtered `GET /discovery/resources` (docs/discovery.md).

Matching is the store's own full-text engine: SQLite FTS5 on the embedded default, PostgreSQL `tsvector` with a
GIN index and `websearch_to_tsquery` on production. Both are given the same words: a listing's text is split into
words here (`words`), once, so the two engines index, and a query matches, exactly the same words. The ranking is
three tiers, each one query of the engine in the index's own order (`seq`, the newest write first), so a page
costs the same however many listings match: `TIERS`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

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
    """What the index holds for one listing: `exact`, one token per tag and for the whole title (the exact-match
    tier); `head`, the words of the title and tags; `body`, the words of the description, the URL's host and path,
    the provider's name and the input and output schemas' field names."""

    exact: str
    head: str
    body: str

    def row(self) -> tuple[str, str, str]:
        return self.exact, self.head, self.body


def exact_token(text: str) -> str:
    """One word standing for a whole tag, title or query (compared lowercased, spacing collapsed)."""
    return "x" + hashlib.sha256(normal(text).encode()).hexdigest()[:24]


def document(item: dict[str, Any]) -> Document:
    """The index's document of a served catalog item (so what a reader cannot see, nobody can search for)."""
    metadata, provider = item.get("metadata") or {}, item.get("provider") or {}
    title, tags = str(metadata.get("title") or ""), [str(t) for t in metadata.get("tags") or ()]
    url = urlsplit(item["resource"])
    names: list[str] = []
    tools: list[str] = []  # an MCP tool's name: searched as its title is
    for accept in item.get("accepts") or ():
        schema = accept.get("outputSchema") or {}
        given = schema.get("input") or {}
        names.extend(given.get("queryParams") or {})
        names.extend(_field_names(given.get("inputSchema")))
        names.extend(_field_names((schema.get("output") or {}).get("schema")))
        if given.get("toolName"):
            tools.append(str(given["toolName"]))
    tools = list(dict.fromkeys(tools))
    body = [str(metadata.get("description") or ""), url.hostname or "", url.path, str(provider.get("name") or ""),
            *names[:MAX_SCHEMA_NAMES]]
    exact = dict.fromkeys(exact_token(t) for t in [title, *tags, *tools] if normal(t))
    return Document(" ".join(exact), " ".join(words(" ".join([title, *tags, *tools]))),
                    " ".join(words(" ".join(body))))


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

# 0: the query is one of the tags or the whole title; 1: every word is in the title or tags; 2: every word is found,
# some elsewhere. Within a tier, the most recently written listing first (`seq`).
TIERS = (0, 1, 2)


MAX_SEQ = 2**63 - 1  # a `seq` is a positive 64-bit integer on both stores
MAX_CURSOR_CHARS = 512
MAC_BYTES = 16


class CursorError(ValueError):
    """A cursor that is not one this server made for this search (forged, altered, truncated, of another search)."""


@dataclass(frozen=True)
class Key:
    """A place in a search's ranking; as a cursor (`token`), tied to the search it came from (`fingerprint`) and
    MAC'd with the server's key, so a reader can hand it back but neither read a meaning into it nor forge one."""

    tier: int
    seq: int

    def token(self, fingerprint: str, secret: bytes) -> str:
        text = json.dumps([self.tier, self.seq, fingerprint], separators=(",", ":")).encode()
        return f"{_b64(text)}.{_b64(_mac(secret, text))}"

    @classmethod
    def from_token(cls, token: Any, fingerprint: str, secret: bytes) -> Key:
        """The place a cursor names; CursorError when its MAC does not hold, or it is not a place of this search:
        the one rule of the API and the console."""
        if not isinstance(token, str) or not 1 <= len(token) <= MAX_CURSOR_CHARS:
            raise CursorError(f"1-{MAX_CURSOR_CHARS} characters, as given")
        body, _, mac = token.partition(".")
        try:
            text, sent = _unb64(body), _unb64(mac)
        except (ValueError, binascii.Error):
            raise CursorError("not a cursor") from None
        if not hmac.compare_digest(sent, _mac(secret, text)):
            raise CursorError("not a cursor this server made (use pagination.cursor as given)")
        try:
            tier, seq, of = json.loads(text)
        except (ValueError, TypeError):
            raise CursorError("not a cursor") from None
        if of != fingerprint:
            raise CursorError("not a cursor of this search (send the same query and filters)")
        if not (_integer(tier) and tier in TIERS and _integer(seq) and 0 <= seq <= MAX_SEQ):
            raise CursorError("not a cursor")  # a key of ours never signs one: checked all the same
        return cls(tier, seq)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mac(secret: bytes, text: bytes) -> bytes:
    return hmac.new(secret, b"paywarden search cursor " + text, hashlib.sha256).digest()[:MAC_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    if not text or not text.isascii():
        raise ValueError("empty")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fingerprint(query: str, filters: str) -> str:
    """What a search is, for its cursors: the query's words, the query compared whole, and the filters."""
    return hashlib.sha256(f"{' '.join(words(query))}|{normal(query)}|{filters}".encode()).hexdigest()[:16]


# -- the two engines' SQL -------------------------------------------------------------------------------------

SQLITE_TABLES = (
    # Three kinds of token, apart so that no tier needs a column filter (FTS5 reads a filtered column's positions
    # out of every match of the word, whatever the column): `x…` exact tokens, `h<word>` the title's and tags'
    # words, `w<word>` every word. A query's words are prefixed alike, so nothing typed matches another kind.
    "CREATE VIRTUAL TABLE IF NOT EXISTS catalog_search USING fts5(listing_id UNINDEXED, last_updated UNINDEXED, "
    "exact, head, every, tokenize = 'unicode61')",
    # The FTS row of each listing (FTS5 finds a row by its rowid only). Each write takes the next lower rowid, so
    # the index's ascending order is the newest write first; a listing's `seq` is minus its rowid.
    "CREATE TABLE IF NOT EXISTS catalog_search_rows (listing_id TEXT PRIMARY KEY, row INTEGER NOT NULL)",
)


def sqlite_row(doc: Document) -> tuple[str, str, str]:
    """A document as SQLite's index holds it (`SQLITE_TABLES`)."""
    head = doc.head.split()
    return doc.exact, " ".join(f"h{w}" for w in head), " ".join(f"w{w}" for w in dict.fromkeys(
        [*head, *doc.body.split()]))


def sqlite_match(tier: int, query: str) -> str:
    """The FTS5 expression of a tier: every word quoted (each a run of letters and digits)."""
    asked, exact = words(query), f'"{exact_token(query)}"'
    head, every = " ".join(f'"h{w}"' for w in asked), " ".join(f'"w{w}"' for w in asked)
    return (exact, f"({head}) NOT {exact}", f"({every}) NOT ({head}) NOT {exact}")[tier]


POSTGRES_TABLES = (
    "CREATE TABLE IF NOT EXISTS catalog_search (listing_id TEXT PRIMARY KEY, last_updated TEXT NOT NULL, "
    "exact TEXT NOT NULL, head TEXT NOT NULL, body TEXT NOT NULL, "
    "exact_vector tsvector GENERATED ALWAYS AS (to_tsvector('simple', exact)) STORED, "
    "head_vector tsvector GENERATED ALWAYS AS (to_tsvector('simple', head)) STORED, "
    "document tsvector GENERATED ALWAYS AS (to_tsvector('simple', head || ' ' || body)) STORED)",
    "CREATE INDEX IF NOT EXISTS catalog_search_document ON catalog_search USING GIN (document)",
    "CREATE INDEX IF NOT EXISTS catalog_search_head ON catalog_search USING GIN (head_vector)",
    "CREATE INDEX IF NOT EXISTS catalog_search_exact ON catalog_search USING GIN (exact_vector)",
    # Each listing's `seq`, as SQLite's FTS rowid is: each write takes the next number (the largest plus one).
    "CREATE TABLE IF NOT EXISTS catalog_search_rows (listing_id TEXT PRIMARY KEY, row BIGINT NOT NULL UNIQUE)",
)


def postgres_match(tier: int) -> str:
    """The tsquery condition of a tier on `x`; its parameters are `postgres_params(tier, query)`."""
    return ("x.exact_vector @@ to_tsquery('simple', ?)",
            "x.head_vector @@ websearch_to_tsquery('simple', ?) AND NOT x.exact_vector @@ to_tsquery('simple', ?)",
            "x.document @@ websearch_to_tsquery('simple', ?) AND NOT x.head_vector @@ websearch_to_tsquery("
            "'simple', ?) AND NOT x.exact_vector @@ to_tsquery('simple', ?)")[tier]


def postgres_params(tier: int, query: str) -> tuple[str, ...]:
    every, exact = " ".join(words(query)), exact_token(query)
    return ((exact,), (every, exact), (every, every, exact))[tier]
