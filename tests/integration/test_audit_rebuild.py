"""`paywarden audit rebuild --check`: every read model replayed from the events equals the live one, on SQLite and
on PostgreSQL with Redis; a row changed by hand is reported, and the live views are left as they were."""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from domain.clients import merchant_client_id
from interfaces.cli.main import main
from interfaces.runtime.workers import catch_up_all
from tests.conftest import USDC, make_gateway
from tests.integration.test_discovery import INFO, FakeResolver


@pytest.fixture(params=["embedded", "postgres+redis"])
def workload(request, tmp_path, sandbox, monkeypatch):
    """A mixed workload: verifies, settles, a rejection, a discovery listing, merchant changes; views caught up."""
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    options = {}
    if request.param == "postgres+redis":
        options = {"database_url": request.getfixturevalue("postgres_url"),
                   "redis_url": request.getfixturevalue("redis_url")}
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", options["database_url"])
        monkeypatch.setenv("PAYWARDEN_REDIS_URL", options["redis_url"])
    gateway = make_gateway(tmp_path, sandbox, resolver=FakeResolver(), **options)
    listed = gateway.body(amount=USDC // 50)
    # A sandbox merchant lists a loopback URL without verifying a domain (docs/discovery.md).
    listed["paymentPayload"]["resource"] = {"url": "http://localhost:8080/forecast"}
    listed["paymentPayload"]["extensions"] = {"bazaar": {"info": INFO}}
    assert gateway.post("/verify", listed).status_code == 200
    assert gateway.post("/settle", gateway.body(amount=USDC // 20)).status_code == 200
    verified = gateway.body(amount=USDC // 25)
    assert gateway.post("/verify", verified).status_code == 200
    assert gateway.post("/settle", verified).status_code == 200
    assert gateway.post("/verify", gateway.body(payTo=str(gateway.payer.pubkey()))).status_code == 400
    gateway.container.merchants.set_rate_limit("acme", 500)
    gateway.container.merchants.register("globex")
    catch_up_all(gateway.container)
    owner = merchant_client_id(gateway.container.merchants.get_merchant("acme").id)
    [(listing, _, proposal)] = gateway.container.catalog.list_owned(owner)
    gateway.container.listings.confirm(UUID(listing), owner, proposal)  # the owner shows it (the console's button)
    catch_up_all(gateway.container)
    assert gateway.client.simulate_get("/discovery/resources").json["items"][0]["metadata"]["title"] == INFO["title"]
    yield gateway, request.param
    gateway.container.close()


def test_rebuilt_read_models_equal_the_live_ones_after_a_mixed_workload(workload, capsys):
    gateway, store = workload
    assert main(["audit", "rebuild", "--check"]) == 0
    captured = capsys.readouterr()  # the results on stdout, where `> report.txt` puts them; nothing on stderr
    assert captured.err == ""
    for name in ("accounts", "catalog", "payment_list", "payment_volume"):
        assert f"{name}: " in captured.out and "equal" in captured.out
    assert "payment_list: 12 events replayed" in captured.out  # 2 + 4 + 4 events of the paid, 2 of the rejected
    if store == "postgres+redis":
        assert "result_cache: " in captured.out
    assert main(["audit", "rebuild", "--check", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {row["read_model"] for row in rows} >= {"accounts", "catalog", "payment_list", "payment_volume"}
    assert all(row["equal"] is True and row["differences"] == [] for row in rows)
    assert next(row["events"] for row in rows if row["read_model"] == "payment_list") == 12


def test_a_row_changed_by_hand_is_reported_and_the_exit_status_is_1(workload, capsys):
    gateway, store = workload
    view = gateway.container.payment_list
    with view.datastore.transaction(commit=True) as c:
        c.execute(view.sql("UPDATE payment_list SET amount = ? WHERE state = ?"), ("1", "CONFIRMED"))
    with gateway.container.accounts.datastore.transaction(commit=True) as c:
        c.execute(gateway.container.accounts.sql("DELETE FROM accounts_merchants WHERE name = ?"), ("globex",))
    catalog = gateway.container.catalog  # the search index is a read model like the others (SQLite's is FTS5)
    with catalog.datastore.transaction(commit=True) as c:
        c.execute(catalog.sql("UPDATE catalog_search SET head = ?"), ("tampered",))
    volume = gateway.container.payment_volume
    with volume.datastore.transaction(commit=True) as c:
        c.execute(volume.sql("UPDATE payment_volume_buckets SET settled = settled + 1 WHERE span = ?"), ("day",))
    assert main(["audit", "rebuild", "--check"]) == 1
    out = capsys.readouterr().out
    assert "catalog_search: row" in out and "tampered" in out
    assert "payment_volume_buckets: row " in out and "differs" in out
    assert out.count("payment_list: row ") == 2 and "differs" in out and '"1"' in out
    assert "accounts_merchants: row" in out and "missing from the live view" in out and "globex" in out
    # The live views were only read: the hand-made change is still there.
    assert {r.amount for r in view.get_page(state="CONFIRMED").items} == {1}
    if store == "postgres+redis":
        gateway.container.redis.set("paywarden:result:settle:" + "0" * 64, "{}")
        assert main(["audit", "rebuild", "--check"]) == 1
        assert "is in Redis but no event wrote it" in capsys.readouterr().out
