"""The merchant's money in the console, on the embedded store and on PostgreSQL: exact amounts and plurals on the
overview, the chart's figures from the payment_volume read model, each payment's service and resource, the CSV
export (API and CLI) summing to the overview's total, and route prices in USDC."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from falcon import testing
from solders.keypair import Keypair

from domain.networks import DEVNET, KeyEnv
from interfaces.cli.main import main
from interfaces.http.console.app import create_app
from interfaces.runtime.workers import catch_up_all
from interfaces.wiring import console_collaborators
from projections.payment_volume import DAY, HOUR, Bucket
from tests.conftest import USDC, make_gateway
from tests.integration.console_helpers import ApiClient, add_owner, console_client
from tests.integration.test_console_pages import post

WEATHER, NEWS = "api.acme.example/weather", "api.acme.example/news"
# acme settles 0.02 + 0.015 + 0.007 = 0.042 USDC (the overview used to show 0.04), verifies 0.5 without settling
SETTLED = [(20_000, "https://api.acme.example/weather/today"), (15_000, "https://api.acme.example/news"),
           (7_000, "https://api.acme.example/weather/tomorrow?days=1")]


def with_resource(body: dict, url: str) -> dict:
    body["paymentPayload"]["resource"] = {"url": url}
    return body


@pytest.fixture(scope="module", params=["embedded", "postgres"])
def paid(request, tmp_path_factory):
    from interfaces.sandbox.chain import Sandbox

    tmp_path = tmp_path_factory.mktemp(request.param)
    options = {"database_url": request.getfixturevalue("postgres_url")} if request.param == "postgres" else {}
    gateway = make_gateway(tmp_path, Sandbox(), **options)
    container = gateway.container
    add_owner(container, "acme", "owner@acme.test")
    add_owner(container, "beta", "owner@beta.test")
    container.merchants.preverify_sandbox_domain("acme")  # the sandbox merchant: localhost is its
    container.merchants.enable_capability("beta", DEVNET.caip2)
    beta_key, _ = container.merchants.create_key("beta", KeyEnv.TEST)
    for amount, url in SETTLED:
        assert gateway.post("/settle", with_resource(gateway.body(amount=amount), url)).json["success"]
    assert gateway.post("/verify", with_resource(gateway.body(amount=USDC // 2),
                                                 "https://api.acme.example/weather/x")).json["isValid"]
    beta = gateway.post("/settle", gateway.body(amount=USDC // 5), headers={"Authorization": f"Bearer {beta_key}"})
    assert beta.json["success"]
    catch_up_all(container, ["payment_list", "payment_volume"])  # what the projection worker does
    yield gateway
    container.close()


@pytest.fixture(scope="module")
def postgres_url():
    """A fresh database for the module (tests/conftest's fixture is per test)."""
    from tests.services import drop_postgres_database, fresh_postgres_database

    url = fresh_postgres_database()
    yield url
    drop_postgres_database(url)


def acme_of(gateway) -> ApiClient:
    client = ApiClient(console_client(gateway.container))
    assert client.login("owner@acme.test").status_code == 200
    return client


def html(client: ApiClient, path: str):
    return client.client.simulate_get(path, cookies={"pw_console_session": client.session})


def merchant_id(gateway, name: str = "acme") -> str:
    return gateway.container.accounts.get_merchant_by_name(name).merchant_id


def test_the_read_model_keeps_settled_usdc_and_counts_per_day_hour_and_service(paid):
    volume = paid.container.payment_volume
    settled = [r.settled_at for r in paid.container.payment_list.get_page(merchant_id=merchant_id(paid),
                                                                          state="CONFIRMED").items]
    day, hour = max(settled)[:10], max(settled)[:13]  # the Confirmed events' day and hour (UTC)
    expected = [Bucket(day, NEWS, 15_000, 1), Bucket(day, WEATHER, 27_000, 2)]
    assert volume.get_buckets(merchant_id(paid), DAY, day, day) == expected
    if min(settled)[:13] == hour:  # (unless the three settled on both sides of an hour's end)
        assert volume.get_buckets(merchant_id(paid), HOUR, hour, hour) == [
            Bucket(hour, b.service, b.settled, b.payments) for b in expected]
    assert volume.get_buckets(merchant_id(paid), DAY, "2026-01-01", "2026-01-31") == []
    assert volume.get_buckets(merchant_id(paid, "beta"), DAY, day, day) == [Bucket(day, "(no resource)", 200_000, 1)]


def test_the_overview_shows_exact_amounts_plurals_and_the_charts_figures(paid):
    text = html(acme_of(paid), "/").text
    tiles = text.split('<section class="tiles"', 1)[1].split("</section>", 1)[0]
    assert '<span class="figure">0.042</span><span>USDC settled today</span>' in tiles
    assert '<span class="figure">3</span><span>settles today</span>' in tiles
    assert '<span class="figure">4</span><span>verifies today</span>' in tiles
    assert '<span class="figure">1</span><span>active API key</span>' in tiles  # not "1 active API keys"
    for chart in ("chart-days", "chart-hours"):
        figure = text.split(f'id="{chart}"', 1)[1].split("</figure>", 1)[0]
        assert 'data-settled="42000" data-payments="3"' in figure.split(">", 1)[0]
        assert "0.042 USDC</span> settled in <span class=\"chart-count\">3 payments" in figure
        drawn = [g for g in figure.split('<g class="bucket"')[1:] if 'data-settled="0"' not in g.split(">", 1)[0]]
        if len(drawn) > 1:  # the payments settled on both sides of an hour's (or a day's) end
            continue
        last = drawn[0]
        assert 'data-settled="42000" data-payments="3"' in last
        assert re.findall(r'<rect class="settled"[^>]*data-service="([^"]+)" data-settled="(\d+)"', last) == [
            (WEATHER, "27000"), (NEWS, "15000")]
        assert f"{WEATHER}: 0.027 USDC, 2 payments" in figure and f"{NEWS}: 0.015 USDC, 1 payment<" in figure
    assert "<script" not in text.split('id="chart-days"', 1)[1].split("</figure>", 1)[0]


def test_the_payments_list_and_page_say_what_was_paid_for(paid):
    acme = acme_of(paid)
    listed = html(acme, "/payments").text
    assert listed.count('<td class="service">') == 4
    assert f'<span title="https://api.acme.example/weather/today">{WEATHER}</span>' in listed
    assert "0.042" not in listed and "0.007 USDC" in listed and "Export CSV" in listed
    payment = acme.request("GET", "/payments?state=CONFIRMED&limit=1").json["payments"][0]  # the newest: 0.007
    assert (payment["service"], payment["resource"]) == (WEATHER, "https://api.acme.example/weather/tomorrow?days=1")
    assert acme.request("GET", f"/payments/{payment['id']}").json["service"] == WEATHER
    page = html(acme, f"/payments/{payment['id']}").text
    assert f'<dd id="payment-service">{WEATHER}</dd>' in page
    assert "https://api.acme.example/weather/tomorrow?days=1" in page
    assert "7,000 atomic units" in page
    # the raw transaction is folded away; the sandbox's devnet is its own localnet: no public explorer link
    assert re.search(r"<details class=\"raw\"><summary>Raw transaction \(base64, [\d,]+ characters\)", page)
    assert "explorer.solana.com" not in page


def test_the_csv_export_sums_to_the_overviews_total_and_the_cli_writes_the_same(paid, tmp_path, monkeypatch):
    acme = acme_of(paid)
    answer = html(acme, "/api/v1/payments/export")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    assert answer.headers["content-disposition"] == 'attachment; filename="payments-acme-all.csv"'
    assert answer.content.count(b"\r\n") == 5  # RFC 4180 line ends: the header and 4 payments
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert [r["state"] for r in rows] == ["CONFIRMED", "CONFIRMED", "CONFIRMED", "APPROVED"]  # oldest first
    confirmed = [r for r in rows if r["state"] == "CONFIRMED"]
    assert sum(Decimal(r["amount_usdc"]) for r in confirmed) == Decimal("0.042")
    assert sum(int(r["amount_atomic"]) for r in confirmed) == 42_000
    assert [r["service"] for r in rows] == [WEATHER, NEWS, WEATHER, WEATHER]
    assert rows[2]["resource"] == "https://api.acme.example/weather/tomorrow?days=1"
    assert all(r["transaction"] and r["payer"] and r["network"] == DEVNET.caip2 for r in confirmed)
    filtered = html(acme, f"/api/v1/payments/export?state=CONFIRMED&from={datetime.now(UTC).date()}")
    assert len(list(csv.DictReader(io.StringIO(filtered.text)))) == 3
    today = datetime.now(UTC).date()
    assert filtered.headers["content-disposition"] == f'attachment; filename="payments-acme-confirmed-{today}.csv"'
    named = html(acme, f"/api/v1/payments/export?from={today}T00:00:00Z&to={today}")
    assert named.headers["content-disposition"] == \
        f'attachment; filename="payments-acme-all-{today}T00_00_00Z-{today}.csv"'
    assert html(acme, "/api/v1/payments/export?state=PAID").json["field"] == "state"
    assert html(acme, "/api/v1/payments/export?limit=2").status_code == 400  # no paging: a misspelt filter

    # the command line: the same columns and rows
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(paid.container.config.data_dir))
    if paid.container.config.database_url:
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", paid.container.config.database_url)
    out = tmp_path / "acme.csv"
    assert main(["payments", "export", "--merchant", "acme", "--output", str(out)]) == 0
    assert out.read_bytes() == answer.content
    assert main(["payments", "export", "--merchant", "nobody"]) == 2
    assert main(["payments", "export", "--merchant", "acme", "--from", "yesterday"]) == 2


