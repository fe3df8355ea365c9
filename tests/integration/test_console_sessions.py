"""Issue 27, findings 1 and 2: the console's session store holds nothing replayable, and a login's sessions end
when its password changes or on "log out everywhere" — on the embedded store (SQLite file) and on
PostgreSQL + Redis."""

from __future__ import annotations

import json
import os
import sqlite3
import stat

import pytest

from interfaces.container import sqlite_dir
from interfaces.http.console.sessions import COOKIE, RedisSessionStore, id_hash
from tests.integration.console_helpers import PASSWORD, ApiClient, console_client, two_merchants

NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture(params=["embedded", "postgres+redis"])
def gateway(request, tmp_path, sandbox):
    options = {} if request.param == "embedded" else {
        "database_url": request.getfixturevalue("postgres_url"), "redis_url": request.getfixturevalue("redis_url")}
    yield from two_merchants(tmp_path, sandbox, **options)


@pytest.fixture
def console(gateway):
    return console_client(gateway.container)


def logged_in(console, email="owner@acme.test", password=PASSWORD) -> ApiClient:
    client = ApiClient(console)
    assert client.login(email, password).status_code == 200
    return client


def stored_values(gateway) -> list[str]:
    """Every value the session store holds, as text."""
    container = gateway.container
    if container.redis is not None:
        keys = container.redis.keys("paywarden:console:*")
        values = []
        for key in keys:
            kind = container.redis.type(key).decode()
            if kind == "string":
                values.append(container.redis.get(key).decode())
            else:
                values.append(json.dumps([m.decode() for m in container.redis.zrange(key, 0, -1)]))
        return [k.decode() for k in keys] + values
    path = sqlite_dir(container.config) / "console-sessions.db"
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return [json.dumps(row) for t in tables for row in db.execute(f"SELECT * FROM {t}")]  # noqa: S608
    finally:
        db.close()


def test_the_store_holds_neither_the_cookie_nor_the_csrf_token(gateway, console):
    acme = logged_in(console)
    stored = "\n".join(stored_values(gateway))
    assert id_hash(acme.session) in stored  # the session is there, under the hash of its id
    assert acme.session not in stored and acme.csrf not in stored
    # what the store holds does not open a session, as a cookie or as a token
    for value in stored_values(gateway):
        thief = ApiClient(console, session=value, csrf=value)
        assert thief.request("GET", "/me").status_code == 401
    assert acme.request("POST", "/keys", json={"env": "test"}, csrf=False,
                        headers={"X-CSRF-Token": id_hash(acme.session)}).status_code == 403
    me = acme.request("GET", "/me")
    assert me.status_code == 200 and me.json["csrfToken"] == acme.csrf  # derived again, the same
    assert acme.request("POST", "/keys", json={"env": "test"}).status_code == 201


@pytest.mark.parametrize("gateway", ["embedded"], indirect=True)  # the file of the embedded store
def test_the_sqlite_session_file_is_private(gateway, console):
    logged_in(console)
    path = sqlite_dir(gateway.container.config) / "console-sessions.db"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("gateway", ["postgres+redis"], indirect=True)  # SQLite drops the old table when it opens
def test_an_older_session_record_holding_the_id_is_refused_and_removed(gateway, console):
    """A session written before this change (its record held the id and token) is not honoured."""
    old_id = "x" * 43
    key = RedisSessionStore.PREFIX + id_hash(old_id)
    gateway.container.redis.set(key, json.dumps({"id": old_id, "merchant_id": "m", "merchant": "acme",
                                                 "email": "owner@acme.test", "csrf": "t", "expires_at": 4e9}))
    assert ApiClient(console, session=old_id, csrf="t").request("GET", "/me").status_code == 401
    assert gateway.container.redis.get(key) is None


