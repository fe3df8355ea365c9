"""Discovery end to end on a real LiteSVM chain: a verify carrying `extensions.bazaar` → the Listings follower →
the catalog projection → GET /discovery/resources. Followers are caught up explicitly (`catch_up`), never slept for.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from falcon import testing

from domain.clients import merchant_client_id
from domain.listing import DiscoveryListing, listing_id
from interfaces.adapters.memory import TtlCache
from interfaces.cli.main import main as paywarden
from interfaces.container import build_view
from interfaces.http.facilitator.app import create_app
from interfaces.runtime.workers import catch_up_all
from interfaces.wiring import api_collaborators
from projections.catalog import CatalogProjection, SqliteCatalogView, list_resources, rebuild
from projections.runner import catch_up
from tests.conftest import EMBEDDED, STORES, Gateway, make_gateway

URL = "https://api.weather.example.com/forecast"
INFO = {
    "title": "Weather", "description": "Seven-day forecast for a city.", "method": "GET",
    "input": {"type": "application/json", "schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
    "output": {"type": "application/json", "schema": {"type": "object", "properties": {"days": {"type": "array"}}}},
    "provider": {"name": "Acme Weather", "description": "Forecasts since 1999", "url": "https://acme.example.com",
                 "contact": "ops@acme.example.com", "secret": "dropped"},
    "tags": ["Weather", "forecast"], "pricing": {"model": "per_request", "amount": "0.01", "asset": "USDC"},
    "undocumented": {"dropped": True},
}
PUBLIC_DNS = {"api.weather.example.com": ["93.184.216.34"], "intranet.example.com": ["10.20.30.40"],
              "acme.example.com": ["93.184.216.35"], "six.example.com": ["2002:a00:1::1"]}
amounts = itertools.count(10_000)


@dataclass
class Clock:
    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


class FakeResolver:
    def resolve(self, hostname: str) -> list[str]:
        return PUBLIC_DNS.get(hostname, [])


@dataclass
class Discovery:
    """A gateway whose discovery cache runs on a clock the test moves."""

    gateway: Gateway
    clock: Clock

    def pay(self, url: str = URL, info: dict | None = None, *, anonymous: bool = False, bazaar: Any = None,
            body: dict | None = None, headers: dict[str, str] | None = None) -> testing.Result:
        body = body or self.body(url, info, bazaar=bazaar)
        return self.gateway.post("/verify", body, headers={} if anonymous else headers)

    def body(self, url: str = URL, info: dict | None = None, *, bazaar: Any = None) -> dict:
        body = self.gateway.body(amount=next(amounts))
        body["paymentPayload"]["resource"] = {"url": url, "description": "Forecast", "mimeType": "application/json"}
        body["paymentPayload"]["extensions"] = {"bazaar": {"info": INFO if info is None else info}
                                                if bazaar is None else bazaar}
        return body

    def project(self, *, confirm: bool = True) -> int:
        """Every follower caught up; then, unless `confirm` is False, the owner confirms (as in the console) each
        proposal its listings show, and the followers catch up again."""
        applied = catch_up_all(self.gateway.container)
        if confirm:
            container = self.gateway.container
            owner = merchant_client_id(container.accounts.get_merchant_by_name("acme").merchant_id)
            pending = [(UUID(i), p) for i, _, p in container.catalog.list_owned(owner) if p is not None]
            for listing, proposal in pending:
                container.listings.confirm(listing, owner, proposal)
            applied += catch_up_all(container) if pending else 0
        return applied

    def get(self, **params: Any) -> testing.Result:
        return self.gateway.client.simulate_get("/discovery/resources", params=params or None)

    def catalog(self, **params: Any) -> dict:
        """A fresh answer: the clock is moved past the cache's 60 seconds first."""
        self.clock.now += 60
        result = self.get(**params)
        assert result.status_code == 200, result.json
        return result.json

    @property
    def listings(self):
        return self.gateway.container.listings


