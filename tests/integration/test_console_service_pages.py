"""The console's service pages through plain HTTP forms: create, the gateway URL with its copy button, routes,
deactivate, delete refused while routes exist, and another merchant's service not found."""

from __future__ import annotations

import re

import pytest
from solders.keypair import Keypair

from tests.integration.console_helpers import console_client, two_merchants
from tests.integration.test_console_pages import log_in, post


@pytest.fixture
def gateway(tmp_path, sandbox):
    for gateway in two_merchants(tmp_path, sandbox):
        gateway.container.merchants.preverify_sandbox_domain("acme")  # the sandbox merchant: localhost is its
        yield gateway


def test_a_merchant_runs_a_service_from_the_pages(gateway):
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    get = lambda path: client.simulate_get(path, cookies={"pw_console_session": cookie})  # noqa: E731

    assert "Create a service" in get("/services").text
    created = post(client, "/services", {"csrf_token": csrf, "name": "Local weather", "domain": "localhost",
                                         "port": "9000", "auth_header": "X-Api-Key", "auth_value": "up-s3cret"},
                   cookie)
    assert created.status_code == 303
    page_path = created.headers["Location"].split("?")[0]
    service_id = page_path.rsplit("/", 1)[1]
    page = get(page_path)
    assert page.status_code == 200 and "up-s3cret" not in page.text
    assert re.search(r'id="gateway-url" class="mono" readonly value="http://[^"]+/local-weather"', page.text)
    assert 'data-copy="gateway-url"' in page.text and "X-Api-Key is set" in page.text

    refused = post(client, f"/services/{service_id}/routes", {"csrf_token": csrf, "method": "GET", "path": "nope",
                                                               "price": "10", "pay_to": str(Keypair().pubkey())},
                   cookie)
    assert refused.status_code == 400 and 'id="e-path"' in refused.text
    added = post(client, f"/services/{service_id}/routes", {"csrf_token": csrf, "method": "GET", "path": "/weather/*",
                                                             "price": "10000", "pay_to": str(Keypair().pubkey())},
                 cookie)
    assert added.status_code == 303 and "/weather/*" in get(page_path).text

    blocked = post(client, f"/services/{service_id}/delete", {"csrf_token": csrf}, cookie)
    assert blocked.status_code == 409 and "delete them first" in blocked.text
    off = post(client, f"/services/{service_id}/active", {"csrf_token": csrf, "active": "off"}, cookie)
    assert off.status_code == 303 and "inactive" in get(page_path).text

    other_cookie, _ = log_in(client, "owner@beta.test")
    assert client.simulate_get(page_path, cookies={"pw_console_session": other_cookie}).status_code == 404

    route_id = gateway.container.proxies.get_service("acme", service_id).routes.popitem()[0]
    assert post(client, f"/services/{service_id}/routes/{route_id}/delete", {"csrf_token": csrf},
                cookie).status_code == 303
    gone = post(client, f"/services/{service_id}/delete", {"csrf_token": csrf}, cookie)
    assert gone.status_code == 303 and "No services yet" in get("/services").text


def test_a_form_without_its_csrf_token_changes_nothing(gateway):
    client = console_client(gateway.container)
    cookie, _ = log_in(client, "owner@acme.test")
    refused = post(client, "/services", {"name": "X", "domain": "localhost", "port": "9000"}, cookie)
    assert refused.status_code == 403
    assert gateway.container.proxies.list_services("acme") == []
