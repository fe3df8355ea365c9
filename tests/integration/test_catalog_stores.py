"""The discovery read side on the production stores: Listings and the catalog on a real PostgreSQL, the query
cache on a real Redis. The same story as on SQLite: exactly once, and equal to a rebuild from the event store."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from application.listings import Listings, VerifiedPayment
from application.ports import GatewayRoute
from interfaces.adapters.redis import RedisQueryCache
from interfaces.config import Config
from interfaces.container import build_view, store_env
from projections.catalog import CatalogProjection, PostgresCatalogView, SqliteCatalogView, list_resources, rebuild
from projections.runner import catch_up

NETWORKS = ["solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"]


# What each URL's proxy route declares: `payment` sets it, so every listing here is declared by its merchant (as
# one paid through the proxy is) and shows the title and tags each payment carries.
ROUTES: dict[str, dict] = {}


class Anything:
    def resolve(self, hostname: str) -> list[str]:
        return ["93.184.216.34"]

    def list_verified_domains(self, merchant_id: str) -> tuple[str, ...]:
        return ("example.com",)

    def find_gateway_route(self, url: str, method: str) -> GatewayRoute | None:
        info = ROUTES.get(url)
        return GatewayRoute(owner="merchant:m1", resource=url, info=info) if info is not None else None

    def get_discovery_enabled(self, merchant_id: str) -> bool:
        return True

    def get_received(self, payment_id):
        return None


def payment(path: str, title: str, tags: list[str], kind: str = "http", network: str = "solana:devnet",
            pay_to: str = "WALLET") -> VerifiedPayment:
    info = {"title": title, "tags": tags, "type": kind, "provider": {"name": "Acme", "contact": "ops@acme.test"}}
    ROUTES[f"https://api.example.com/{path}"] = info
    return VerifiedPayment(uuid4(), "merchant:m1", {"bazaar": {"info": info}},
                           {"url": f"https://api.example.com/{path}"}, network, "MINT", 10_000, pay_to,
                           datetime.now(UTC))


class Crash(Exception):
    pass


class CrashingCatalogProjection(CatalogProjection):
    def process_event(self, domain_event, tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("DELETE FROM catalog_listings")
            raise Crash


@pytest.mark.postgres
def test_listings_and_the_catalog_on_postgresql_apply_each_event_once(postgres_url, tmp_path):
    config = Config(database_url=postgres_url, data_dir=tmp_path)
    listings = Listings(store_env(config, "listings"), payments=Anything(), discovery=Anything(),
                        resolver=Anything(), production=True, gateways=Anything())
    view = build_view(config, "catalog", SqliteCatalogView)
    try:
        assert isinstance(view, PostgresCatalogView)
        steps = [("a", ["weather", "forecast"], "http"), ("b", ["weather"], "grpc"), ("a", ["weather"], "http"),
                 ("c", ["maps"], "websocket")]
        for step, (path, tags, kind) in enumerate(steps[:2]):
            listings.register_from_payment(payment(path, f"{path}{step}", tags, kind))
        assert catch_up(listings, CatalogProjection(view)) == 4  # each registration and its URL's claim
        for step, (path, tags, kind) in enumerate(steps[2:], start=2):
            listings.register_from_payment(payment(path, f"{path}{step}", tags, kind))
        with pytest.raises(Crash):
            catch_up(listings, CrashingCatalogProjection(view))
        assert catch_up(listings, CatalogProjection(view)) == 3
        assert catch_up(listings, CatalogProjection(view)) == 0
        page = list_resources(view, tags=("weather",), limit=1)
        assert page.total == 2 and len(page.items) == 1 and page.items[0]["metadata"]["title"] == "a2"
        assert list_resources(view, kind="websocket").items[0]["resource"] == "https://api.example.com/c"
        assert "ops@acme.test" not in str(list_resources(view).items)
        fresh = build_view(Config(data_dir=tmp_path / "audit"), "catalog", SqliteCatalogView)
        assert rebuild(listings, fresh) == 7
        assert fresh.get_rows() == view.get_rows() and len(view.get_rows()) == 3
    finally:
        listings.close()
        view.datastore.close()


@pytest.mark.redis
def test_the_redis_query_cache_is_shared_and_expires_after_60_seconds(redis_url):
    from interfaces.adapters.redis import redis_client

    client = redis_client(redis_url)
    first, second = RedisQueryCache(client), RedisQueryCache(redis_client(redis_url))
    key = f"test|{time.time()}"
    assert first.get(key) is None
    first.put(key, {"items": [1], "pagination": {"total": 1}})
    assert second.get(key) == {"items": [1], "pagination": {"total": 1}}
    assert 59 <= client.ttl("paywarden:discovery:" + key) <= 60


def test_a_cache_whose_redis_is_down_answers_misses():
    from interfaces.adapters.redis import redis_client

    cache = RedisQueryCache(redis_client("redis://127.0.0.1:1/0", timeout_seconds=0.2))
    cache.put("k", {"x": 1})
    assert cache.get("k") is None


@pytest.fixture(params=["embedded", "postgres"])
def catalog_config(request, tmp_path):
    if request.param == "postgres":
        return Config(database_url=request.getfixturevalue("postgres_url"), data_dir=tmp_path)
    return Config(data_dir=tmp_path)


def expected_page(rows, kind, tags, limit, offset, terms=()):
    """What a query must answer, computed from every row the slow way."""
    def has(item, term):
        field, _, value = term.partition(":")
        if field == "extension":
            return value == "bazaar"  # every listing carries the extension it was registered by
        return any(a[field] == value for a in item["accepts"])

    kept = [r for r in rows if (not kind or r[3] == kind) and set(tags) <= set(r[7])
            and all(has(r[6], t) for t in terms)]
    kept.sort(key=lambda r: r[0])
    kept.sort(key=lambda r: r[4], reverse=True)
    return [r[6] for r in kept[offset:offset + limit]], len(kept)


def test_every_filter_answers_the_same_pages_and_totals_as_counting_the_rows(catalog_config):
    import random

    from domain.listing import listing_id

    rng = random.Random(16)
    listings = Listings(store_env(catalog_config, "listings"), payments=Anything(), discovery=Anything(),
                        resolver=Anything(), production=True, gateways=Anything())
    view = build_view(catalog_config, "catalog", SqliteCatalogView)
    vocabulary = ["weather", "maps", "ai", "news"]
    try:
        # Registrations, then updates that move listings between types and tags, then a delisting.
        for step in range(40):
            path = f"r{rng.randrange(18)}"
            tags = rng.sample(vocabulary, rng.randint(0, 3))
            listings.register_from_payment(payment(path, f"{path} {step}", tags, rng.choice(["http", "grpc",
                                                                                              "websocket"]),
                                                   rng.choice(NETWORKS), rng.choice(["W1", "W2"])))
        listings.delist(listing_id("https://api.example.com/r3", "GET"), "merchant:m1")
        catch_up(listings, CatalogProjection(view))

        def check(catalog):
            rows = catalog.get_rows()
            assert 10 < len(rows) < 18
            pairs = [(a, b) for a in vocabulary for b in vocabulary if a != b]  # both orders
            for kind in (None, "http", "grpc", "websocket"):
                for tags in [(), *((t,) for t in vocabulary), *pairs, ("ai", "news", "maps")]:
                    total = expected_page(rows, kind, tags, 3, 0)[1]
                    # Near the start, past the middle (read from the index's other end), the last pages, beyond.
                    for offset in sorted({0, 2, 7, 30, total // 2, max(total - 4, 0), max(total - 3, 0),
                                          max(total - 1, 0), total}):
                        page = list_resources(catalog, kind=kind, tags=tags, limit=3, offset=offset)
                        assert (page.items, page.total) == expected_page(rows, kind, tags, 3, offset), (kind, tags)
                # The filter terms, alone, together and with tags (the rarest one's order drives the page).
                for terms in [(f"network:{NETWORKS[1]}",), ("payTo:W2",), (f"network:{NETWORKS[0]}", "payTo:W1"),
                              ("scheme:exact", "extension:bazaar"), ("extension:other",)]:
                    for tags in [(), ("weather",), ("ai", "news")]:
                        total = expected_page(rows, kind, tags, 3, 0, terms)[1]
                        for offset in sorted({0, 2, total // 2, max(total - 3, 0), max(total - 1, 0), total}):
                            page = list_resources(catalog, kind=kind, tags=tags, limit=3, offset=offset, terms=terms)
                            assert (page.items, page.total) == expected_page(rows, kind, tags, 3, offset, terms), (
                                kind, tags, terms)

        check(view)
        # A catalog built before the order and count tables existed fills them once, from its rows.
        with view.datastore.transaction(commit=True) as c:
            c.execute("DROP TABLE catalog_counts")
            c.execute("DROP TABLE catalog_tag_order")
        view.datastore.close()
        migrated = build_view(catalog_config, "catalog", SqliteCatalogView)
        check(migrated)
        migrated.datastore.close()
        check(build_view(catalog_config, "catalog", SqliteCatalogView))  # and only once
        # A catalog kept before the pairs of tags were (no pair counts, no pair order), and one that kept their
        # counts only (the marker `kept:pairs`): the pairs are filled once, counted once.
        for counts_kept in (False, True):
            again = build_view(catalog_config, "catalog", SqliteCatalogView)
            with again.datastore.transaction(commit=True) as c:
                if not counts_kept:
                    c.execute(again.sql("DELETE FROM catalog_counts WHERE filter LIKE ? OR filter LIKE ?"),
                              ("tags:%", "% tags:%"))
                c.execute(again.sql("DELETE FROM catalog_pair_order"))
                c.execute(again.sql("UPDATE catalog_counts SET filter = ? WHERE filter = ?"),
                          ("kept:pairs", "kept:pair order"))
            again.datastore.close()
            check(build_view(catalog_config, "catalog", SqliteCatalogView))
    finally:
        listings.close()