def stores_env(gateway: Gateway) -> dict[str, str]:
    """The PAYWARDEN_ settings that put a CLI command or a worker process on the gateway's own stores."""
    config = gateway.container.config
    return {"PAYWARDEN_DATA_DIR": str(config.data_dir), "PAYWARDEN_DATABASE_URL": config.database_url,
            "PAYWARDEN_REDIS_URL": config.redis_url, "PAYWARDEN_DEVNET_RPC_URL": config.devnet_rpc_url}


def with_clock(gateway: Gateway) -> Discovery:
    clock = Clock()
    gateway.container.discovery_cache = TtlCache(clock=clock)
    gateway.client = testing.TestClient(create_app(api_collaborators(gateway.container)))
    return Discovery(gateway, clock)


def owning_example_com(tmp_path, sandbox, **config: Any) -> Gateway:
    """A gateway whose merchant `acme` verified `example.com` (a TXT record on the test's DNS server), so that
    its payments may list the `*.example.com` URLs here (docs/discovery.md, "Whose a listing is")."""
    from tests.dnsserver import TxtServer

    with TxtServer() as dns:
        gateway = make_gateway(tmp_path, sandbox, dns_nameservers=(dns.nameserver,), **config)
        wanted = gateway.container.merchants.add_domain("acme", "example.com")
        dns.publish(wanted.dns_name, wanted.dns_value)
        assert gateway.container.merchants.verify_domain("acme", "example.com") == "dns"
    catch_up_all(gateway.container)
    return gateway


@pytest.fixture
def discovery(tmp_path, sandbox, store) -> Discovery:
    options = dict(store)
    if options.pop("chain", None) == "rpc":
        pytest.skip("the discovery tests run on the in-process chain")
    gateway = owning_example_com(tmp_path, sandbox, **options)
    yield with_clock(gateway)
    gateway.container.close()


@pytest.fixture
def public(tmp_path, sandbox) -> Discovery:
    """The production rules: public hosts only, hostnames resolved (by a fake DNS) as written."""
    gateway = owning_example_com(tmp_path, sandbox, resolver=FakeResolver(), discovery_public_only=True)
    yield with_clock(gateway)
    gateway.container.close()


# -- registration ------------------------------------------------------------------------------------------------


@STORES
def test_a_verify_with_bazaar_from_a_registered_key_lists_title_tags_and_provider(discovery):
    verified = discovery.pay()
    assert verified.status_code == 200 and verified.json["isValid"] is True
    assert discovery.catalog()["items"] == []  # nothing on the request path: only the followers list
    discovery.project()
    page = discovery.catalog()
    assert page["x402Version"] == 2 and page["pagination"] == {"total": 1, "limit": 20, "offset": 0}
    [item] = page["items"]
    assert set(item) == {"resource", "type", "method", "x402Version", "accepts", "lastUpdated", "provider", "metadata"}
    assert (item["resource"], item["type"], item["method"], item["x402Version"]) == (URL, "http", "GET", 2)
    assert item["provider"] == {"name": "Acme Weather", "description": "Forecasts since 1999",
                                "url": "https://acme.example.com"}  # contact accepted, never served
    assert item["metadata"] == {"title": "Weather", "description": "Seven-day forecast for a city.",
                                "tags": ["weather", "forecast"]}
    body = discovery.gateway.body()
    [accept] = item["accepts"]
    assert accept == {
        "scheme": "exact", "network": body["paymentRequirements"]["network"],
        "maxAmountRequired": accept["maxAmountRequired"], "asset": body["paymentRequirements"]["asset"],
        "payTo": body["paymentRequirements"]["payTo"], "maxTimeoutSeconds": 60, "description": "Forecast",
        "mimeType": "application/json",
        "outputSchema": {"input": {"method": "GET", "type": "http", "queryParams": {"city": "string"}},
                         "output": {"type": "application/json", "schema": INFO["output"]["schema"]}},
        "extra": {"asset": "USDC", "pricing": {"model": "per_request", "amount": "0.01", "asset": "USDC"}},
    }
    assert accept["maxAmountRequired"].isdigit() and item["lastUpdated"].endswith("Z")
    assert "ops@acme.example.com" not in str(page) and "undocumented" not in str(page)


