"""The auditor's payments in the console: `GET /api/v1/payments[/{id}]` and the pages `/payments[/{id}]`, read from
the payments read model, over a real gateway on the sandbox chain (embedded store, and PostgreSQL for the API)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlparse

import pytest

from domain.networks import DEVNET, MAINNET, KeyEnv
from interfaces.runtime.workers import catch_up_all
from projections.payment_list import DayFigures
from tests.conftest import USDC, make_gateway
from tests.integration.console_helpers import ApiClient, add_owner, console_client

TODAY = datetime.now(UTC).date()


def paying(tmp_path, sandbox, **options):
    """acme: a settled payment, an approved verify, a rejected verify; beta: one settled payment of its own."""
    gateway = make_gateway(tmp_path, sandbox, **options)
    container = gateway.container
    add_owner(container, "acme", "owner@acme.test")
    add_owner(container, "beta", "owner@beta.test")
    container.merchants.enable_capability("beta", DEVNET.caip2)
    beta_key, _ = container.merchants.create_key("beta", KeyEnv.TEST)
    assert gateway.post("/settle", gateway.body(amount=USDC // 4)).json["success"]
    assert gateway.post("/verify", gateway.body(amount=USDC // 2)).json["isValid"]
    assert gateway.post("/verify", gateway.body(payTo=str(gateway.payer.pubkey()))).status_code == 400
    answer = gateway.post("/settle", gateway.body(amount=USDC // 5), headers={"Authorization": f"Bearer {beta_key}"})
    assert answer.json["success"], answer.json
    catch_up_all(container, ["payment_list", "payment_volume"])  # what the projection worker does
    yield gateway
    container.close()


@pytest.fixture(params=["embedded", "postgres"])
def paid(request, tmp_path, sandbox):
    """The API's tests run on both stores (the list's SQL: filters, dates, the keyset cursor)."""
    options = {"database_url": request.getfixturevalue("postgres_url")} if request.param == "postgres" else {}
    yield from paying(tmp_path, sandbox, **options)


@pytest.fixture
def embedded(tmp_path, sandbox):
    """The pages' and input checks' tests: the embedded store is enough (the same queries as above)."""
    yield from paying(tmp_path, sandbox)


def logged_in(gateway, email: str) -> ApiClient:
    client = ApiClient(console_client(gateway.container))
    assert client.login(email).status_code == 200
    return client


@pytest.fixture
def acme(paid):
    return logged_in(paid, "owner@acme.test")


@pytest.fixture
def beta(paid):
    return logged_in(paid, "owner@beta.test")


def listed(client: ApiClient, query: str = "") -> dict:
    result = client.request("GET", "/payments" + query)
    assert result.status_code == 200, result.json
    return result.json


def test_the_list_holds_only_the_merchants_own_payments_newest_first(acme, beta):
    mine = listed(acme)
    assert mine["total"] == 3 and mine["nextCursor"] is None
    assert [p["state"] for p in mine["payments"]] == ["REJECTED", "APPROVED", "CONFIRMED"]
    assert [p["amount"] for p in mine["payments"]] == [str(USDC // 100), str(USDC // 2), str(USDC // 4)]
    received = [p["receivedAt"] for p in mine["payments"]]
    assert received == sorted(received, reverse=True)
    confirmed = mine["payments"][2]
    assert confirmed["transaction"] and confirmed["payer"] and confirmed["settledAt"]
    assert confirmed["network"] == DEVNET.caip2 and confirmed["asset"] == DEVNET.usdc_mint
    theirs = listed(beta)
    assert theirs["total"] == 1 and theirs["payments"][0]["amount"] == str(USDC // 5)
    assert not {p["id"] for p in theirs["payments"]} & {p["id"] for p in mine["payments"]}


def test_the_list_filters_by_state_network_and_date(acme):
    assert [p["state"] for p in listed(acme, "?state=CONFIRMED")["payments"]] == ["CONFIRMED"]
    assert listed(acme, "?state=FAILED") == {"payments": [], "total": 0, "nextCursor": None}
    assert listed(acme, f"?network={DEVNET.caip2}")["total"] == 3
    assert listed(acme, f"?network={MAINNET.caip2}")["total"] == 0
    # a date is a whole UTC day, `to` included
    assert listed(acme, f"?from={TODAY}&to={TODAY}")["total"] == 3
    assert listed(acme, f"?from={TODAY + timedelta(days=1)}")["total"] == 0
    assert listed(acme, f"?to={TODAY - timedelta(days=1)}")["total"] == 0
    # a date-time is an instant: `from` inclusive, `to` exclusive
    payments = listed(acme)["payments"]
    middle = payments[1]["receivedAt"]
    assert [p["id"] for p in listed(acme, f"?from={middle}")["payments"]] == [p["id"] for p in payments[:2]]
    assert [p["id"] for p in listed(acme, f"?to={middle}")["payments"]] == [payments[2]["id"]]
    assert [p["state"] for p in listed(acme, f"?state=APPROVED&from={middle}&to={TODAY}")["payments"]] == ["APPROVED"]


def test_paging_by_cursor_gives_every_payment_once_while_new_ones_arrive(paid, acme):
    first = listed(acme, "?limit=2")
    assert len(first["payments"]) == 2 and first["total"] == 3 and first["nextCursor"]
    # a payment arrives between two pages: it is at the top, not repeated or pushing a row onto the next page
    assert paid.post("/verify", paid.body(amount=USDC // 3)).json["isValid"]
    catch_up_all(paid.container, ["payment_list"])
    second = listed(acme, f"?limit=2&cursor={first['nextCursor']}")
    assert second["nextCursor"] is None and second["total"] == 4
    seen = [p["id"] for p in first["payments"] + second["payments"]]
    assert len(seen) == len(set(seen)) == 3
    assert listed(acme, "?limit=1")["payments"][0]["amount"] == str(USDC // 3)
    # the cursor keeps the filter it is used with
    only = listed(acme, "?state=APPROVED&limit=1")
    assert only["total"] == 2 and only["nextCursor"]
    rest = listed(acme, f"?state=APPROVED&limit=1&cursor={only['nextCursor']}")
    assert [p["amount"] for p in rest["payments"]] == [str(USDC // 2)] and rest["nextCursor"] is None


def test_a_payment_reads_with_its_whole_event_timeline(acme):
    confirmed = listed(acme, "?state=CONFIRMED")["payments"][0]
    result = acme.request("GET", f"/payments/{confirmed['id']}")
    assert result.status_code == 200
    payment = result.json
    assert {k: v for k, v in payment.items() if k != "events"} == confirmed
    events = payment["events"]
    assert [e["type"] for e in events] == ["Payment.Received", "Payment.Approved", "Payment.SettlementSubmitted",
                                           "Payment.Confirmed"]
    assert [e["version"] for e in events] == [1, 2, 3, 4]
    assert events[0]["fields"]["amount"] == USDC // 4 and events[0]["fields"]["pay_to"] == confirmed["payTo"]
    assert events[1]["fields"]["payer"] == confirmed["payer"]
    assert events[3]["fields"]["signature"] == confirmed["transaction"]
    assert all(e["recordedAt"].endswith("Z") for e in events)
    rejected = listed(acme, "?state=REJECTED")["payments"][0]
    events = acme.request("GET", f"/payments/{rejected['id']}").json["events"]
    assert [e["type"] for e in events] == ["Payment.Received", "Payment.Rejected"]
    assert events[1]["fields"]["reason"] == rejected["reason"] == "invalid_exact_svm_payload_recipient_mismatch"


def test_a_days_figures_count_the_merchants_verifications_settlements_and_settled_volume(paid, acme, beta):
    view, today = paid.container.payment_list, TODAY.isoformat()
    acme_id, beta_id = (client.request("GET", "/me").json["merchantId"] for client in (acme, beta))
    # acme: the settle's own check, the approved and the rejected verify; one settlement of 0.25 USDC
    assert view.get_day(acme_id, today) == DayFigures(verifies=3, settles=1, settled=USDC // 4)
    assert view.get_day(beta_id, today) == DayFigures(verifies=1, settles=1, settled=USDC // 5)
    assert view.get_day(acme_id, (TODAY - timedelta(days=1)).isoformat()) == DayFigures(0, 0, 0)


def test_another_merchants_payment_is_not_found_like_an_unknown_one(acme, beta):
    theirs = listed(beta)["payments"][0]["id"]
    for path in (f"/payments/{theirs}", "/payments/00000000-0000-0000-0000-000000000000", "/payments/not-an-id"):
        result = acme.request("GET", path)
        assert result.status_code == 404 and result.json["error"] == "not_found", path
    assert beta.request("GET", f"/payments/{theirs}").status_code == 200


BAD = [("?state=PAID", "state"), ("?network=solana:nope", "network"), ("?from=yesterday", "from"),
       ("?from=2026-13-01", "from"), (f"?from={TODAY}&to={TODAY - timedelta(days=2)}", "to"),
       ("?cursor=bm90LWEtY3Vyc29y", "cursor"), ("?cursor=%%%", "cursor"), ("?limit=0", "limit"),
       ("?limit=201", "limit"), ("?limit=ten", "limit"), ("?status=CONFIRMED", "status"), ("?to=9999-12-31", "to"),
       ("?from=0001-01-01T00:00:00%2B01:00", "from"), ("?from=1969-12-31", "from")]


def test_a_bad_filter_is_400_naming_its_field(embedded):
    client = logged_in(embedded, "owner@acme.test")
    for query, field in BAD:
        result = client.request("GET", "/payments" + query)
        assert result.status_code == 400, (query, result.json)
        assert result.json["error"] == "invalid_request" and result.json["field"] == field, query


def test_the_payments_api_needs_a_session(embedded):
    client = ApiClient(console_client(embedded.container))
    for path in ("/payments", "/payments/00000000-0000-0000-0000-000000000000"):
        result = client.request("GET", path)
        assert result.status_code == 401 and result.json["error"] == "unauthenticated"


# -- the pages (plain HTTP, no JavaScript) --------------------------------------------------------------------------


def page(client: ApiClient, path: str):
    return client.client.simulate_get(path, cookies={"pw_console_session": client.session})


def test_the_payments_page_lists_filters_and_pages(embedded):
    acme = logged_in(embedded, "owner@acme.test")
    result = page(acme, "/payments")
    assert result.status_code == 200 and "text/html" in result.headers["content-type"]
    assert "3 payments, newest first." in result.text
    assert result.text.count('<tr data-payment="') == 3
    assert "0.25 USDC" in result.text and "devnet" in result.text and 'aria-current="page"' in result.text
    confirmed = page(acme, "/payments?state=CONFIRMED&network=&from=&to=")
    assert "1 payment, newest first." in confirmed.text and confirmed.text.count('<tr data-payment="') == 1
    assert '<option value="CONFIRMED" selected>' in confirmed.text  # the form keeps the filter
    none = page(acme, f"/payments?from={TODAY + timedelta(days=1)}")
    assert "No payments match the filter." in none.text
    first = page(acme, "/payments?limit=2")
    assert first.text.count('<tr data-payment="') == 2 and 'rel="next"' in first.text
    href = first.text.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
    query = parse_qs(urlparse(href).query)
    assert query["limit"] == ["2"] and query["cursor"]
    second = page(acme, href)
    assert second.text.count('<tr data-payment="') == 1 and 'rel="next"' not in second.text
    assert ">Newest</a>" in second.text


def test_the_overview_shows_todays_figures_and_the_last_payments_linked_to_their_pages(embedded):
    acme = logged_in(embedded, "owner@acme.test")
    result = page(acme, "/")
    assert result.status_code == 200
    tiles = result.text.split('<section class="tiles"', 1)[1].split("</section>", 1)[0]
    for figure, label in (("3", "verifies today"), ("1", "settle today"), ("0.25", "USDC settled today")):
        assert f'<span class="figure">{figure}</span><span>{label}</span>' in tiles
    for payment in listed(acme)["payments"]:
        assert f'<a href="/payments/{payment["id"]}">' in result.text
    assert result.text.index("REJECTED") < result.text.index("APPROVED") < result.text.index("CONFIRMED")


def test_a_bad_filter_on_the_page_is_shown_beside_its_field(embedded):
    acme = logged_in(embedded, "owner@acme.test")
    result = page(acme, f"/payments?from={TODAY}&to={TODAY - timedelta(days=1)}")
    assert result.status_code == 400
    assert '<p class="error" id="e-to">must be later than from</p>' in result.text
    assert "The filter was not applied: to (see above)." in result.text
    unknown = page(acme, "/payments?cursor=nope&state=CONFIRMED")
    assert unknown.status_code == 400
    assert "The filter was not applied: cursor: not a cursor of this list" in unknown.text


def test_the_payment_page_shows_the_timeline_and_another_merchants_is_404(embedded):
    acme, beta = logged_in(embedded, "owner@acme.test"), logged_in(embedded, "owner@beta.test")
    payment = listed(acme, "?state=CONFIRMED")["payments"][0]
    result = page(acme, f"/payments/{payment['id']}")
    assert result.status_code == 200
    text = result.text
    for event in ("Payment.Received", "Payment.Approved", "Payment.SettlementSubmitted", "Payment.Confirmed"):
        assert f'<span class="event-type">{event}</span>' in text
    assert text.index("Payment.Received") < text.index("Payment.Approved") < text.index("Payment.Confirmed")
    assert payment["transaction"] in text and payment["payer"] in text and payment["idempotencyKey"] in text
    theirs = listed(beta)["payments"][0]["id"]
    assert page(acme, f"/payments/{theirs}").status_code == 404
    assert page(acme, "/payments/nope").status_code == 404


def test_the_pages_send_a_visitor_without_a_session_to_log_in(embedded):
    client = console_client(embedded.container)
    for path in ("/payments", "/payments/00000000-0000-0000-0000-000000000000"):
        result = client.simulate_get(path)
        assert result.status_code == 303 and result.headers["location"].endswith("/login")
