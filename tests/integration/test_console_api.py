"""The console's JSON API, endpoint by endpoint, over a real gateway on the sandbox chain (embedded store)."""

from __future__ import annotations

import pytest

from domain.merchant import key_prefix
from domain.networks import DEVNET, MAINNET
from tests.dnsserver import TxtServer
from tests.integration.console_helpers import ApiClient, console_client, two_merchants


@pytest.fixture
def dns():
    with TxtServer() as server:
        yield server


@pytest.fixture
def gateway(tmp_path, sandbox, dns):
    yield from two_merchants(tmp_path, sandbox, dns_nameservers=(dns.nameserver,), blocked_domains=("evil.test",))


@pytest.fixture
def console(gateway):
    return console_client(gateway.container)


@pytest.fixture
def acme(console):
    client = ApiClient(console)
    assert client.login("owner@acme.test").status_code == 200
    return client


@pytest.fixture
def beta(console):
    client = ApiClient(console)
    assert client.login("owner@beta.test").status_code == 200
    return client


def test_login_sets_an_httponly_lax_session_cookie_and_me_tells_who_is_logged_in(console):
    client = ApiClient(console)
    result = client.login("Owner@Acme.test")
    cookie = result.cookies["pw_console_session"]
    assert result.status_code == 200 and len(result.json["csrfToken"]) >= 32
    assert cookie.http_only and cookie.same_site == "Lax" and not cookie.secure  # sandbox: plain HTTP
    assert cookie.max_age == 12 * 3600 and len(cookie.value) >= 40
    me = client.request("GET", "/me")
    assert me.json["email"] == "owner@acme.test" and me.json["merchant"] == "acme"
    assert me.json["discoveryEnabled"] is True


def test_every_endpoint_answers_401_without_a_session(console):
    client = ApiClient(console)
    for method, path in [("GET", "/me"), ("GET", "/keys"), ("POST", "/keys"), ("DELETE", "/keys/pw_test_x"),
                         ("GET", "/capabilities"), ("POST", "/capabilities"), ("DELETE", "/capabilities/x"),
                         ("GET", "/domains"), ("POST", "/domains"), ("POST", "/domains/a.test/verify"),
                         ("DELETE", "/domains/a.test"), ("GET", "/discovery"), ("PATCH", "/discovery"),
                         ("GET", "/listings"), ("DELETE", "/listings/x")]:
        result = client.request(method, path, json={})
        assert result.status_code == 401, (method, path)
        assert result.json["error"] == "unauthenticated"


def test_a_wrong_password_and_an_unknown_email_are_answered_identically(console):
    client = ApiClient(console)
    wrong = client.login("owner@acme.test", "not the password")
    unknown = client.login("nobody@acme.test", "not the password")
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json == unknown.json == {"error": "invalid_credentials", "message": "wrong email or password"}
    assert "pw_console_session" not in wrong.cookies and "pw_console_session" not in unknown.cookies


def test_logins_are_throttled_per_account_and_per_ip(console):
    client = ApiClient(console)
    for _ in range(5):
        assert client.login("owner@acme.test", "wrong password!").status_code == 401
    throttled = client.login("owner@acme.test")  # even the right password, now
    assert throttled.status_code == 429 and int(throttled.headers["Retry-After"]) > 0
    assert throttled.json["error"] == "too_many_attempts"
    assert ApiClient(console).login("owner@beta.test").status_code == 200  # another account is not locked
    for n in range(15):  # 20 failures from one address, spread over accounts, lock the address
        ApiClient(console).login(f"guess{n}@acme.test", "wrong password!")
    assert ApiClient(console).login("owner@beta.test").status_code == 429
    assert ApiClient(console).login("owner@beta.test", headers={}).status_code == 429
    # an unknown email is throttled the same as a known one: no enumeration through 429s either
    other_ip = ApiClient(console)
    other_ip.client = console
    assert other_ip.request("POST", "/session", json={"email": "nobody@x.test", "password": "x"},
                            headers={}).status_code == 429


