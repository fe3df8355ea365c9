"""The official x402 SDK's Bazaar client, as published (`x402.extensions.bazaar`), against a running stack
(`paywarden up`, its own API, projection worker and catalog): it lists with each filter the SDK sends (`network`,
`payTo`, `scheme`, `extensions`, `type`), pages, and searches (`GET /discovery/search`) by a word of a description,
with a filter, by cursor, and for nonsense. The listings are recorded in the stack's Listings store before it starts
(as its follower would record them from approved payments); the stack's own worker projects them."""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import httpx
import pytest
from x402.extensions.bazaar import ListDiscoveryResourcesParams, SearchDiscoveryResourcesParams, with_bazaar
from x402.http import HTTPFacilitatorClientSync
from x402.http.facilitator_client_base import FacilitatorConfig

from application.listings import Listings
from domain.networks import DEVNET, MAINNET
from interfaces.config import Config
from interfaces.container import store_env
from tests.discovery_listings import LISTINGS, SEARCHES, WALLET_A, WALLET_B, seed
from tests.e2e.conftest import start_stack
from tests.integration.test_catalog_stores import Anything

NAMES = {resource: name for name, (resource, *_) in LISTINGS.items()}


def names(resources) -> list[str]:
    return [NAMES[r.resource] for r in resources]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("discovery-stack")
    config = Config(data_dir=data_dir)
    listings = Listings(store_env(config, "listings"), payments=Anything(), discovery=Anything(),
                        resolver=Anything(), production=True)
    seed(listings)
    listings.close()
    stack = start_stack(Path(sys.executable).with_name("paywarden"), data_dir)
    try:
        catalog = store_env(config, "catalog")["SQLITE_DBNAME"]
        deadline = time.monotonic() + 60
        while not _projected(catalog):  # the stack's worker projects the listings: wait for all six
            assert time.monotonic() < deadline and stack.process.poll() is None, "the catalog was never projected"
            time.sleep(0.05)
        yield stack
    finally:
        stack.stop()


def _projected(path: str) -> bool:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM catalog_search").fetchone()[0] == 6
    except sqlite3.Error:
        return False


@pytest.fixture(scope="module")
def bazaar(stack):
    client = with_bazaar(HTTPFacilitatorClientSync(FacilitatorConfig(url=stack["base_url"])))
    return client.extensions.bazaar


def test_the_sdk_lists_with_each_filter_and_pages(bazaar):
    def listed(**params) -> list[str]:
        return names(bazaar.list_resources(ListDiscoveryResourcesParams(**params)).items)

    everything = bazaar.list_resources(ListDiscoveryResourcesParams(limit=100))
    assert everything.pagination.total == 6 and len(everything.items) == 6
    assert listed(network=DEVNET.caip2) == ["forecast", "quote", "conditions", "headlines"]
    assert listed(network=MAINNET.caip2) == ["forecast", "translate", "tiles"]
    assert listed(pay_to=WALLET_B) == ["quote", "headlines", "tiles"]
    assert listed(scheme="exact", limit=100) == names(everything.items)
    assert listed(scheme="upto") == []
    assert listed(extensions="bazaar", limit=100) == names(everything.items)
    assert listed(type="websocket", network=DEVNET.caip2, pay_to=WALLET_B) == ["headlines"]
    # Paging: pages of two, the filter kept, the total the filter's.
    pages = [bazaar.list_resources(ListDiscoveryResourcesParams(network=DEVNET.caip2, limit=2, offset=offset))
             for offset in (0, 2, 4)]
    assert [names(p.items) for p in pages] == [["forecast", "quote"], ["conditions", "headlines"], []]
    assert {p.pagination.total for p in pages} == {4}
    assert pages[1].items[0].accepts[0]["network"] == DEVNET.caip2


def test_the_sdk_searches_by_a_word_of_a_description_pages_and_finds_nothing_for_nonsense(bazaar):
    found = bazaar.search(SearchDiscoveryResourcesParams(query="radar"))  # only the tiles' description has it
    assert names(found.resources) == ["tiles"] and found.partial_results is False
    assert found.pagination is not None and found.pagination.cursor is None
    weather = bazaar.search(SearchDiscoveryResourcesParams(query="weather", limit=2))
    seen, cursor = names(weather.resources), weather.pagination.cursor
    while cursor is not None:
        page = bazaar.search(SearchDiscoveryResourcesParams(query="weather", limit=2, cursor=cursor))
        seen, cursor = seen + names(page.resources), page.pagination.cursor
    assert seen == SEARCHES["weather"]
    assert names(bazaar.search(SearchDiscoveryResourcesParams(query="weather", network=MAINNET.caip2,
                                                              pay_to=WALLET_B)).resources) == ["tiles"]
    assert names(bazaar.search(SearchDiscoveryResourcesParams(query="weather", type="websocket", scheme="exact",
                                                              extensions="bazaar")).resources) == ["headlines"]
    assert names(bazaar.search(SearchDiscoveryResourcesParams(query="translated text",
                                                              pay_to=WALLET_A)).resources) == ["translate"]
    assert bazaar.search(SearchDiscoveryResourcesParams(query="qwxzv plumbus")).resources == []


def test_a_parameter_the_api_does_not_know_is_a_400_naming_it(stack):
    answer = httpx.get(f"{stack['base_url']}/discovery/resources", params={"payto": WALLET_A})
    assert answer.status_code == 400 and answer.json() == {"error": "invalid_query",
                                                           "message": "payto: Unknown field."}