@STORES
def test_the_same_from_the_anonymous_identity_is_listed_without_title_tags_or_provider(discovery):
    # The anonymous identity owns no domain: in the sandbox it lists loopback URLs only.
    assert discovery.pay("https://api.weather.example.com/anon", anonymous=True).json["isValid"] is True
    local = "http://localhost:8080/forecast"
    assert discovery.pay(local, anonymous=True).json["isValid"] is True
    discovery.project()
    [item] = discovery.catalog()["items"]
    assert "provider" not in item and item["metadata"] == {"description": "Seven-day forecast for a city."}
    assert item["accepts"][0]["outputSchema"]["input"]["queryParams"] == {"city": "string"}  # schemas are kept
    assert item["resource"] == local and discovery.listings.get_listing(local, "GET").owner == "anonymous"
    assert discovery.listings.counts["skipped:not_owner"] == 1


@STORES
def test_a_payer_neither_lists_another_merchants_url_nor_rewrites_what_a_merchant_declared(discovery):
    """The security review's attack: a payer's `extensions.bazaar` became a listing under the merchant with any
    title and provider, even for another merchant's URL (red before the ownership rule)."""
    from domain.networks import DEVNET, KeyEnv

    container = discovery.gateway.container
    container.merchants.register("globex")
    container.merchants.enable_capability("globex", DEVNET.caip2)
    globex_key, _ = container.merchants.create_key("globex", KeyEnv.TEST)
    forged = {**INFO, "title": "Sandbox Official Payments Portal", "provider": {"name": "Sandbox Inc (verified)"}}
    # A payer of globex names acme's URL first; a payer of acme names a URL on nobody's verified domain.
    globex = discovery.pay(body=discovery.body(URL, forged), headers={"Authorization": f"Bearer {globex_key}"})
    assert globex.status_code == 200 and globex.json["isValid"] is True
    assert discovery.pay("https://victim-shop.example.net/api", forged).json["isValid"] is True
    discovery.project(confirm=False)
    assert discovery.catalog()["items"] == [] and discovery.listings.counts["skipped:not_owner"] == 2
    # Acme's own payment lists its URL; what the payer wrote is not shown until acme confirms it...
    discovery.pay(URL, INFO)
    discovery.project(confirm=False)
    [item] = discovery.catalog()["items"]
    assert "title" not in item["metadata"] and "provider" not in item
    discovery.project()  # ...which it does (the console's "Show this in the catalog")
    [item] = discovery.catalog()["items"]
    assert item["metadata"]["title"] == "Weather" and item["provider"]["name"] == "Acme Weather"
    # A later payer's forged words are recorded as a proposal and change nothing shown.
    discovery.pay(URL, forged)
    discovery.project(confirm=False)
    [item] = discovery.catalog()["items"]
    assert item["metadata"]["title"] == "Weather" and item["provider"]["name"] == "Acme Weather"
    assert "Sandbox" not in str(discovery.catalog(tags="weather"))
    # Globex's payments for acme's URL stay refused now that it is listed.
    discovery.pay(body=discovery.body(URL, forged), headers={"Authorization": f"Bearer {globex_key}"})
    discovery.project(confirm=False)
    assert discovery.listings.counts["skipped:not_owner"] == 3


@STORES
def test_a_second_verification_with_changed_metadata_updates_the_item_and_last_updated(discovery):
    discovery.pay()
    discovery.project()
    [before] = discovery.catalog()["items"]
    discovery.pay(info={**INFO, "title": "Weather Pro", "tags": ["weather", "pro"]})
    discovery.project()
    page = discovery.catalog()
    [after] = page["items"]
    assert page["pagination"]["total"] == 1
    assert after["metadata"]["title"] == "Weather Pro" and after["metadata"]["tags"] == ["weather", "pro"]
    assert after["lastUpdated"] > before["lastUpdated"]
    assert after["accepts"][0]["maxAmountRequired"] != before["accepts"][0]["maxAmountRequired"]  # the new terms
    assert discovery.catalog(tags="pro")["pagination"]["total"] == 1


