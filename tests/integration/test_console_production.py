"""Two console workers on PostgreSQL and Redis, as in production: a session made by one is honoured by the other,
a logout on one ends it on both, failed logins count across both, and what one writes the other shows."""

from __future__ import annotations

import pytest

from interfaces.config import Config
from interfaces.container import build
from tests.conftest import make_gateway
from tests.integration.console_helpers import ApiClient, add_owner, console_client

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
def workers(tmp_path, sandbox, postgres_url, redis_url, monkeypatch):
    from cryptography.fernet import Fernet

    # every host of a deployment has the same PAYWARDEN_SECRET_KEY (CSRF tokens are derived with it)
    monkeypatch.setenv("PAYWARDEN_SECRET_KEY", Fernet.generate_key().decode())
    gateway = make_gateway(tmp_path, sandbox, database_url=postgres_url, redis_url=redis_url)
    add_owner(gateway.container, "acme", "owner@acme.test")
    second = build(Config(data_dir=tmp_path / "second", database_url=postgres_url, redis_url=redis_url),
                   sandbox=sandbox)
    yield console_client(gateway.container), console_client(second), gateway
    second.close()
    gateway.container.close()


def test_two_console_workers_share_sessions_logouts_throttling_and_data(workers):
    one, two, gateway = workers
    assert gateway.container.accounts.__class__.__name__ == "PostgresAccountsView"
    on_one = ApiClient(one)
    assert on_one.login("owner@acme.test").status_code == 200

    # the same cookie and CSRF token on the other worker
    on_two = ApiClient(two, on_one.session, on_one.csrf)
    assert on_two.request("GET", "/me").json["merchant"] == "acme"
    created = on_two.request("POST", "/keys", json={"env": "test", "label": "from two"})
    assert created.status_code == 201
    listed = on_one.request("GET", "/keys").json["keys"]
    assert any(k["prefix"] == created.json["prefix"] and k["label"] == "from two" for k in listed)
    # last use, recorded by the API in PostgreSQL, shows on both workers
    headers = {"Authorization": f"Bearer {created.json['key']}"}
    assert gateway.post("/verify", gateway.body(), headers).json["isValid"]
    for client in (on_one, on_two):
        [used] = [k for k in client.request("GET", "/keys").json["keys"] if k["prefix"] == created.json["prefix"]]
        assert used["lastUsedAt"] is not None
    # the overview's figures come from the payments read model, in PostgreSQL too
    from datetime import UTC, datetime

    from interfaces.runtime.workers import catch_up_all

    catch_up_all(gateway.container, ["payment_list"])
    merchant_id = on_one.request("GET", "/me").json["merchantId"]
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert gateway.container.payment_list.get_day(merchant_id, today).verifies == 1
    assert [p.state for p in gateway.container.payment_list.get_page(merchant_id=merchant_id).items] == ["APPROVED"]

    # a logout on one worker ends the session on both
    assert on_two.request("DELETE", "/session").status_code == 204
    assert on_one.request("GET", "/me").status_code == 401
    assert on_two.request("GET", "/me").status_code == 401

    # failed logins are counted in Redis: three on one worker and two on the other lock the account on both
    for client in (one, one, one, two, two):
        assert ApiClient(client).login("owner@acme.test", "wrong password!").status_code == 401
    assert ApiClient(one).login("owner@acme.test").status_code == 429
    assert ApiClient(two).login("owner@acme.test").status_code == 429
