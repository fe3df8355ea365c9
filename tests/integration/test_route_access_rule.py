"""A route's access rule set and shown everywhere a route is: the CLI, the console's JSON API and its pages."""

from __future__ import annotations

import pytest
from solders.keypair import Keypair

from interfaces.cli.main import main
from tests.integration.console_helpers import console_client, two_merchants
from tests.integration.test_cli_proxy import data_dir, run, sandbox_merchant  # noqa: F401 - the fixture
from tests.integration.test_console_pages import log_in, post
from tests.integration.test_console_services import logged_in

PAY_TO = str(Keypair().pubkey())


@pytest.fixture
def gateway(tmp_path, sandbox):
    for gateway in two_merchants(tmp_path, sandbox):
        gateway.container.merchants.preverify_sandbox_domain("acme")
        yield gateway


def test_the_cli_sets_a_day_pass_and_refuses_a_period_on_a_per_request_route(data_dir, capsys):  # noqa: F811
    sandbox_merchant("acme")
    capsys.readouterr()
    service = run(capsys, "service", "create", "--merchant", "acme", "--name", "Articles", "--domain", "localhost",
                  "--port", "9999")
    route = run(capsys, "route", "add", "--merchant", "acme", "--service", service["id"], "--path", "/articles/*",
                "--price", "10000", "--pay-to", PAY_TO, "--access", "once-paid", "--access-seconds", "86400")
    assert route["access"] == "once-paid" and route["accessSeconds"] == 86400
    plain = run(capsys, "route", "add", "--merchant", "acme", "--service", service["id"], "--path", "/weather",
                "--price", "10000", "--pay-to", PAY_TO)
    assert plain["access"] == "per-request" and plain["accessSeconds"] is None
    listed = run(capsys, "route", "list", "--merchant", "acme", "--service", service["id"])
    assert [(r["access"], r["accessSeconds"]) for r in listed] == [("once-paid", 86400), ("per-request", None)]
    assert main(["route", "add", "--merchant", "acme", "--service", service["id"], "--path", "/news",
                 "--price", "1", "--pay-to", PAY_TO, "--access-seconds", "60"]) == 2
    assert "accessSeconds is only for a once-paid route" in capsys.readouterr().err


def test_the_console_api_sets_the_rule_and_names_the_field_it_refuses(gateway):
    acme = logged_in(console_client(gateway.container), "owner@acme.test")
    sid = acme.request("POST", "/services", json={"name": "L", "domain": "localhost", "port": 9000}).json["id"]
    added = acme.request("POST", f"/services/{sid}/routes", json={
        "path": "/articles/*", "price": "5", "payTo": PAY_TO, "access": "once-paid", "accessSeconds": 3600})
    assert added.status_code == 201 and (added.json["access"], added.json["accessSeconds"]) == ("once-paid", 3600)
    for wrong, field in (({"access": "sometimes"}, "access"), ({"access": "once-paid", "accessSeconds": 0},
                                                              "accessSeconds")):
        refused = acme.request("POST", f"/services/{sid}/routes",
                               json={"path": "/x", "price": "5", "payTo": PAY_TO, **wrong})
        assert refused.status_code == 400 and refused.json["field"] == field


def test_the_route_form_sets_the_rule_shows_it_and_puts_a_bad_period_beside_its_field(gateway):
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    created = post(client, "/services", {"csrf_token": csrf, "name": "Articles", "domain": "localhost",
                                         "port": "9000"}, cookie)
    page_path = created.headers["Location"].split("?")[0]
    service_id = page_path.rsplit("/", 1)[1]
    page = client.simulate_get(page_path, cookies={"pw_console_session": cookie})
    assert 'id="f-access"' in page.text and 'id="f-access_seconds"' in page.text
    form = {"csrf_token": csrf, "method": "GET", "path": "/articles/*", "price": "0.01", "pay_to": PAY_TO,
            "access": "once-paid", "access_seconds": "86400"}
    assert post(client, f"/services/{service_id}/routes", form, cookie).status_code == 303
    shown = client.simulate_get(page_path, cookies={"pw_console_session": cookie}).text
    assert "once paid, for 86,400 s" in shown
    bad = post(client, f"/services/{service_id}/routes", {**form, "path": "/news", "access_seconds": "-1"}, cookie)
    assert bad.status_code == 400 and 'id="e-access_seconds"' in bad.text