@STORES
def test_a_merchant_who_disables_discovery_has_a_listing_that_stops_changing(discovery, monkeypatch):
    discovery.pay()
    discovery.project()
    [listed] = discovery.catalog()["items"]
    for name, value in stores_env(discovery.gateway).items():
        monkeypatch.setenv(name, value)
    assert paywarden(["merchant", "discovery", "acme", "off"]) == 0
    discovery.project()
    discovery.pay(info={**INFO, "title": "Changed while off"})
    discovery.pay(url="https://api.weather.example.com/new-while-off")
    discovery.project()
    assert discovery.catalog()["items"] == [listed]
    assert discovery.listings.counts["skipped:discovery_disabled"] == 1
    assert paywarden(["merchant", "discovery", "acme", "on"]) == 0
    discovery.project()
    discovery.pay(info={**INFO, "title": "Back on"})
    discovery.project()
    [item] = discovery.catalog()["items"]
    assert item["metadata"]["title"] == "Back on"
    history = discovery.listings.repository.event_store.get(listing_id(URL, "GET"))
    assert [type(e).__name__ for e in history] == ["Registered", "Confirmed", "Disabled", "Enabled",
                                                   "MetadataUpdated", "Confirmed"]


@STORES
def test_a_rejected_payment_lists_nothing(discovery):
    body = discovery.body()
    body["paymentRequirements"]["amount"] = str(int(body["paymentRequirements"]["amount"]) + 1)
    rejected = discovery.pay(body=body)
    assert rejected.status_code == 400 and rejected.json["isValid"] is False
    discovery.project()
    assert discovery.catalog()["items"] == []


HOST_254 = ("a" * 63 + ".") * 3 + "b" * 58 + ".com"


@pytest.mark.parametrize("url, info, reason", [
    ("http://localhost:8080/forecast", INFO, "private_address"),
    ("https://10.1.2.3/forecast", INFO, "private_address"),
    ("https://192.168.1.20/forecast", INFO, "private_address"),
    ("https://[::1]/forecast", INFO, "private_address"),
    ("https://intranet.example.com/forecast", INFO, "private_address"),  # resolves to 10.20.30.40
    ("https://nowhere.example.com/forecast", INFO, "unresolvable"),
    (f"https://{HOST_254}/forecast", INFO, "hostname_too_long"),
    (URL, {**INFO, "notes": "x" * 9 * 1024}, "info_too_large"),
    (URL, {**INFO, "input": {"type": "application/json", "schema": {"description": "x" * 5 * 1024}}},
     "schema_too_large"),
    ("ftp://api.weather.example.com/forecast", INFO, "invalid_url"),
    (URL, {**INFO, "method": "TRACE"}, "invalid_method"),
    ("https://six.example.com/forecast", INFO, "private_address"),  # 6to4 of 10.0.0.1
    ("https://[64:ff9b::a00:1]/forecast", INFO, "private_address"),  # NAT64 of 10.0.0.1
    (URL, {**INFO, "provider": {"name": "Acme", "url": "https://intranet.example.com/"}}, "private_address"),
    (URL, {**INFO, "provider": {"name": "Acme", "url": "https://[2002:c0a8:1::1]/"}}, "private_address"),
    (URL, {**INFO, "provider": {"name": "Acme", "url": "https://nowhere.example.com/"}}, "unresolvable"),
])
def test_an_invalid_registration_lists_nothing_and_the_verify_answers_as_without_the_extension(public, url, info,
                                                                                                 reason):
    without = public.body()
    del without["paymentPayload"]["extensions"]
    plain = public.pay(body=without)
    carrying = public.pay(url, info)
    assert (carrying.status_code, carrying.json) == (plain.status_code, plain.json) == (200, carrying.json)
    assert carrying.headers.get("Idempotent-Replayed") is None
    public.project()
    assert public.catalog()["items"] == [] and public.listings.counts == {f"skipped:{reason}": 1}


def test_in_production_a_public_resource_is_listed(public):
    public.pay()
    public.project()
    assert [i["resource"] for i in public.catalog()["items"]] == [URL]


# -- the query API -----------------------------------------------------------------------------------------------


