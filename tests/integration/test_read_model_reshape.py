"""Read models of the shape an earlier release wrote, opened by this release: rebuilt from the event store, nothing
lost, before the process reads them; on SQLite and PostgreSQL. The accounts view before the console's read model
was merged into it (no labels or times, key scopes in a table of their own); the service scopes before each route
was kept whole (its terms in columns of their own), and before they kept the services' kind and priced tools."""

from __future__ import annotations

import json

from falcon import testing

from domain.merchant import key_hash
from domain.networks import DEVNET, KeyEnv
from interfaces.container import build
from interfaces.http.facilitator.app import create_app
from interfaces.wiring import api_collaborators
from projections.reshape import columns
from tests.conftest import STORES
from tests.integration.test_scoped_keys import weather_service
from tests.integration.test_scoped_keys_mcp import mcp_service

EARLIER_SHAPE = (
    "CREATE TABLE accounts_merchants (merchant_id TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL, "
    "rate_limit INTEGER, discovery_enabled BOOLEAN NOT NULL)",
    "CREATE TABLE accounts_keys (key_hash TEXT PRIMARY KEY, prefix TEXT UNIQUE NOT NULL, "
    "merchant_id TEXT NOT NULL, env TEXT NOT NULL, revoked BOOLEAN NOT NULL)",
    "CREATE TABLE accounts_capabilities (merchant_id TEXT NOT NULL, network TEXT NOT NULL, "
    "scheme TEXT NOT NULL, asset TEXT NOT NULL, PRIMARY KEY (merchant_id, network, scheme, asset))",
    "CREATE TABLE accounts_key_scopes (key_hash TEXT PRIMARY KEY, service_id TEXT NOT NULL)",
)
CURRENT = ("accounts_merchants", "accounts_keys", "accounts_capabilities", "accounts_domains", "accounts_logins")


@STORES
def test_an_accounts_view_of_the_earlier_shape_is_rebuilt_from_the_events_when_first_opened(gateway):
    container = gateway.container
    labelled, prefix = container.merchants.create_key("acme", KeyEnv.TEST, label="ci")
    merchant_id = str(container.merchants.get_merchant("acme").id)
    view, log = container.accounts, container.merchants.name
    position = view.max_tracking_id(log)
    # The earlier release's tables, level with the log (its tracking position kept): one merchant, one key.
    with view.datastore.transaction(commit=True) as c:
        for table in CURRENT:
            c.execute(f"DROP TABLE {table}")
        for statement in EARLIER_SHAPE:
            c.execute(statement)
        c.execute(view.sql("INSERT INTO accounts_merchants VALUES (?, ?, NULL, ?)"), (merchant_id, "acme", True))
        c.execute(view.sql("INSERT INTO accounts_keys VALUES (?, ?, ?, ?, ?)"),
                  (key_hash(labelled), prefix, merchant_id, "test", False))
    assert "label" not in columns(view, "accounts_keys")

    upgraded = build(container.config, sandbox=gateway.sandbox)  # a process of this release starts
    try:
        accounts = upgraded.accounts
        assert "label" in columns(accounts, "accounts_keys") and not columns(accounts, "accounts_key_scopes")
        assert accounts.max_tracking_id(log) == position
        # Every key (the one the earlier tables lacked too) with its capabilities; the merged rows the console reads.
        for api_key in (gateway.api_key, labelled):
            record = accounts.get_key(key_hash(api_key))
            assert record is not None and record.merchant == "acme" and not record.revoked
            assert {network for network, _, _ in record.capabilities} == {DEVNET.caip2}
        keys = accounts.list_keys(merchant_id)
        assert sorted(k.label for k in keys) == ["", "ci"] and all(k.created_at for k in keys)
        client = testing.TestClient(create_app(api_collaborators(upgraded)))
        assert client.simulate_get("/supported", headers={"Authorization": f"Bearer {labelled}"}).status_code == 200
    finally:
        upgraded.close()


