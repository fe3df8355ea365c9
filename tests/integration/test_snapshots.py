"""A proxy service and a merchant are loaded on every proxied request and every console request, a discovery listing
for every payment that describes it: after many changes each is loaded from a snapshot plus the events since, and
that is the same aggregate as replaying every event, on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from cryptography.fernet import Fernet
from solders.keypair import Keypair

from application import merchants as merchants_app
from application.listings import Listings
from application.merchants import Merchants
from application.proxy_services import SNAPSHOT_EVERY, ProxyServices
from domain.listing import DiscoveryListing
from domain.networks import DEVNET, KeyEnv
from interfaces.adapters.postgres import postgres_env
from interfaces.adapters.secret_box import SecretBox
from interfaces.adapters.secrets import BoxedSecrets
from tests.integration.test_proxy_services_postgres import Directory  # verified domains, the exact capability

PAY_TO = str(Keypair().pubkey())


class Replaying(ProxyServices):
    """The same application without snapshots: every load replays every event."""

    name = ProxyServices.name  # the same tables
    snapshotting_intervals = {}


@pytest.fixture(params=["sqlite", "postgres"])
def env(request, tmp_path) -> dict[str, str]:
    if request.param == "sqlite":
        return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "proxy.db")}
    return postgres_env(request.getfixturevalue("postgres_url"))


def state(service) -> dict:
    fields = {k: v for k, v in vars(service).items() if k != "routes"}
    return {**fields, "routes": {rid: route.as_dict() for rid, route in service.routes.items()}}


def test_a_much_edited_service_loads_from_its_snapshot_as_the_replay_of_its_events(env):
    secrets = BoxedSecrets(SecretBox([Fernet.generate_key().decode()]))
    app = ProxyServices(env, merchants=Directory(), secrets=secrets, sandbox=False)
    service = app.create_service("acme", "Weather", domain="weather.co.uk")
    sid = str(service.id)
    app.set_upstream_auth("acme", sid, "X-Api-Key", "secret-value")
    routes = [app.add_route("acme", sid, method="GET", path=f"/v{i}/*", price=1000 + i, pay_to=PAY_TO,
                            description=f"route {i}", bazaar={"input": {"i": i}}) for i in range(40)]
    for i in range(70):
        app.rename("acme", sid, f"Weather {i}")
    app.remove_route("acme", sid, routes[3].id)
    app.set_body_limit("acme", sid, 4096)
    app.set_active("acme", sid, False)
    app.change_base_url("acme", sid, domain="climate.org")
    loaded = app.get_service("acme", sid)
    assert loaded.version > 2 * SNAPSHOT_EVERY

    assert app.snapshots is not None
    taken = [s.originator_version for s in app.snapshots.get(loaded.id)]
    assert taken == [SNAPSHOT_EVERY, 2 * SNAPSHOT_EVERY]
    replayed = Replaying(env, merchants=Directory(), secrets=secrets, sandbox=False).get_service("acme", sid)
    assert state(loaded) == state(replayed)
    assert loaded.name == "Weather 69" and loaded.base.domain == "climate.org" and not loaded.active
    assert len(loaded.routes) == 39 and routes[3].id not in loaded.routes
    assert loaded.routes[routes[39].id].bazaar == {"input": {"i": 39}}
    assert app.upstream_auth(loaded) == ("X-Api-Key", "secret-value")
    assert app.get_by_slug(loaded.slug).version == loaded.version  # what the proxy serves: the latest


class ReplayingMerchants(Merchants):
    name = Merchants.name
    snapshotting_intervals = {}


def test_a_much_changed_merchant_loads_from_its_snapshot_as_the_replay_of_its_events(env):
    app = Merchants(env)
    app.register("acme")
    app.add_login("acme", "owner@acme.test")  # invited: a token to set the password with
    app.add_login("acme", "ops@acme.test")
    app.enable_capability("acme", DEVNET.caip2)
    app.preverify_sandbox_domain("acme")
    for i in range(60):
        app.create_key("acme", KeyEnv.TEST, label=f"key {i}")
    for prefix in list(app.get_merchant("acme").keys)[:5]:
        app.revoke_key(prefix, "acme")
    app.set_rate_limit("acme", 250)
    app.set_discovery("acme", False)
    loaded = app.get_merchant("acme")
    assert loaded.version > merchants_app.SNAPSHOT_EVERY

    assert app.snapshots is not None
    assert [s.originator_version for s in app.snapshots.get(loaded.id)] == [merchants_app.SNAPSHOT_EVERY]
    replayed = ReplayingMerchants(env).get_merchant("acme")
    assert vars(loaded) == vars(replayed)
    assert loaded.logins == {"owner@acme.test", "ops@acme.test"} and loaded.rate_limit_per_minute == 250
    assert loaded.capabilities == replayed.capabilities and len(loaded.capabilities) >= 1
    assert all(isinstance(c, tuple) for c in loaded.capabilities)
    assert len(loaded.keys) == 60 and not loaded.discovery_enabled


class ReplayingListings(Listings):
    name = Listings.name
    snapshotting_intervals = {}


def test_a_much_updated_listing_loads_from_its_snapshot_as_the_replay_of_its_events(env):
    app = Listings(env)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    offer = {"scheme": "exact", "network": DEVNET.caip2, "asset": DEVNET.usdc_mint, "amount": "1000",
             "payTo": PAY_TO}
    listing = DiscoveryListing.register("https://api.weather.co.uk/v1", "GET", "merchant:acme",
                                        {"type": "http", "description": "weather"}, offer, uuid4(), start)
    app.save(listing)
    for i in range(1, 120):  # a new price with every payment: an event each
        listing.update("merchant:acme", {"type": "http", "description": "weather"}, {**offer, "amount": str(1000 + i)},
                       uuid4(), start + timedelta(minutes=i), discovery_enabled=i % 40 != 0)
        app.save(listing)
    loaded = app.get_listing("https://api.weather.co.uk/v1", "GET")
    assert loaded is not None and loaded.version == listing.version > 2 * 50
    assert app.snapshots is not None and [s.originator_version for s in app.snapshots.get(loaded.id)] == [50, 100]
    replayed = ReplayingListings(env).get_listing("https://api.weather.co.uk/v1", "GET")
    assert vars(loaded) == vars(replayed)
    assert loaded.offers[0]["amount"] == "1119" and loaded.enabled