def test_route_prices_are_entered_and_answered_in_usdc_with_the_atomic_amount_beside(paid):
    acme = acme_of(paid)
    service = acme.request("POST", "/services", json={"name": "Weather", "domain": "localhost", "port": 9000})
    sid = service.json["id"]
    pay_to = str(Keypair().pubkey())
    route = acme.request("POST", f"/services/{sid}/routes", json={"path": "/a", "priceUsdc": "0.007", "payTo": pay_to})
    assert route.status_code == 201 and (route.json["price"], route.json["priceUsdc"]) == ("7000", "0.007")
    legacy = acme.request("POST", f"/services/{sid}/routes", json={"path": "/b", "price": "42000", "payTo": pay_to})
    assert legacy.status_code == 201 and legacy.json["priceUsdc"] == "0.042"
    for body, field in (({"priceUsdc": "0.0000001"}, "priceUsdc"), ({"priceUsdc": "0"}, "priceUsdc"),
                        ({"priceUsdc": "1", "price": "1"}, "priceUsdc"), ({}, "priceUsdc"),
                        ({"price": "0.5"}, "price")):
        refused = acme.request("POST", f"/services/{sid}/routes", json={"path": "/c", "payTo": pay_to, **body})
        assert (refused.status_code, refused.json["field"]) == (400, field), (body, refused.json)
    form = {"csrf_token": acme.csrf, "method": "GET", "path": "/d", "price": "0.0000001", "pay_to": pay_to}
    posted = post(acme.client, f"/services/{sid}/routes", form, acme.session)
    assert posted.status_code == 400 and 'id="e-price"' in posted.text and "at most 6 decimals" in posted.text
    form["price"] = "1.5"
    added = post(acme.client, f"/services/{sid}/routes", form, acme.session)
    assert added.status_code == 303
    page = html(acme, f"/services/{sid}").text
    assert "Price (USDC)" in page and "1.5 USDC" in page and "(1,500,000 atomic)" in page
    assert "0.007 USDC" in page and "(7,000 atomic)" in page