def test_a_password_link_ends_every_older_session_of_the_login(gateway, console):
    container = gateway.container
    first, second = logged_in(console), logged_in(console)
    beta = logged_in(console, "owner@beta.test")
    token = container.merchants.invite("owner@acme.test")
    answer = console.simulate_post("/password", body=f"token={token}&password={NEW_PASSWORD.replace(' ', '+')}",
                                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 200
    for old in (first, second):
        assert old.request("GET", "/me").status_code == 401
    assert beta.request("GET", "/me").status_code == 200  # another login is untouched
    assert logged_in(console, password=NEW_PASSWORD).request("GET", "/me").status_code == 200


def test_a_password_changed_elsewhere_ends_the_sessions_opened_with_the_old_one(gateway, console):
    """`paywarden up` resetting the sandbox password, or any other process: the session is refused."""
    acme = logged_in(console)
    gateway.container.merchants.set_password("owner@acme.test", NEW_PASSWORD)
    assert acme.request("GET", "/me").status_code == 401


def test_log_out_everywhere_ends_every_session_of_the_login_only(gateway, console):
    here, there = logged_in(console), logged_in(console)
    beta = logged_in(console, "owner@beta.test")
    assert here.request("DELETE", "/sessions", csrf=False).status_code == 403  # needs the token
    assert here.request("DELETE", "/sessions").status_code == 204
    assert here.request("GET", "/me").status_code == 401 and there.request("GET", "/me").status_code == 401
    assert beta.request("GET", "/me").status_code == 200


def test_log_out_everywhere_from_the_pages(gateway, console):
    here, there = logged_in(console), logged_in(console)
    page = console.simulate_get("/", cookies={COOKIE: here.session})
    assert 'formaction="/logout-everywhere"' in page.text and "Log out everywhere" in page.text
    done = console.simulate_post("/logout-everywhere", body=f"csrf_token={here.csrf}",
                                 cookies={COOKIE: here.session},
                                 headers={"Content-Type": "application/x-www-form-urlencoded",
                                          "Sec-Fetch-Site": "same-origin"})
    assert done.status_code == 303 and done.headers["location"].endswith("/login")
    assert there.request("GET", "/me").status_code == 401


def test_production_names_the_cookie_with_the_host_prefix(gateway):
    """`__Host-`: Secure, Path=/ and no Domain, so no subdomain (a merchant's proxied host) can set or shadow it."""
    from dataclasses import replace

    from falcon import testing

    from interfaces.http.console.app import create_app
    from interfaces.wiring import console_collaborators

    c = replace(console_collaborators(gateway.container), secure_cookies=True)
    console = testing.TestClient(create_app(c))
    answer = console.simulate_post("/api/v1/session", json={"email": "owner@acme.test", "password": PASSWORD},
                                   headers={"Sec-Fetch-Site": "same-origin"})
    assert answer.status_code == 200 and COOKIE not in answer.cookies
    cookie = answer.cookies["__Host-" + COOKIE]
    assert cookie.secure and cookie.path == "/" and cookie.domain is None and cookie.http_only
    assert console.simulate_get("/api/v1/me", cookies={"__Host-" + COOKIE: cookie.value}).status_code == 200
    assert console.simulate_get("/api/v1/me", cookies={COOKIE: cookie.value}).status_code == 401


def test_production_requires_the_server_key_the_tokens_are_derived_with(tmp_path, monkeypatch, capsys):
    from cryptography.fernet import Fernet
    from solders.keypair import Keypair

    from interfaces.cli.main import main
    from interfaces.config import load_config

    keypair = tmp_path / "fee.json"
    keypair.write_text(str(list(bytes(Keypair()))))
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_MODE", "production")
    monkeypatch.setenv("PAYWARDEN_FEE_PAYER_KEYPAIRS", str(keypair))
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path / "data"))

    def started(*_args, **_kwargs):
        raise AssertionError("serve started without PAYWARDEN_SECRET_KEY")

    monkeypatch.setattr("interfaces.runtime.supervisor.supervise", started)
    monkeypatch.setattr(os, "execvp", started)
    assert main(["serve", "--console-bind", "127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paywarden: PAYWARDEN_SECRET_KEY is required in production for the console's CSRF")
    from interfaces.adapters.secret_box import CONSOLE_CSRF, derived_key

    one, two = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    config = load_config()
    assert derived_key(config, CONSOLE_CSRF, {"PAYWARDEN_SECRET_KEY": f"{one},{two}"}) == \
        derived_key(config, CONSOLE_CSRF, {"PAYWARDEN_SECRET_KEY": one})  # the first key derives
    assert derived_key(config, CONSOLE_CSRF, {"PAYWARDEN_SECRET_KEY": two}) != \
        derived_key(config, CONSOLE_CSRF, {"PAYWARDEN_SECRET_KEY": one})
