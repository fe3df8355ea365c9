"""ProxyServices on a real PostgreSQL: slug claims collide in the event store, two applications racing for one
slug both end with distinct slugs, and a base-URL edit frees the old slug in the same transaction."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from application.proxy_services import ProxyServices
from domain.networks import DEVNET, SCHEME_EXACT
from interfaces.adapters.postgres import postgres_env

pytestmark = pytest.mark.postgres


class Directory:
    def get_merchant(self, name: str):
        class M:
            domains = {"weather.co.uk": {"verified": True}, "climate.org": {"verified": True}}
            capabilities = {(DEVNET.caip2, SCHEME_EXACT, DEVNET.usdc_mint)}
        return M()


def app(url: str) -> ProxyServices:
    return ProxyServices(postgres_env(url), merchants=Directory(), sandbox=False)


def test_twelve_services_created_at_once_on_one_host_get_twelve_distinct_slugs(postgres_url):
    apps = [app(postgres_url) for _ in range(3)]
    try:
        with ThreadPoolExecutor(6) as pool:
            created = list(pool.map(lambda i: apps[i % 3].create_service("acme", "☂", "weather.co.uk",
                                                                         subdomain="api"), range(12)))
        slugs = sorted(s.slug for s in created)
        assert len(set(slugs)) == 12
        assert "weather" in slugs and "api-weather-co-uk" in slugs and "api-weather-co-uk-11" in slugs
        assert {s.id for s in apps[0].list_services("acme")} == {s.id for s in created}
        for service in created:
            assert apps[1].get_by_slug(service.slug).id == service.id
    finally:
        for a in apps:
            a.close()


def test_a_base_url_edit_releases_the_old_slug_for_the_next_service(postgres_url):
    services = app(postgres_url)
    try:
        first = services.create_service("acme", "☂", "weather.co.uk")  # a slug from the host
        services.change_base_url("acme", str(first.id), "climate.org")
        assert services.get_by_slug("weather") is None
        assert services.create_service("acme", "☁", "weather.co.uk").slug == "weather"
    finally:
        services.close()