def test_unknown_pages_and_errors_are_styled_and_the_favicon_ships(paid):
    acme = acme_of(paid)
    missing = html(acme, "/no-such-page")
    assert missing.status_code == 404 and "Page not found" in missing.text
    assert '<link rel="stylesheet" href="/static/console.css">' in missing.text
    assert "Back to the console" in missing.text
    anonymous = console_client(paid.container).simulate_get("/no-such-page")
    assert anonymous.status_code == 404 and 'href="/login"' in anonymous.text
    api = acme.request("GET", "/no-such-thing")
    assert api.status_code == 404 and "error" in api.json  # the API still answers JSON
    icon = console_client(paid.container).simulate_get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml" and b"<svg" in icon.content
    legacy = console_client(paid.container).simulate_get("/favicon.ico")
    assert legacy.status_code == 301 and legacy.headers["location"].endswith("/static/favicon.svg")
    assert 'rel="icon" href="/static/favicon.svg"' in html(acme, "/").text


def test_an_unexpected_error_on_a_page_is_the_styled_500_with_its_reference(paid, caplog):
    def broken() -> list:
        raise RuntimeError("the fee payers' chain is on fire")

    collaborators = dataclasses.replace(console_collaborators(paid.container), fee_payers=broken)
    client = ApiClient(testing.TestClient(create_app(collaborators)))
    assert client.login("owner@acme.test").status_code == 200
    failed = html(client, "/")
    assert failed.status_code == 500 and "Something went wrong on our side" in failed.text
    assert re.search(r"unexpected error, reference [0-9a-f]{32}", failed.text) and "on fire" not in failed.text
    assert '<link rel="stylesheet" href="/static/console.css">' in failed.text


def test_the_export_reads_and_writes_one_page_at_a_time(paid):
    from projections.payment_export import export_csv

    c = paid.container
    chunks = export_csv(c.payment_list, c.payment_volume, merchant_id(paid), page=3)
    assert next(chunks).startswith(b"received,settled,failed,state,")
    first = next(chunks)  # a page is read, written and handed over before the next is read
    assert first.count(b"\r\n") == 3
    assert [len(rest.splitlines()) for rest in chunks] == [1]
    pages = list(c.payment_list.iter_pages(merchant_id(paid), size=2))
    assert [len(p) for p in pages] == [2, 2]
    received = [(r.received_at, r.payment_id) for p in pages for r in p]
    assert received == sorted(received) and len(set(received)) == 4


def test_outside_the_sandbox_a_devnet_transaction_links_to_the_explorer(paid):
    client = ApiClient(testing.TestClient(create_app(dataclasses.replace(console_collaborators(paid.container),
                                                                         sandbox=False))))
    assert client.login("owner@acme.test").status_code == 200
    payment = client.request("GET", "/payments?state=CONFIRMED&limit=1").json["payments"][0]
    link = f'href="https://explorer.solana.com/tx/{payment["transaction"]}?cluster=devnet"'
    page = html(client, f"/payments/{payment['id']}").text
    assert link in page and "View on Solana Explorer" in page
    assert f'value="{payment["transaction"]}"' in page and 'data-copy="tx-signature"' in page
    assert link in html(client, "/payments").text
    sandboxed = html(acme_of(paid), f"/payments/{payment['id']}").text
    assert "explorer.solana.com" not in sandboxed and "no public explorer has it" in sandboxed
