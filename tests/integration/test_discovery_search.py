"""The catalog's filters and its full-text search on both stores: SQLite (FTS5) and PostgreSQL (tsvector, GIN,
websearch_to_tsquery) answer the same fixed listings with the same ranking; the filters, paging, the cursor, the
paging across the ranking's tiers, the 400s and the 60 s cache over HTTP."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from falcon import testing

from application.listings import Listings
from domain.networks import DEVNET, MAINNET
from interfaces.adapters.memory import TtlCache
from interfaces.config import Config
from interfaces.container import build_view, store_env
from interfaces.http.facilitator.app import create_app
from interfaces.wiring import api_collaborators
from projections.catalog import (
    CatalogProjection,
    PostgresCatalogView,
    SqliteCatalogView,
    list_resources,
    rebuild,
    search_resources,
)
from projections.runner import catch_up
from tests.conftest import make_gateway
from tests.discovery_listings import LISTINGS, SEARCHES, WALLET_A, WALLET_B, seed, url
from tests.integration.test_catalog_stores import Anything
from tests.integration.test_discovery import Clock

NAMES = {resource: name for name, (resource, *_) in LISTINGS.items()}


def names(items: list[dict[str, Any]]) -> list[str]:
    return [NAMES[item["resource"]] for item in items]


@pytest.fixture(params=["embedded", "postgres"])
def catalog(request, tmp_path):
    """The fixed listings, projected into a catalog on either store."""
    config = Config(data_dir=tmp_path)
    if request.param == "postgres":
        config = Config(database_url=request.getfixturevalue("postgres_url"), data_dir=tmp_path)
    listings = Listings(store_env(config, "listings"), payments=Anything(), discovery=Anything(),
                        resolver=Anything(), production=True)
    view = build_view(config, "catalog", SqliteCatalogView)
    seed(listings)
    catch_up(listings, CatalogProjection(view))
    yield view, listings, tmp_path
    listings.close()
    view.datastore.close()


def test_every_search_answers_its_whole_ranking(catalog):
    view, _, _ = catalog
    for query, expected in SEARCHES.items():
        page = search_resources(view, query, limit=100)
        assert (names(page.items), page.cursor, page.partial) == (expected, None, False), query


@pytest.mark.postgres
def test_sqlite_and_postgresql_rank_the_same_listings_the_same_way(tmp_path, postgres_url):
    answers = []
    for config in (Config(data_dir=tmp_path / "sqlite"), Config(database_url=postgres_url, data_dir=tmp_path)):
        listings = Listings(store_env(config, "listings"), payments=Anything(), discovery=Anything(),
                            resolver=Anything(), production=True)
        view = build_view(config, "catalog", SqliteCatalogView)
        try:
            seed(listings)
            catch_up(listings, CatalogProjection(view))
            answers.append({query: [item["resource"] for item in search_resources(view, query, limit=100).items]
                            for query in [*SEARCHES, "weather radar", "api", "v1", "the world"]})
        finally:
            listings.close()
            view.datastore.close()
    assert answers[0] == answers[1] and answers[0]["weather"] == [url(n) for n in SEARCHES["weather"]]


def test_the_filters_hold_alone_and_together_in_the_list_and_the_search(catalog):
    view, _, _ = catalog
    devnet, mainnet = f"network:{DEVNET.caip2}", f"network:{MAINNET.caip2}"
    cases = {
        (devnet,): ["forecast", "quote", "conditions", "headlines"],
        (mainnet,): ["forecast", "translate", "tiles"],  # the forecast accepts both since its second payment
        (f"payTo:{WALLET_B}",): ["quote", "headlines", "tiles"],
        (mainnet, f"payTo:{WALLET_A}"): ["forecast", "translate"],
        ("scheme:exact",): ["forecast", "quote", "translate", "conditions", "headlines", "tiles"],
        ("scheme:upto",): [],
        ("extension:bazaar",): ["forecast", "quote", "translate", "conditions", "headlines", "tiles"],
        ("extension:bazaar", "extension:other"): [],
        ("network:solana:unknown",): [],
    }
    for terms, expected in cases.items():
        page = list_resources(view, terms=terms, limit=100)
        assert (names(page.items), page.total) == (expected, len(expected)), terms
        for offset in range(len(expected) + 1):  # every page of one, from either end of the index
            assert names(list_resources(view, terms=terms, limit=1, offset=offset).items) == expected[offset:offset + 1]
    assert names(list_resources(view, kind="websocket", terms=(f"payTo:{WALLET_B}",)).items) == ["headlines"]
    assert names(list_resources(view, tags=("weather",), terms=(mainnet,)).items) == ["forecast"]
    assert list_resources(view, kind="grpc", terms=(devnet,)).total == 0
    assert names(search_resources(view, "weather", terms=(mainnet,)).items) == ["forecast", "tiles"]
    assert names(search_resources(view, "weather", kind="websocket").items) == ["headlines"]
    assert names(search_resources(view, "weather", tags=("climate",)).items) == ["conditions"]
    assert names(search_resources(view, "example", terms=(f"payTo:{WALLET_B}", devnet)).items) == [
        "quote", "headlines"]


def test_pages_of_a_search_follow_the_ranking_without_gaps_or_repeats(catalog):
    view, _, _ = catalog
    seen, after = [], None
    while True:
        page = search_resources(view, "example", limit=2, after=after)
        seen += names(page.items)
        if page.cursor is None:
            break
        after = page.cursor
    assert seen == SEARCHES["example"]


def test_pages_of_one_cross_the_tiers_with_the_filters_kept(catalog):
    view, _, _ = catalog
    for terms, expected in [((), SEARCHES["weather"]), ((f"network:{DEVNET.caip2}",), [
            "forecast", "conditions", "headlines", "quote"])]:
        seen, after = [], None
        for _ in range(10):
            page = search_resources(view, "weather", terms=terms, limit=1, after=after)
            assert not page.partial  # never cut: every match is reachable through the cursor
            seen += names(page.items)
            if page.cursor is None:
                break
            after = page.cursor
        assert seen == expected, terms


def test_the_index_and_the_terms_are_rebuilt_equal_and_filled_once_for_an_older_catalog(catalog):
    view, listings, tmp_path = catalog
    fresh = build_view(Config(data_dir=tmp_path / "audit"), "catalog", SqliteCatalogView)
    assert rebuild(listings, fresh) > 0
    search = "SELECT * FROM catalog_search ORDER BY listing_id"
    terms = "SELECT * FROM catalog_terms ORDER BY term, listing_id"
    rebuilt, live = (fresh.rows(search), fresh.rows(terms)), (view.rows(search), view.rows(terms))
    fresh.datastore.close()
    assert rebuilt[1] == live[1] and len(live[0]) == 6
    if not isinstance(view, PostgresCatalogView):  # (PostgreSQL's is compared on PostgreSQL: test_audit_rebuild)
        assert rebuilt[0] == live[0]
    # A catalog from before the terms and the index: they are filled from its items when its view starts.
    with view.datastore.transaction(commit=True) as c:
        for statement in ("DELETE FROM catalog_terms", "DELETE FROM catalog_search",
                          "DELETE FROM catalog_counts WHERE filter LIKE 'term:%' OR filter LIKE '% term:%' "
                          "OR filter LIKE 'kept:terms%'"):
            c.execute(statement)
    assert view.rows(search) == []
    view.create_table()
    assert (view.rows(search), view.rows(terms)) == live
    for query, expected in SEARCHES.items():
        assert names(search_resources(view, query, limit=100).items) == expected, query
    assert list_resources(view, terms=(f"payTo:{WALLET_B}",)).total == 3


# -- over HTTP ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """The API over the fixed listings (embedded stores), its query cache on a clock the test moves."""
    from interfaces.sandbox.chain import Sandbox

    tmp_path = tmp_path_factory.mktemp("api")
    gateway = make_gateway(tmp_path, Sandbox(), resolver=Anything(), rate_limit_per_ip="100000/minute")
    seed(gateway.container.listings)
    catch_up(gateway.container.listings, CatalogProjection(gateway.container.catalog))
    clock = Clock()
    gateway.container.discovery_cache = TtlCache(clock=clock)
    client = testing.TestClient(create_app(api_collaborators(gateway.container)))
    yield client, clock, gateway
    gateway.container.close()


def test_the_search_answers_the_sdks_shape_and_pages_with_an_opaque_cursor(api):
    client, _, _ = api
    first = client.simulate_get("/discovery/search", params={"query": "example", "limit": "4"})
    assert first.status_code == 200 and first.headers["cache-control"] == "public, max-age=60"
    body = first.json
    assert set(body) == {"x402Version", "resources", "partialResults", "pagination"}
    assert body["x402Version"] == 2 and body["partialResults"] is False
    assert names(body["resources"]) == SEARCHES["example"][:4] and body["pagination"]["limit"] == 4
    rest = client.simulate_get("/discovery/search", params={"query": "example", "limit": "4",
                                                            "cursor": body["pagination"]["cursor"]}).json
    assert names(rest["resources"]) == SEARCHES["example"][4:] and rest["pagination"]["cursor"] is None
    # A cursor belongs to its query and filters.
    other = client.simulate_get("/discovery/search", params={"query": "weather",
                                                             "cursor": body["pagination"]["cursor"]})
    assert other.status_code == 400 and other.json == {
        "error": "invalid_cursor", "message": "cursor: not a cursor of this search (send the same query and filters)"}
    assert client.simulate_get("/discovery/search", params={"query": "example", "network": DEVNET.caip2,
                                                            "cursor": body["pagination"]["cursor"]}).status_code == 400
    assert client.simulate_get("/discovery/search", params={"query": "example",
                                                            "cursor": "bm90IGpzb24"}).status_code == 400


@pytest.mark.parametrize("params, message", [
    ({}, "query: Missing data for required field."),
    ({"query": ""}, "query: empty: give at least one word (letters or digits)"),
    ({"query": "  -- !! "}, "query: empty: give at least one word (letters or digits)"),
    ({"query": "w" * 201}, "query: Longer than maximum length 200."),
    ({"query": " ".join(f"w{i}" for i in range(11))}, "query: at most 10 words"),
    ({"query": "weather", "limit": "0"}, "limit: Must be greater than or equal to 1 and less than or equal to 100."),
    ({"query": "weather", "offset": "5"}, "offset: Unknown field."),
    ({"query": "weather", "network": "devnet"}, "network: a CAIP-2 network id, <namespace>:<reference>"),
])
def test_a_bad_search_is_a_400_that_says_why(api, params, message):
    client, _, _ = api
    answer = client.simulate_get("/discovery/search", params=params)
    assert answer.status_code == 400 and answer.json == {"error": "invalid_query", "message": message}


@pytest.mark.parametrize("params, message", [
    ({"pay_to": WALLET_A}, "pay_to: Unknown field."),
    ({"q": "weather"}, "q: Unknown field."),
    ({"payTo": "not/an/address"}, "payTo: an address: 1-128 letters and digits"),
    ({"scheme": "Exact!"}, "scheme: a scheme name: 1-32 of a-z 0-9 _ -"),
    ({"extensions": "bazaar,a b"}, "extensions: at most 10 keys of 1-64 letters, digits, '.', '_' or '-'"),
])
def test_an_unknown_or_bad_list_parameter_is_a_400_naming_it(api, params, message):
    client, _, _ = api
    answer = client.simulate_get("/discovery/resources", params=params)
    assert answer.status_code == 400 and answer.json == {"error": "invalid_query", "message": message}


def test_the_list_filters_over_http_and_each_answer_is_cached_60_seconds(api):
    client, clock, gateway = api
    clock.now += 120

    def listed(**params: str) -> list[str]:
        answer = client.simulate_get("/discovery/resources", params=params)
        assert answer.status_code == 200, answer.json
        return names(answer.json["items"])

    assert listed(network=MAINNET.caip2, payTo=WALLET_A) == ["forecast", "translate"]
    assert listed(network=DEVNET.caip2, scheme="exact", extensions="bazaar", type="websocket") == ["headlines"]
    assert listed(network=DEVNET.caip2, tags="weather") == ["forecast", "headlines"]
    searched = client.simulate_get("/discovery/search", params={"query": "translated text"}).json
    assert names(searched["resources"]) == ["translate"]
    # The translation's owner is paid again with new words, and confirms them: both answers are the cached ones
    # for 60 s, then new.
    from tests.discovery_listings import pay_again

    info = LISTINGS["translate"][2]
    pay_again(gateway.container.listings, 50, "translate", {**info, "description": "Interprets speech."}, 60)
    catch_up(gateway.container.listings, CatalogProjection(gateway.container.catalog))
    assert names(client.simulate_get("/discovery/search", params={"query": "translated text"}).json[
        "resources"]) == ["translate"]
    assert listed(network=MAINNET.caip2, payTo=WALLET_A) == ["forecast", "translate"]
    clock.now += 61
    assert client.simulate_get("/discovery/search", params={"query": "interprets speech"}).json["resources"][0][
        "resource"] == url("translate")
    assert listed(network=MAINNET.caip2, payTo=WALLET_A) == ["translate", "forecast"]
    assert names(client.simulate_get("/discovery/search", params={"query": "Between languages"}).json[
        "resources"]) == []


def test_the_consoles_discovery_page_searches_the_catalog_and_pages_its_results(api):
    from tests.integration.console_helpers import add_owner, console_client
    from tests.integration.test_console_pages import log_in

    _, _, gateway = api
    add_owner(gateway.container, "acme", "owner@acme.test")
    client = console_client(gateway.container)
    cookie, _ = log_in(client, "owner@acme.test")

    def page(**params: str) -> str:
        answer = client.simulate_get("/discovery", params=params, cookies={"pw_console_session": cookie})
        assert answer.status_code == 200
        return answer.text

    def shown(text: str) -> list[str]:
        return [NAMES[u] for u in re.findall(r'<td class="mono">GET (https?://[^<]+)</td>', text)]

    blank = page()
    assert '<input type="search" id="query" name="query" value=""' in blank and "search-results" not in blank
    # (Queries the listing another test of this module changes does not answer.)
    first = page(query="weather")
    assert 'value="weather"' in first and shown(first) == SEARCHES["weather"] and "search-next" not in first
    with pytest.MonkeyPatch.context() as patch:  # pages of two
        patch.setattr("interfaces.http.console.pages.SEARCH_PAGE", 2)
        seen, text = [], page(query="weather")
        while True:
            seen += shown(text)
            found = re.search(r'href="/discovery\?query=weather&amp;cursor=([^"]+)" id="search-next"', text)
            if found is None:
                break
            text = page(query="weather", cursor=html.unescape(found.group(1)))
        assert seen == SEARCHES["weather"]
    assert "Nothing in the catalog matches “xyzzy nonsense”" in page(query="xyzzy nonsense")
    refused = page(query="-- !!")
    assert 'aria-invalid="true"' in refused and "empty: give at least one word" in refused
    refused = client.simulate_get("/discovery", params={"query": "weather", "cursor": "bm90IGEgY3Vyc29y"},
                                  cookies={"pw_console_session": cookie})
    assert refused.status_code == 400 and "invalid_cursor: cursor: not a cursor" in refused.text
