"""The search's cursors are opaque and tamper-proof (MAC'd with a key derived from PAYWARDEN_SECRET_KEY): a forged,
altered or foreign cursor is `400 invalid_cursor` on the API and on the console's Discovery page, and no query,
filter or cursor, however strange, reaches a 5xx. On SQLite and PostgreSQL, against the real app."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest
from falcon import testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interfaces.adapters.secret_box import SEARCH_CURSORS, derived_key
from interfaces.http.facilitator.app import create_app
from interfaces.wiring import api_collaborators
from projections.catalog import CatalogProjection
from projections.catalog_search import fingerprint
from projections.runner import catch_up
from tests.conftest import STORES, make_gateway
from tests.discovery_listings import seed
from tests.integration.test_catalog_stores import Anything

NO_FILTERS = "||"  # the filters' part of a search's fingerprint when none is given


@pytest.fixture
def searchable(tmp_path, store):
    """The fixed listings behind the real API, on the store asked for; the API's cursor key."""
    from interfaces.sandbox.chain import Sandbox

    gateway = make_gateway(tmp_path, Sandbox(), resolver=Anything(), rate_limit_per_ip="1000000/minute", **store)
    seed(gateway.container.listings)
    catch_up(gateway.container.listings, CatalogProjection(gateway.container.catalog))
    yield gateway, testing.TestClient(create_app(api_collaborators(gateway.container)))
    gateway.container.close()


def unsigned(value: Any) -> str:
    """A cursor as main made them: base64url JSON, no MAC."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def signed(value: Any, key: bytes) -> str:
    """A cursor of any content with a MAC that holds: what the type checks behind the MAC see."""
    text = json.dumps(value, separators=(",", ":")).encode()
    mac = hmac.new(key, b"paywarden search cursor " + text, hashlib.sha256).digest()[:16]
    return (base64.urlsafe_b64encode(text).decode().rstrip("=") + "."
            + base64.urlsafe_b64encode(mac).decode().rstrip("="))


@STORES
def test_forged_and_altered_cursors_are_400_invalid_cursor_and_a_real_one_pages(searchable):
    gateway, client = searchable
    key, fp = derived_key(gateway.container.config, SEARCH_CURSORS), fingerprint("example", NO_FILTERS)

    def search(cursor: str) -> testing.Result:
        return client.simulate_get("/discovery/search", params={"query": "example", "limit": "2", "cursor": cursor})

    real = client.simulate_get("/discovery/search", params={"query": "example", "limit": "2"}).json
    cursor = real["pagination"]["cursor"]
    assert search(cursor).status_code == 200 and len(search(cursor).json["resources"]) == 2
    # The forgeries (main: 500, 500 on SQLite, 200), unsigned and signed alike; truncated or altered ones.
    forged = [[1.0, 5, fp], [0, 10**30, fp], [0, -10**30, fp], [True, 5, fp], ["0", 5, fp], [0, 5.5, fp], [3, 5, fp],
              [0, 5], {"tier": 0}, None]
    assert search(unsigned([0, 5, fp])).json["error"] == "invalid_cursor"  # a well-formed place, without its MAC
    for value in forged:
        for token in (unsigned(value), signed(value, key)):
            answer = search(token)
            assert answer.status_code == 400 and answer.json["error"] == "invalid_cursor", (value, answer.json)
    body, mac = cursor.split(".")
    for token in (cursor[:-1], body, f"{body}.", f"{body}.{mac[::-1]}", signed([0, 5, fp], b"another key"),
                  "x" * 513, "é", ".", cursor + cursor):
        answer = search(token)
        assert answer.status_code == 400 and answer.json["error"] == "invalid_cursor", (token, answer.json)
    # A real cursor of another search is refused the same way.
    answer = client.simulate_get("/discovery/search", params={"query": "weather", "cursor": cursor})
    assert answer.status_code == 400 and answer.json == {
        "error": "invalid_cursor", "message": "cursor: not a cursor of this search (send the same query and filters)"}


@STORES
def test_the_consoles_discovery_page_answers_a_forged_cursor_with_400(searchable):
    from tests.integration.console_helpers import add_owner, console_client
    from tests.integration.test_console_pages import log_in

    gateway, _ = searchable
    add_owner(gateway.container, "acme-owner", "owner@acme.test")
    client = console_client(gateway.container)
    cookie, _ = log_in(client, "owner@acme.test")
    fp = fingerprint("weather", "console")
    for token in (unsigned([1.0, 5, fp]), unsigned([0, 10**30, fp]), unsigned([True, 5, fp]), "bm90IGEgY3Vyc29y"):
        answer = client.simulate_get("/discovery", params={"query": "weather", "cursor": token},
                                     cookies={"pw_console_session": cookie})
        assert answer.status_code == 400 and "invalid_cursor" in answer.text, token


# -- property: nothing a reader sends reaches a 5xx ------------------------------------------------------------

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40) | st.sampled_from(
    ["\x00", "weather\x00", "a,\x00", "%00", "\u202e", "9" * 40, "-1", "1e3", "NaN", " ", ","])
JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
                       lambda inner: st.lists(inner, max_size=4), max_leaves=6)
FILTERS = {
    "type": st.sampled_from(["http", "websocket", "grpc", "mcp", ""]) | TEXT,
    "tags": st.sampled_from(["weather", "weather,news", "maps, AI", ""]) | TEXT,
    "network": st.sampled_from(["solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", "solana:devnet"]) | TEXT,
    "payTo": st.sampled_from(["A" * 32 + "walletA1"]) | TEXT,
    "scheme": st.sampled_from(["exact"]) | TEXT,
    "extensions": st.sampled_from(["bazaar", "bazaar,other"]) | TEXT,
    "limit": st.integers(-5, 200).map(str) | TEXT,
}


def _reasonable(answer: testing.Result) -> None:
    assert answer.status_code < 500, answer.text
    if answer.status_code == 400:
        assert answer.json["error"] in ("invalid_query", "invalid_cursor"), answer.json


@STORES
def test_no_query_filter_or_cursor_reaches_a_5xx(searchable):
    gateway, client = searchable
    key = derived_key(gateway.container.config, SEARCH_CURSORS)

    @st.composite
    def cursors(draw: st.DrawFn) -> str:
        fp = fingerprint(draw(st.sampled_from(["example", "weather"])), NO_FILTERS)
        value = draw(st.one_of(JSONISH, st.tuples(JSONISH, JSONISH, st.just(fp)).map(list),
                               st.tuples(st.integers(), st.integers(), st.just(fp)).map(list)))
        return draw(st.one_of(TEXT, st.just(unsigned(value)), st.just(signed(value, key))))

    @settings(max_examples=400, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(query=st.sampled_from(["example", "weather", "weather forecast"]) | TEXT,
           cursor=st.none() | cursors(), filters=st.fixed_dictionaries({}, optional=FILTERS),
           offset=st.none() | st.integers(-5, 20_000_000).map(str) | TEXT)
    def search_and_list(query: str, cursor: str | None, filters: dict[str, str], offset: str | None) -> None:
        params = {"query": query, **filters} | ({"cursor": cursor} if cursor is not None else {})
        _reasonable(client.simulate_get("/discovery/search", params=params))
        listed = dict(filters) | ({"offset": offset} if offset is not None else {})
        _reasonable(client.simulate_get("/discovery/resources", params=listed))

    search_and_list()