def listed(discovery: Discovery) -> None:
    """Five listings: three http, a websocket and a grpc, with overlapping tags."""
    for path, kind, tags in [("a", "http", ["weather", "forecast"]), ("b", "http", ["weather"]),
                             ("c", "http", ["forecast", "maps"]), ("d", "websocket", ["weather", "forecast"]),
                             ("e", "grpc", ["maps"])]:
        assert discovery.pay(f"https://api.example.com/{path}", {**INFO, "type": kind, "tags": tags}).status_code == 200
    discovery.project()


def resources(page: dict) -> list[str]:
    return [item["resource"].rsplit("/", 1)[1] for item in page["items"]]


@STORES
def test_tags_filter_with_and_logic_and_type_filters(discovery):
    listed(discovery)
    assert sorted(resources(discovery.catalog(tags="weather"))) == ["a", "b", "d"]
    assert sorted(resources(discovery.catalog(tags="weather,forecast"))) == ["a", "d"]
    assert sorted(resources(discovery.catalog(tags="WEATHER, forecast,"))) == ["a", "d"]
    assert resources(discovery.catalog(tags="weather,maps")) == []
    assert sorted(resources(discovery.catalog(type="http"))) == ["a", "b", "c"]
    assert resources(discovery.catalog(type="websocket", tags="forecast")) == ["d"]
    assert resources(discovery.catalog(type="grpc")) == ["e"]


@STORES
def test_pagination_has_a_stable_order_totals_and_bounds(discovery):
    listed(discovery)
    everything = resources(discovery.catalog())
    assert everything == ["e", "d", "c", "b", "a"]  # most recently updated first
    pages = [discovery.catalog(limit=2, offset=offset) for offset in (0, 2, 4, 6)]
    assert [resources(p) for p in pages] == [["e", "d"], ["c", "b"], ["a"], []]
    assert [p["pagination"] for p in pages] == [{"total": 5, "limit": 2, "offset": o} for o in (0, 2, 4, 6)]
    assert discovery.catalog(limit=1)["pagination"]["limit"] == 1
    assert discovery.catalog(limit=100)["pagination"]["total"] == 5


@EMBEDDED
@pytest.mark.parametrize("params", [
    {"limit": 0}, {"limit": 101}, {"limit": "ten"}, {"limit": "1.5"}, {"offset": -1}, {"type": "rest"},
    {"tags": ",".join(f"t{i}" for i in range(11))},
])
def test_an_out_of_range_query_is_a_400_with_a_clear_error(discovery, params):
    result = discovery.get(**params)
    assert result.status_code == 400
    assert result.json["error"] == "invalid_query" and next(iter(params)) in result.json["message"]


@STORES
def test_results_are_cached_for_60_seconds(discovery):
    discovery.pay()
    discovery.project()
    assert discovery.get().json["pagination"]["total"] == 1
    discovery.pay("https://api.weather.example.com/alerts")
    discovery.project()
    discovery.clock.now += 59.9
    cached = discovery.get()
    assert cached.json["pagination"]["total"] == 1 and cached.headers["Cache-Control"] == "public, max-age=60"
    assert discovery.get(limit=5).json["pagination"]["total"] == 2  # another query is another cache entry
    discovery.clock.now += 0.1
    assert discovery.get().json["pagination"]["total"] == 2


@STORES
def test_the_61st_request_in_a_minute_from_one_ip_is_a_429_with_retry_after(discovery):
    for _ in range(60):
        assert discovery.get().status_code == 200
    limited = discovery.get()
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    assert limited.json["error"] == "rate_limited"
    other = discovery.gateway.client.simulate_get("/discovery/resources", remote_addr="203.0.113.9")
    assert other.status_code == 200


@STORES
def test_no_authentication_is_needed_and_a_bad_key_is_not_even_read(discovery):
    result = discovery.gateway.client.simulate_get("/discovery/resources", headers={"Authorization": "Bearer nope"})
    assert result.status_code == 200


