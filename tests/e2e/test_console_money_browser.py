"""A merchant's money in a real browser (Playwright driving Debian's Chromium): a month of generated history, then
clients pay through the facilitator API; the merchant reads the overview's chart back, bar by bar, and every
figure equals the payments made; the CSV export sums to the overview's total; prices are entered in USDC.

Screenshots of the overview with its month of history are written to tests/artifacts/console/ (`money-*.png`,
git-ignored)."""

from __future__ import annotations

import csv
import io
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
import pytest

from interfaces.http.console.app import create_app as create_console
from interfaces.http.facilitator.app import create_app
from interfaces.runtime.workers import catch_up_all, run
from interfaces.wiring import api_collaborators, console_collaborators
from tests.conftest import make_gateway
from tests.e2e.test_console_browser import EMAIL, browser, log_in, serve, shot  # noqa: F401 - the browser fixture
from tests.history import SERVICES, record_history
from tests.integration.console_helpers import add_owner
from tests.services import POLL

# What the clients pay in the test, per service: (amount in atomic units, how many times)
LIVE = {"api.acme.example/weather": (7_000, 3), "api.acme.example/news": (42_000, 1)}


@pytest.fixture
def site(tmp_path, sandbox):
    gateway = make_gateway(tmp_path, sandbox)
    add_owner(gateway.container, "acme", EMAIL)
    container = gateway.container
    acme_id = container.accounts.get_merchant_by_name("acme").merchant_id
    history = record_history(container.payments, acme_id, str(gateway.pay_to.pubkey()), payments=900)
    catch_up_all(container, ["payment_list", "payment_volume"])
    api_url, api = serve(create_app(api_collaborators(container)))
    console_url, console = serve_closing(create_console(console_collaborators(container)))
    stop = threading.Event()  # the projection worker, as `paywarden project` runs it
    worker = threading.Thread(target=run, args=(container, ["payment_list", "payment_volume"], stop), daemon=True)
    worker.start()
    yield gateway, api_url, console_url, history
    stop.set()
    worker.join(10)
    for server in (api, console):
        server.shutdown()
    container.close()


def serve_closing(app) -> tuple[str, object]:
    """wsgiref's own HTTP/1.0 handler, one request per connection: a streamed answer (the CSV, no
    Content-Length) ends when the connection closes, as gunicorn's chunked encoding ends it in production. (The
    keep-alive handler of the other browser tests cannot frame a body of unknown length.)"""
    from interfaces.sandbox.localnet import ThreadingServer

    httpd = make_server("127.0.0.1", 0, app, ThreadingServer, WSGIRequestHandler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_port}", httpd


def chart_figures(page, chart_id: str) -> dict[tuple[str, str], tuple[int, int]]:
    """Every bar of a chart as the page draws it: (bucket, service) → (settled atomic units, payments)."""
    bars = page.locator(f"#{chart_id} g.bucket").evaluate_all("""groups => groups.flatMap(g => {
        const money = [...g.querySelectorAll('rect.settled')], counts = [...g.querySelectorAll('rect.count')];
        return money.map((r, i) => [g.dataset.bucket, r.dataset.service, Number(r.dataset.settled),
                                    Number(counts[i].dataset.payments)]);
    })""")
    return {(b, s): (settled, count) for b, s, settled, count in bars}


def expected_of(history, span: str, shown: list[str]) -> dict[tuple[str, str], tuple[int, int]]:
    wanted = set(shown)
    return {(bucket, service): figures for (s, bucket, service), figures in history.expected().items()
            if s == span and bucket in wanted}


