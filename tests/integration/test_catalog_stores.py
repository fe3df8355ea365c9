"""The discovery read side on the production stores: Listings and the catalog on a real PostgreSQL, the query
cache on a real Redis. The same story as on SQLite: exactly once, and equal to a rebuild from the event store."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from application.listings import Listings, VerifiedPayment
from interfaces.adapters.redis import RedisQueryCache
from interfaces.config import Config
from interfaces.container import build_view, store_env
from projections.catalog import CatalogProjection, PostgresCatalogView, SqliteCatalogView, list_resources, rebuild
from projections.runner import catch_up


class Anything:
    def resolve(self, hostname: str) -> list[str]:
        return ["93.184.216.34"]

    def get_discovery_enabled(self, merchant_id: str) -> bool:
        return True

    def get_received(self, payment_id):
        return None


def payment(path: str, title: str, tags: list[str], kind: str = "http") -> VerifiedPayment:
    info = {"title": title, "tags": tags, "type": kind, "provider": {"name": "Acme", "contact": "ops@acme.test"}}
    return VerifiedPayment(uuid4(), "merchant:m1", {"bazaar": {"info": info}},
                           {"url": f"https://api.example.com/{path}"}, "solana:devnet", "MINT", 10_000, "WALLET",
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
                        resolver=Anything(), production=True)
    view = build_view(config, "catalog", SqliteCatalogView)
    try:
        assert isinstance(view, PostgresCatalogView)
        steps = [("a", ["weather", "forecast"], "http"), ("b", ["weather"], "grpc"), ("a", ["weather"], "http"),
                 ("c", ["maps"], "websocket")]
        for step, (path, tags, kind) in enumerate(steps[:2]):
            listings.register_from_payment(payment(path, f"{path}{step}", tags, kind))
        assert catch_up(listings, CatalogProjection(view)) == 2
        for step, (path, tags, kind) in enumerate(steps[2:], start=2):
            listings.register_from_payment(payment(path, f"{path}{step}", tags, kind))
        with pytest.raises(Crash):
            catch_up(listings, CrashingCatalogProjection(view))
        assert catch_up(listings, CatalogProjection(view)) == 2
        assert catch_up(listings, CatalogProjection(view)) == 0
        page = list_resources(view, tags=("weather",), limit=1)
        assert page.total == 2 and len(page.items) == 1 and page.items[0]["metadata"]["title"] == "a2"
        assert list_resources(view, kind="websocket").items[0]["resource"] == "https://api.example.com/c"
        assert "ops@acme.test" not in str(list_resources(view).items)
        fresh = build_view(Config(data_dir=tmp_path / "audit"), "catalog", SqliteCatalogView)
        assert rebuild(listings, fresh) == 4
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