@STORES
def test_the_worker_reads_a_payments_received_from_the_batch_it_applies_not_the_store(discovery, monkeypatch):
    from interfaces.runtime.workers import followers

    container = discovery.gateway.container
    # payment_list follows every payment event: the group's batch holds the Received beside the Approved.
    [follower] = followers(container, ["listings", "payment_list"])
    follower.catch_up()  # level with the log: both join the group, which reads the next payment once
    assert discovery.pay().json["isValid"] is True
    stored, get = [], container.payments.repository.event_store.get
    monkeypatch.setattr(container.payments.repository.event_store, "get",
                        lambda originator_id, **kw: (stored.append(originator_id), get(originator_id, **kw))[1])
    assert follower.catch_up() > 0
    assert stored == []  # the Received came from the batch
    assert [type(e).__name__ for e in discovery.listings.repository.event_store.get(listing_id(URL, "GET"))] == \
        ["Registered"]


# -- exactly once, across crashes --------------------------------------------------------------------------------


class Crash(Exception):
    """Stands for the worker being killed: the transaction in progress never commits."""


class CrashingPayments:
    def __init__(self, inner: Any, after: int) -> None:
        self._inner, self._left = inner, after

    def get_received(self, payment_id: Any) -> Any:
        if self._left == 0:
            raise Crash
        self._left -= 1
        return self._inner.get_received(payment_id)


class CrashingCatalogProjection(CatalogProjection):
    """Writes the catalog rows of its Nth event, then dies before the transaction commits."""

    def __init__(self, view: Any, after: int) -> None:
        super().__init__(view)
        self._left = after

    def process_event(self, domain_event: Any, tracking: Any) -> None:
        if self._left == 0:
            with self.view.tracked(tracking) as c:
                c.execute("DELETE FROM catalog_listings")
                raise Crash
        self._left -= 1
        super().process_event(domain_event, tracking)


def busy_history(discovery: Discovery) -> None:
    """Twelve approved payments over four resources, with changing metadata; two rejected ones."""
    for round_ in range(3):
        for path in ("a", "b", "c", "d"):
            info = {**INFO, "title": f"{path} v{round_}", "tags": [path, f"v{round_}"]}
            discovery.pay(resource(path), info, anonymous=path == "d")
    body = discovery.body("https://api.example.com/rejected")
    body["paymentRequirements"]["payTo"] = str(discovery.gateway.payer.pubkey())
    assert discovery.pay(body=body).status_code == 400


def resource(path: str) -> str:
    """The URL of resource `path` of the busy history: the anonymous identity's `d` on a loopback host."""
    return "http://localhost:8080/d" if path == "d" else f"https://api.example.com/{path}"


def listing_events(discovery: Discovery) -> list[str]:
    return [type(e).__name__ for path in "abcd"
            for e in discovery.listings.repository.event_store.get(listing_id(resource(path), "GET"))]


@STORES
def test_followers_killed_midway_and_restarted_apply_every_event_exactly_once(discovery, tmp_path):
    from application.listings import Listings, StoredPayments

    busy_history(discovery)
    container = discovery.gateway.container
    # The listings follower dies in its 6th payment; a new one (a restarted worker) resumes from its tracking.
    doomed = Listings(container.listings.env, payments=CrashingPayments(StoredPayments(container.payments), 5),
                      discovery=container.accounts, resolver=FakeResolver(), domains=container.accounts, sandbox=True)
    with pytest.raises(Crash):
        catch_up(container.payments, doomed)
    doomed.close()
    assert container.listings.recorder.max_tracking_id(container.payments.name) is not None
    assert catch_up(container.payments, container.listings) > 0
    assert catch_up(container.payments, container.listings) == 0
    assert listing_events(discovery) == ["Registered", "MetadataUpdated", "MetadataUpdated"] * 4
    # The catalog worker dies twice mid-write; each restart resumes after the last committed event.
    for after in (3, 4):
        with pytest.raises(Crash):
            catch_up(container.listings, CrashingCatalogProjection(container.catalog, after))
    catch_up(container.listings, CatalogProjection(container.catalog))
    # Row count and content equal a catalog rebuilt from scratch out of the event store.
    assert {item["metadata"].get("title") for item in list_resources(container.catalog).items} == {None}
    discovery.project()  # the owner confirms what its payments proposed: the catalog shows it
    fresh = build_view(container.config.__class__(data_dir=tmp_path / "audit"), "catalog", SqliteCatalogView)
    assert rebuild(container.listings, fresh) == 12 + 4 + 3  # listing events, claims, confirmations
    assert container.catalog.get_rows() == fresh.get_rows() and len(fresh.get_rows()) == 4
    assert {item["metadata"].get("title") for item in list_resources(fresh).items} == {"a v2", "b v2", "c v2", None}
    with pytest.raises(ValueError):
        rebuild(container.listings, fresh)


