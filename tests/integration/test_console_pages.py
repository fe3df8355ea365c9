"""The console's pages through plain HTTP forms (no browser, no JavaScript): the password link, field errors
beside their field, CSRF on forms, and another merchant's objects."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from tests.conftest import make_gateway
from tests.integration.console_helpers import ORIGIN, PASSWORD, add_owner, console_client

FORM = {"Content-Type": "application/x-www-form-urlencoded", "Origin": ORIGIN}


@pytest.fixture
def gateway(tmp_path, sandbox):
    gateway = make_gateway(tmp_path, sandbox)
    yield gateway
    gateway.container.close()


def post(client, path, fields, cookie=None):
    return client.simulate_post(path, body=urlencode(fields), headers=FORM,
                                cookies={"pw_console_session": cookie} if cookie else None)


def log_in(client, email, password=PASSWORD):
    answer = post(client, "/login", {"email": email, "password": password})
    assert answer.status_code == 303, answer.text
    cookie = answer.cookies["pw_console_session"].value
    page = client.simulate_get("/keys", cookies={"pw_console_session": cookie})
    return cookie, re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


def test_a_password_link_sets_the_password_once_and_then_the_owner_logs_in(gateway):
    container = gateway.container
    token = container.merchants.add_login("acme", "new@acme.test")
    client = console_client(container)
    form = client.simulate_get("/password", params={"token": token})
    assert form.status_code == 200 and token in form.text
    short = post(client, "/password", {"token": token, "password": "short"})
    assert short.status_code == 400 and 'id="e-password"' in short.text and "10 to 1024" in short.text
    done = post(client, "/password", {"token": token, "password": "a brand new password"})
    assert done.status_code == 200 and "Your password is set" in done.text
    again = post(client, "/password", {"token": token, "password": "another new password"})
    assert again.status_code == 409 and "not valid" in again.text
    log_in(client, "new@acme.test", "a brand new password")


def test_a_refused_form_shows_the_error_beside_its_field_and_keeps_the_input(gateway):
    add_owner(gateway.container, "acme", "owner@acme.test")
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    answer = post(client, "/domains", {"csrf_token": csrf, "domain": "10.0.0.1"}, cookie)
    assert answer.status_code == 400
    assert re.search(r'id="f-domain"[^>]*value="10.0.0.1"', answer.text)
    assert re.search(r'<p class="error" id="e-domain">[^<]*IP address', answer.text)
    bad_env = post(client, "/keys", {"csrf_token": csrf, "env": "prod"}, cookie)
    assert bad_env.status_code == 400 and 'id="e-env"' in bad_env.text


def test_forms_without_the_session_token_or_from_another_site_are_refused(gateway):
    add_owner(gateway.container, "acme", "owner@acme.test")
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    assert post(client, "/keys", {"env": "test"}, cookie).status_code == 403
    assert post(client, "/keys", {"env": "test", "csrf_token": "forged"}, cookie).status_code == 403
    cross = client.simulate_post("/keys", body=urlencode({"env": "test", "csrf_token": csrf}),
                                 headers={**FORM, "Sec-Fetch-Site": "cross-site"},
                                 cookies={"pw_console_session": cookie})
    assert cross.status_code == 403
    assert post(client, "/keys", {"env": "test", "csrf_token": csrf}, cookie).status_code == 201


def test_pages_need_a_login_and_another_merchants_objects_are_not_found(gateway):
    add_owner(gateway.container, "acme", "owner@acme.test")
    add_owner(gateway.container, "beta", "owner@beta.test")
    client = console_client(gateway.container)
    for path in ("/", "/keys", "/capabilities", "/domains", "/discovery"):
        answer = client.simulate_get(path)
        assert answer.status_code == 303 and answer.headers["Location"].endswith("/login"), path
    acme_key = gateway.api_key[:16]
    cookie, csrf = log_in(client, "owner@beta.test")
    refused = post(client, f"/keys/{acme_key}/revoke", {"csrf_token": csrf}, cookie)
    assert refused.status_code == 404
    assert gateway.container.accounts.get_merchant_key(str(gateway.container.merchants.get_merchant("acme").id),
                                             acme_key).revoked_at is None
    wrong = post(client, "/login", {"email": "owner@beta.test", "password": "not it at all"})
    unknown = post(client, "/login", {"email": "nobody@beta.test", "password": "not it at all"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.text.replace("owner@beta.test", "X") == unknown.text.replace("nobody@beta.test", "X")


def test_a_domain_not_yet_published_is_a_409_on_the_domains_page_and_removing_it_says_so(gateway):
    add_owner(gateway.container, "acme", "owner@acme.test")
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    assert post(client, "/domains", {"csrf_token": csrf, "domain": "api.acme.test"}, cookie).status_code == 303

    early = post(client, "/domains/api.acme.test/verify", {"csrf_token": csrf}, cookie)
    assert early.status_code == 409 and "api.acme.test is not verified yet" in early.text
    assert "<h2>Your domains</h2>" in early.text and 'data-domain="api.acme.test"' in early.text  # the page, again
    assert post(client, "/domains/api.acme.test/publish", {"csrf_token": csrf}, cookie).status_code == 404

    removed = post(client, "/domains/api.acme.test/remove", {"csrf_token": csrf}, cookie)
    assert removed.status_code == 303 and removed.headers["Location"] == "/domains?done=removed"
    page = client.simulate_get("/domains?done=removed", cookies={"pw_console_session": cookie})
    assert "Domain removed." in page.text and 'data-domain="api.acme.test"' not in page.text
    merchant_id = str(gateway.container.merchants.get_merchant("acme").id)
    assert gateway.container.accounts.list_domains(merchant_id) == []


def test_a_form_target_answers_get_with_405_not_a_page_or_a_500(gateway):
    add_owner(gateway.container, "acme", "owner@acme.test")
    client = console_client(gateway.container)
    cookie, _ = log_in(client, "owner@acme.test")
    for path in ("/logout", "/keys/pw_test_abcdefgh/revoke", "/capabilities/1/disable", "/domains/x.test/verify",
                 "/listings/1/delist", "/services/1/active", "/services/1/delete", "/services/1/routes",
                 "/services/1/routes/2/delete", "/webhooks/1/enable", "/webhooks/1/replay",
                 "/webhooks/1/deliveries/2/resend"):
        answer = client.simulate_get(path, cookies={"pw_console_session": cookie})
        assert answer.status_code == 405 and "POST" in answer.headers["Allow"], path
    assert client.simulate_get("/domains", cookies={"pw_console_session": cookie}).status_code == 200


def test_the_key_form_offers_the_services_to_scope_to_and_shows_a_refused_one_beside_its_field(gateway):
    add_owner(gateway.container, "acme", "owner@acme.test")
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    page = client.simulate_get("/keys", cookies={"pw_console_session": cookie})
    assert re.search(r'<label for="f-service">Scoped to service</label>\s*<select id="f-service" name="service">',
                     page.text)
    assert '<option value="">none: any payment of yours</option>' in page.text
    assert "<small>A scoped key verifies and settles only payments" in page.text
    refused = post(client, "/keys", {"csrf_token": csrf, "env": "test", "service": "no-such-service"}, cookie)
    assert refused.status_code in (400, 404), refused.status_code
    assert 'id="f-service" name="service" aria-invalid="true" aria-describedby="e-service"' in refused.text
    assert '<p class="error" id="e-service">' in refused.text
