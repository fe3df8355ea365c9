"""`paywarden-bench load` writes a history the applications themselves would have written: replayed from scratch,
every read model equals the one the loader built (`paywarden audit rebuild --check`), on SQLite and PostgreSQL;
the audit log holds every event; the catalog's kept totals equal a count of its rows."""

from __future__ import annotations

import json

import pytest

from interfaces.bench.main import main as bench
from interfaces.cli.main import main
from interfaces.config import load_config
from interfaces.container import build
from projections.catalog import list_resources


@pytest.fixture(params=["embedded", "postgres+redis"])
def store_env(request, tmp_path, monkeypatch):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    if request.param == "postgres+redis":
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", request.getfixturevalue("postgres_url"))
        monkeypatch.setenv("PAYWARDEN_REDIS_URL", request.getfixturevalue("redis_url"))
    return request.param


def test_a_loaded_store_replays_into_the_same_read_models(store_env, capsys):
    assert bench(["load", "--events", "3000", "--listings", "150", "--merchants", "12", "--seed", "7",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["payment_events"] >= 3000 and summary["merchants"] == 12
    assert summary["listings"] == 150
    assert set(summary["outcomes"]) == {"settled", "verified", "rejected", "failed"}
    # Every payment-following read model saw every payment event, and the audit log every event of every store.
    assert summary["projected"]["payments log"] == summary["payment_events"]
    assert summary["projected"]["audit_log"] >= summary["payment_events"] + 12 + summary["projected"]["catalog"]

    assert main(["audit", "rebuild", "--check"]) == 0
    out = capsys.readouterr().out
    for name in ("accounts", "catalog", "payment_list", "result_cache"):
        assert f"{name}: " in out
    assert out.count("; equal") >= 5 and "differ" not in out

    container = build(load_config())
    try:
        catalog = container.catalog
        everything = list_resources(catalog, limit=100, offset=0)
        assert everything.total == 150
        rows = catalog.get_rows()
        for kind in ("http", "websocket", "grpc"):
            assert list_resources(catalog, kind=kind).total == sum(1 for r in rows if r[3] == kind)
        # Nothing is left to do for a worker started on this store.
        from interfaces.runtime.workers import catch_up_all

        assert catch_up_all(container) == 0
    finally:
        container.close()
    # The discovery benchmark reads this catalog (in process): every kind of query answers.
    url = load_config().database_url or f"sqlite://{load_config().data_dir}"
    assert bench(["history", "--direct", "--store", f"loaded={url}", "--rounds", "1", "--queries", "2"]) == 0
    out = capsys.readouterr().out
    assert "loaded: 150 listings in the catalog" in out and "two tags" in out and "deep" in out
    if store_env == "embedded":  # the same store as a fresh copy, beside a new empty one: the copy has it all
        assert bench(["history", "--direct", "--store", f"copy={'copy:' + url.removeprefix('sqlite://')}",
                     "--store", "empty=new", "--rounds", "1", "--queries", "2"]) == 0
        out = capsys.readouterr().out
        assert "copy: 150 listings in the catalog" in out and "empty: 0 listings in the catalog" in out