@STORES
@pytest.mark.slow
def test_a_killed_projection_worker_process_resumes_exactly_once(discovery, tmp_path):
    container = discovery.gateway.container
    env = {**os.environ, **stores_env(discovery.gateway)}
    command = [sys.executable, "-m", "interfaces.cli.main", "project", "listings", "catalog"]

    def start() -> subprocess.Popen:
        return subprocess.Popen(command, env=env, cwd=os.getcwd(), stdout=subprocess.DEVNULL)

    def settled(worker: subprocess.Popen) -> None:
        last = container.payments.recorder.max_notification_id()
        container.listings.recorder.wait(container.payments.name, last, timeout=60)
        container.catalog.wait(container.listings.name, container.listings.recorder.max_notification_id(), timeout=60)

    worker = start()
    try:
        for path in ("a", "b", "c"):
            discovery.pay(f"https://api.example.com/{path}", {**INFO, "title": f"{path} first"})
        settled(worker)
        for path in ("a", "b", "c", "d"):
            discovery.pay(f"https://api.example.com/{path}", {**INFO, "title": f"{path} second"})
        os.kill(worker.pid, signal.SIGKILL)  # wherever it is in that work: no clean shutdown
        worker.wait(timeout=10)
        for path in ("a", "d"):
            discovery.pay(f"https://api.example.com/{path}", {**INFO, "title": f"{path} third"})
        worker = start()
        settled(worker)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=10)
    discovery.project()  # the owner confirms what its payments proposed
    fresh = build_view(container.config.__class__(data_dir=tmp_path / "audit"), "catalog", SqliteCatalogView)
    assert rebuild(container.listings, fresh) == 9 + 4 + 4  # listing events, claims, confirmations
    assert container.catalog.get_rows() == fresh.get_rows()
    assert sorted(r[6]["metadata"]["title"] for r in fresh.get_rows()) == ["a third", "b second", "c second",
                                                                            "d third"]
    assert sum(type(e) is DiscoveryListing.Registered for e in container.listings.repository.event_store.get(
        listing_id("https://api.example.com/a", "GET"))) == 1


@STORES
def test_the_owner_confirms_a_proposal_on_the_discovery_page_and_the_catalog_shows_it_at_once(discovery):
    import html
    import re
    from urllib.parse import urlencode

    from tests.integration.console_helpers import add_owner, console_client
    from tests.integration.test_console_pages import log_in

    container = discovery.gateway.container
    discovery.pay(URL, INFO)
    discovery.project(confirm=False)
    add_owner(container, "acme", "owner@acme.test")
    client = console_client(container)
    cookie, csrf = log_in(client, "owner@acme.test")
    cookies = {"pw_console_session": cookie}
    page = client.simulate_get("/discovery", cookies=cookies).text
    action, proposal = re.search(r'<form method="post" action="(/listings/[^/]+/confirm)">.*?name="proposal" '
                                 r'value="([^"]+)"', page, re.S).groups()
    assert "Acme Weather" in page and "Show this in the catalog" in page
    form = {"csrf_token": csrf, "proposal": html.unescape(proposal)}
    answer = client.simulate_post(action, body=urlencode(form), cookies=cookies,
                                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 303 and answer.headers["location"].endswith("/discovery?done=confirmed")
    page = client.simulate_get("/discovery", params={"done": "confirmed"}, cookies=cookies).text
    assert "Show this in the catalog" not in page and "The catalog shows what you confirmed." in page
    [item] = discovery.catalog()["items"]  # no follower run: the confirmation is applied with its command
    assert item["metadata"]["title"] == "Weather" and item["provider"]["name"] == "Acme Weather"