def test_merchant_reads_a_month_of_money_and_the_payments_just_made_from_the_chart(site, browser):  # noqa: F811
    gateway, api_url, console_url, history = site
    key = {"Authorization": f"Bearer {gateway.api_key}"}

    # Clients pay: 3 weather calls and 1 news article, settled on the chain; one more only verified
    transactions = set()
    for service, (amount, times) in LIVE.items():
        for _ in range(times):
            body = gateway.body(amount=amount)
            body["paymentPayload"]["resource"] = {"url": SERVICES[service][0]}
            settled = httpx.post(api_url + "/settle", json=body, headers=key, timeout=60).json()
            assert settled["success"], settled
            transactions.add(settled["transaction"])
    assert httpx.post(api_url + "/verify", json=gateway.body(amount=5_000), headers=key).json()["isValid"]
    payments = gateway.container.payments
    last = payments.recorder.max_notification_id()
    for view in (gateway.container.payment_list, gateway.container.payment_volume):
        view.wait(payments.name, last, timeout=30)

    # The expected figures: the history, plus the payments just made in the bucket of their settlement
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, console_url)
    listed = page.request.get(console_url + "/api/v1/payments?state=CONFIRMED&limit=10").json()["payments"]
    # (by transaction: the generated history may hold payments of the last minutes too)
    live_settled = [p for p in listed if p["transaction"] in transactions]
    assert len(live_settled) == sum(times for _, times in LIVE.values())
    for p in live_settled:
        at = datetime.fromisoformat(p["settledAt"].replace("Z", "+00:00"))
        service = next(s for s, (amount, _) in LIVE.items() if str(amount) == p["amount"])
        history.add(service, int(p["amount"]), at)

    # The merchant reads the charts back, bar by bar
    page.reload()
    now = datetime.now(UTC)
    days = [(now - timedelta(days=n)).strftime("%Y-%m-%d") for n in range(29, -1, -1)]
    hours = [(now - timedelta(hours=n)).strftime("%Y-%m-%dT%H") for n in range(47, -1, -1)]
    drawn_days, drawn_hours = chart_figures(page, "chart-days"), chart_figures(page, "chart-hours")
    assert drawn_days == expected_of(history, "day", days)
    assert drawn_hours == expected_of(history, "hour", hours)
    today = days[-1]
    settled_today = sum(v[0] for (b, _), v in drawn_days.items() if b == today)
    assert settled_today == sum(history.settled[("day", today, s)] for s in SERVICES)

    # ... and in words: the tile, the bars' titles, the legend and the table of figures
    tile = page.locator("#tile-settled .figure").inner_text()
    assert Decimal(tile.replace(",", "")) * 1_000_000 == settled_today
    live_hour = live_settled[0]["settledAt"][:13]  # the hour they settled in (the history ends an hour ago)
    if all(p["settledAt"][:13] == live_hour for p in live_settled):
        title = page.locator(f'#chart-hours g.bucket[data-bucket="{live_hour}"] > title').text_content()
        paid = Decimal(sum(a * t for a, t in LIVE.values())) / 1_000_000
        assert title == f"{live_hour[:10]} {live_hour[11:]}:00 UTC: {paid} USDC, " \
                        f"{sum(t for _, t in LIVE.values())} payments"
    legend = page.locator("#chart-days .legend li").all_inner_texts()
    assert len(legend) == 3 and all(" USDC, " in line for line in legend)
    shot(page, "money-overview")
    page.locator("#chart-hours").screenshot(path=str(shot_path("money-chart-hours")))
    page.locator("#chart-days").screenshot(path=str(shot_path("money-chart-days")))
    assert not page.locator("#chart-days details.figures table").is_visible()  # folded until asked for
    page.locator("#chart-days details.figures summary").click()
    assert page.locator("#chart-days details.figures tbody tr").count() == len(drawn_days)
    first_row = page.locator("#chart-days details.figures tbody tr").first.locator("td").all_inner_texts()
    settled, count = drawn_days[(first_row[0], first_row[1])]
    assert first_row[2:] == [str(Decimal(settled) / 1_000_000), str(count)] and first_row[0] == min(drawn_days)[0]

    # The books: the CSV of this month's payments sums to the overview's 30 days
    month = page.request.get(console_url + f"/api/v1/payments/export?state=CONFIRMED&from={days[0]}")
    assert month.ok and month.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(month.text())))
    by_day = Counter()
    for r in rows:
        by_day[r["settled"][:10]] += int(r["amount_atomic"])
    assert {d: v for d, v in by_day.items() if d >= days[0]} == \
        {d: sum(v[0] for (b, _), v in drawn_days.items() if b == d) for d in days
         if any(b == d for b, _ in drawn_days)}
    assert sum(Decimal(r["amount_usdc"]) for r in rows if r["settled"][:10] == today) * 1_000_000 == settled_today

    # The payments list says what each payment paid for; the button downloads the CSV
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Payments").click()
    first = page.locator("tbody tr").first
    assert first.locator("td.service").inner_text() == "(no resource)"  # the verify carried no resource
    assert page.locator("tbody tr").nth(1).locator("td.service").inner_text() in LIVE
    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    assert download.value.suggested_filename == "payments-acme-all.csv"
    shot(page, "money-payments")

    # A payment's page: the service and resource, the raw transaction folded away until asked for
    page.locator("tbody tr").nth(1).get_by_role("link").click()
    page.wait_for_url("**/payments/*-*")
    assert page.locator("#payment-service").inner_text() in LIVE
    raw = page.locator("details.raw").first
    assert not raw.locator("p").is_visible()
    raw.locator("summary").click()
    assert raw.locator("p").is_visible()
    shot(page, "money-payment")

    # An unknown page is the console's own page, with a way back
    page.goto(console_url + "/nowhere")
    assert page.get_by_role("heading", name="Page not found").is_visible()
    page.get_by_role("link", name="Back to the console").click()
    page.wait_for_url(console_url + "/")
    shot(page, "money-back-from-404")


def shot_path(name: str):
    from tests.e2e.test_console_browser import ARTIFACTS

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"