@STORES
def test_a_service_scopes_view_of_the_earlier_shape_is_rebuilt_from_the_events_when_first_opened(gateway):
    service = weather_service(gateway)
    view = gateway.container.service_scopes
    before = view.get_scope(str(service.id))
    assert [(r.method, r.path, r.description) for r in before.routes] == [("GET", "/weather/*", "")]
    with view.datastore.transaction(commit=True) as c:
        c.execute("DROP TABLE service_scopes_routes")
        c.execute("CREATE TABLE service_scopes_routes (service_id TEXT NOT NULL, route_id TEXT NOT NULL, "
                  "position BIGINT NOT NULL, method TEXT NOT NULL, path TEXT NOT NULL, price TEXT NOT NULL, "
                  "network TEXT NOT NULL, asset TEXT NOT NULL, pay_to TEXT NOT NULL, PRIMARY KEY (service_id, "
                  "route_id))")
        earlier_services(c)

    upgraded = build(gateway.container.config, sandbox=gateway.sandbox)
    try:
        assert "route" in columns(upgraded.service_scopes, "service_scopes_routes")
        assert upgraded.service_scopes.get_scope(str(service.id)) == before  # every route again, whole
    finally:
        upgraded.close()


@STORES
def test_a_catalog_of_the_release_before_declared_listings_is_rebuilt_and_serves_only_what_was_declared(gateway):
    """The earlier catalog had no proposals table and served what payers wrote: its items are replaced by what
    the listings' events say (the owner's declaration), level with the live view `audit rebuild` compares."""
    from uuid import UUID

    from domain.clients import merchant_client_id
    from interfaces.audit.rebuild import rebuild_all
    from interfaces.runtime.workers import catch_up_all
    from tests.integration.test_discovery import INFO

    container = gateway.container
    listed = gateway.body(amount=4_000)
    listed["paymentPayload"]["resource"] = {"url": "http://localhost:8080/forecast"}
    listed["paymentPayload"]["extensions"] = {"bazaar": {"info": INFO}}
    assert gateway.post("/verify", listed).status_code == 200
    catch_up_all(container)
    owner = merchant_client_id(container.merchants.get_merchant("acme").id)
    [(listing, _, proposal)] = container.catalog.list_owned(owner)
    container.listings.confirm(UUID(listing), owner, proposal)
    catch_up_all(container)
    view, log = container.catalog, container.listings.name
    position = view.max_tracking_id(log)
    # The earlier release's catalog, level with the log: no proposals table, and an item a payer titled.
    [row] = view.rows("SELECT item FROM catalog_listings")
    forged = json.loads(row[0])
    forged["metadata"]["title"] = "Sandbox Official Payments Portal"
    with view.datastore.transaction(commit=True) as c:
        c.execute("DROP TABLE catalog_proposals")
        c.execute(view.sql("UPDATE catalog_listings SET item = ?"), (json.dumps(forged),))
    assert not columns(view, "catalog_proposals")

    upgraded = build(container.config, sandbox=gateway.sandbox)  # a process of this release starts
    try:
        assert "proposal" in columns(upgraded.catalog, "catalog_proposals")
        assert upgraded.catalog.max_tracking_id(log) is None  # forgotten: the follower applies every event again
        catch_up_all(upgraded)
        assert upgraded.catalog.max_tracking_id(log) == position
        [item] = upgraded.catalog.get_page(None, (), limit=10, offset=0).items
        assert item["metadata"]["title"] == INFO["title"]  # the owner's declaration, not the forged title
        [catalog] = [c for c in rebuild_all(upgraded, check=True) if c.name == "catalog"]
        assert catalog.differences == []  # what `audit rebuild --check` compares
    finally:
        upgraded.close()


def earlier_services(cursor) -> None:
    """The services table of the shapes before kinds (no `kind` column), and no tools table."""
    cursor.execute("DROP TABLE service_scopes_services")
    cursor.execute("DROP TABLE service_scopes_tools")
    cursor.execute("CREATE TABLE service_scopes_services (service_id TEXT PRIMARY KEY, merchant TEXT NOT NULL, "
                   "slug TEXT NOT NULL, path_suffix TEXT NOT NULL, deleted BOOLEAN NOT NULL)")


@STORES
def test_a_service_scopes_view_without_kinds_and_tools_is_rebuilt_with_the_priced_tools(gateway):
    weather, tools = weather_service(gateway), mcp_service(gateway, port=8081)
    view = gateway.container.service_scopes
    before = view.get_scope(str(weather.id)), view.get_scope(str(tools.id))
    assert [t.name for t in before[1].tools] == ["get_weather", "get_forecast"] and before[1].kind == "mcp"
    with view.datastore.transaction(commit=True) as c:
        earlier_services(c)

    upgraded = build(gateway.container.config, sandbox=gateway.sandbox)
    try:
        assert "kind" in columns(upgraded.service_scopes, "service_scopes_services")
        assert (upgraded.service_scopes.get_scope(str(weather.id)),
                upgraded.service_scopes.get_scope(str(tools.id))) == before  # routes and priced tools again
    finally:
        upgraded.close()