def test_wrong_guesses_sent_at_once_get_no_more_than_the_five_an_account_allows(console):
    """The attempt is counted before the password is checked: guesses that arrive together cannot all pass the
    count while the first ones are still being hashed."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    start = Barrier(12)

    def guess(n: int) -> int:
        client = ApiClient(console)
        start.wait()
        return client.login("owner@acme.test", f"wrong password {n}").status_code

    with ThreadPoolExecutor(12) as pool:
        answers = sorted(pool.map(guess, range(12)))
    assert answers.count(401) == 5 and answers.count(429) == 7, answers
    assert ApiClient(console).login("owner@acme.test").status_code == 429


def test_a_successful_login_forgives_the_accounts_earlier_failures_but_not_the_addresss(console):
    client = ApiClient(console)
    for _ in range(4):
        assert client.login("owner@acme.test", "wrong password!").status_code == 401
    assert client.login("owner@acme.test").status_code == 200
    for _ in range(5):
        assert ApiClient(console).login("owner@acme.test", "wrong password!").status_code == 401
    assert ApiClient(console).login("owner@acme.test").status_code == 429  # 5 failures since the success
    for n in range(9):  # 20 attempts from one address in all, the success and the refused one included
        ApiClient(console).login(f"guess{n}@acme.test", "wrong password!")
    assert ApiClient(console).login("owner@beta.test").status_code == 429


def test_unsafe_requests_need_the_csrf_token_and_the_own_origin(acme):
    assert acme.request("POST", "/keys", json={"env": "test"}, csrf=False).status_code == 403
    wrong = acme.request("POST", "/keys", json={"env": "test"}, headers={"X-CSRF-Token": "forged"})
    assert wrong.status_code == 403 and wrong.json["error"] == "csrf_refused"
    cross_site = acme.request("POST", "/keys", json={"env": "test"}, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross_site.status_code == 403
    other_origin = acme.request("POST", "/keys", json={"env": "test"}, headers={"Origin": "https://evil.test"})
    assert other_origin.status_code == 403
    assert acme.request("GET", "/keys").json["keys"] == [k for k in acme.request("GET", "/keys").json["keys"]]
    assert acme.request("POST", "/keys", json={"env": "test"}).status_code == 201
    # a login form posted from another site is refused too
    assert ApiClient(acme.client).login("owner@acme.test", headers={"Origin": "https://evil.test"}).status_code \
        == 403


def test_a_key_is_shown_once_listed_without_its_secret_used_and_revoked(gateway, acme):
    created = acme.request("POST", "/keys", json={"env": "test", "label": "shop"})
    assert created.status_code == 201
    key = created.json["key"]
    assert created.json["prefix"] == key_prefix(key) and created.json["env"] == "test"
    assert created.json["label"] == "shop" and created.json["service"] == ""
    assert created.json["createdAt"].endswith("Z") and created.json["lastUsedAt"] is None

    listed = acme.request("GET", "/keys")
    assert key not in listed.text and key[8:] not in listed.text
    row = next(k for k in listed.json["keys"] if k["prefix"] == key_prefix(key))
    assert set(row) == {"prefix", "env", "label", "service", "createdAt", "lastUsedAt", "revokedAt"}

    assert gateway.post("/verify", gateway.body(), {"Authorization": f"Bearer {key}"}).status_code == 200
    used = next(k for k in acme.request("GET", "/keys").json["keys"] if k["prefix"] == key_prefix(key))
    assert used["lastUsedAt"] is not None and used["lastUsedAt"] >= created.json["createdAt"]

    assert acme.request("DELETE", f"/keys/{key_prefix(key)}").status_code == 204
    again = acme.request("DELETE", f"/keys/{key_prefix(key)}")
    assert again.status_code == 409 and "already revoked" in again.json["message"]
    revoked = next(k for k in acme.request("GET", "/keys").json["keys"] if k["prefix"] == key_prefix(key))
    assert revoked["revokedAt"] is not None
    assert gateway.post("/verify", gateway.body(), {"Authorization": f"Bearer {key}"}).status_code == 401


def test_bad_key_input_is_a_400_naming_the_field(acme):
    for body, field in [({"env": "prod"}, "env"), ({}, "env"), ({"env": "test", "label": "x" * 101}, "label"),
                        ({"env": "live"}, "env")]:
        result = acme.request("POST", "/keys", json=body)
        assert result.status_code == 400 and result.json["field"] == field, body
        assert result.json["error"] == "invalid_request" and result.json["message"]


def test_another_merchants_objects_are_404(gateway, acme, beta):
    key = acme.request("POST", "/keys", json={"env": "test"}).json
    cap = acme.request("GET", "/capabilities").json["capabilities"][0]
    acme.request("POST", "/domains", json={"domain": "api.acme-shop.test"})
    for method, path in [("DELETE", f"/keys/{key['prefix']}"), ("DELETE", f"/capabilities/{cap['id']}"),
                         ("POST", "/domains/api.acme-shop.test/verify"), ("DELETE", "/domains/api.acme-shop.test"),
                         ("DELETE", "/keys/pw_test_nosuchke"), ("DELETE", "/listings/not-a-uuid"),
                         ("DELETE", "/listings/00000000-0000-0000-0000-000000000000")]:
        result = beta.request(method, path)
        assert result.status_code == 404, (method, path)
        assert result.json["error"] == "not_found"
    assert key["prefix"] not in beta.request("GET", "/keys").text
    assert beta.request("GET", "/domains").json == {"domains": []}
    # and acme's objects are untouched
    assert acme.request("GET", "/keys").json["keys"][0]["revokedAt"] is None
    assert acme.request("GET", "/domains").json["domains"][0]["domain"] == "api.acme-shop.test"


def test_capabilities_are_listed_enabled_validated_and_disabled(gateway, acme):
    listed = acme.request("GET", "/capabilities").json["capabilities"]
    assert [(c["network"], c["asset"]) for c in listed] == [(DEVNET.caip2, DEVNET.usdc_mint)]
    other_mint = "So11111111111111111111111111111111111111112"
    created = acme.request("POST", "/capabilities", json={"network": DEVNET.caip2, "scheme": "exact",
                                                           "asset": other_mint})
    assert created.status_code == 201 and created.json["asset"] == other_mint and created.json["warnings"] == []
    warned = acme.request("POST", "/capabilities", json={"network": MAINNET.caip2, "asset": MAINNET.usdc_mint})
    assert warned.status_code == 201 and "does not serve mainnet" in warned.json["warnings"][0]
    for body, field in [({"network": DEVNET.caip2, "asset": "0xdeadbeef"}, "asset"),
                        ({"network": "solana:unknown", "asset": other_mint}, "network"),
                        ({"network": DEVNET.caip2, "scheme": "upto", "asset": other_mint}, "scheme"),
                        ({"asset": other_mint}, "network")]:
        result = acme.request("POST", "/capabilities", json=body)
        assert result.status_code == 400 and result.json["field"] == field, body
    assert acme.request("DELETE", f"/capabilities/{listed[0]['id']}").status_code == 204
    assert acme.request("DELETE", f"/capabilities/{listed[0]['id']}").status_code == 404
    remaining = {c["id"] for c in acme.request("GET", "/capabilities").json["capabilities"]}
    assert listed[0]["id"] not in remaining and created.json["id"] in remaining
    # the API no longer accepts devnet USDC for acme
    answer = gateway.post("/verify", gateway.body())
    assert answer.json["invalidReason"] == "capability_not_enabled"


def test_a_domain_is_added_verified_through_its_txt_record_and_removed(dns, acme):
    added = acme.request("POST", "/domains", json={"domain": "API.Acme-Shop.test."})
    assert added.status_code == 201
    assert added.json["domain"] == "api.acme-shop.test" and added.json["status"] == "pending"
    assert added.json["dns"]["name"] == "_paywarden-challenge.api.acme-shop.test"
    assert added.json["http"]["url"].startswith("https://api.acme-shop.test/.well-known/paywarden-challenge/")
    assert added.json["http"]["url"].endswith(added.json["http"]["body"])
    assert acme.request("POST", "/domains", json={"domain": "api.acme-shop.test"}).status_code == 409

    refused = acme.request("POST", "/domains/api.acme-shop.test/verify")
    assert refused.status_code == 409 and refused.json["error"] == "domain_not_verified"
    assert "found no TXT record" in refused.json["message"]
    dns.publish(added.json["dns"]["name"], added.json["dns"]["value"])
    verified = acme.request("POST", "/domains/api.acme-shop.test/verify")
    assert verified.status_code == 200 and verified.json == {"status": "verified", "method": "dns"}
    [row] = acme.request("GET", "/domains").json["domains"]
    assert row["status"] == "verified" and row["verifiedAt"] is not None

    assert acme.request("DELETE", "/domains/api.acme-shop.test").status_code == 204
    assert acme.request("GET", "/domains").json == {"domains": []}


@pytest.mark.parametrize("domain, why", [
    ("127.0.0.1", "IP address"), ("localhost", "single-label"), ("co.uk", "public suffix"),
    ("github.io", "public suffix"), ("x.evil.test", "blocked"), ("", "domain"),
])
def test_ip_literals_single_labels_public_suffixes_and_blocked_domains_are_refused(acme, domain, why):
    result = acme.request("POST", "/domains", json={"domain": domain})
    assert result.status_code == 400 and result.json["field"] == "domain"
    assert why in result.json["message"]


def test_discovery_is_read_and_turned_off(gateway, acme):
    assert acme.request("GET", "/discovery").json == {"enabled": True}
    assert acme.request("PATCH", "/discovery", json={"enabled": "no"}).status_code == 400
    assert acme.request("PATCH", "/discovery", json={"enabled": False}).json == {"enabled": False}
    assert acme.request("GET", "/discovery").json == {"enabled": False}
    assert gateway.container.accounts.get_discovery_enabled(
        str(gateway.container.merchants.get_merchant("acme").id)) is False


def test_own_listings_are_listed_confirmed_and_delisted_and_the_catalog_follows(gateway, dns, acme, beta):
    from interfaces.runtime.workers import catch_up_all
    from projections.catalog import list_resources
    from tests.integration.test_discovery import INFO

    container = gateway.container
    added = acme.request("POST", "/domains", json={"domain": "acme.test"}).json  # its listings' domain
    dns.publish(added["dns"]["name"], added["dns"]["value"])
    assert acme.request("POST", "/domains/acme.test/verify").status_code == 200
    catch_up_all(container)
    body = gateway.body()
    body["paymentPayload"]["resource"] = {"url": "https://api.acme.test/weather", "mimeType": "application/json"}
    body["paymentPayload"]["extensions"] = {"bazaar": {"info": INFO}}
    answer = gateway.post("/verify", body)
    assert answer.status_code == 200 and answer.json["isValid"], answer.text
    catch_up_all(container, ["listings", "catalog"])
    [listing] = acme.request("GET", "/listings").json["listings"]
    assert listing["resource"] == "https://api.acme.test/weather"
    # What the payment proposed is not shown until its owner confirms it.
    assert "title" not in listing["metadata"] and listing["proposal"]["title"] == INFO["title"]
    path = f"/listings/{listing['id']}/confirm"
    assert beta.request("POST", path, json={"proposal": listing["proposal"]}).status_code == 404
    stale = {**listing["proposal"], "title": "Not what a payment proposed"}
    assert acme.request("POST", path, json={"proposal": stale}).status_code == 404
    assert acme.request("POST", path, json={"proposal": listing["proposal"]}).status_code == 204
    catch_up_all(container, ["listings", "catalog"])
    [listing] = acme.request("GET", "/listings").json["listings"]
    assert listing["metadata"]["title"] == INFO["title"] and listing["proposal"] is None
    assert list_resources(container.catalog).items[0]["provider"]["name"] == INFO["provider"]["name"]
    assert beta.request("GET", "/listings").json == {"listings": []}
    assert beta.request("DELETE", f"/listings/{listing['id']}").status_code == 404
    assert acme.request("DELETE", f"/listings/{listing['id']}").status_code == 204
    assert acme.request("GET", "/listings").json == {"listings": []}
    assert list_resources(container.catalog).total == 0


def test_logout_ends_the_session(acme):
    token_session = acme.session
    assert acme.request("DELETE", "/session").status_code == 204
    acme.session = token_session  # the old cookie, replayed
    assert acme.request("GET", "/me").status_code == 401


def test_a_domain_a_proxy_service_uses_is_not_removed(gateway, dns, acme):
    added = acme.request("POST", "/domains", json={"domain": "shop.acme.test"}).json
    dns.publish(added["dns"]["name"], added["dns"]["value"])
    assert acme.request("POST", "/domains/shop.acme.test/verify").status_code == 200
    service = gateway.container.proxies.create_service("acme", "Weather", domain="shop.acme.test", subdomain="api")
    refused = acme.request("DELETE", "/domains/shop.acme.test")
    assert refused.status_code == 409 and "proxy service" in refused.json["message"]
    gateway.container.proxies.delete_service("acme", str(service.id))
    assert acme.request("DELETE", "/domains/shop.acme.test").status_code == 204
