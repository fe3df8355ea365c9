"""The production stack's configuration: the database URL as eventsourcing's environment, the store each
application and view gets, `serve`'s refusals, and the arithmetic of `paywarden bench`'s report."""

from __future__ import annotations

from pathlib import Path

import pytest

import interfaces.cli.main as cli
from interfaces.adapters.postgres import FACTORY_TOPIC, postgres_env
from interfaces.cli.bench import Report, answer_of
from interfaces.config import Config, ConfigError, load_config
from interfaces.container import POSTGRES_VIEWS, build_view, store_env
from projections.accounts import AccountsView, PostgresAccountsView, SqliteAccountsView


def test_a_postgres_url_becomes_the_event_stores_environment():
    env = postgres_env("postgresql://pay%40warden:s%3Acret@db.internal:6543/paywarden", pool_max=12,
                       timeout_seconds=3)
    assert env["PERSISTENCE_MODULE"] == FACTORY_TOPIC
    assert (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]) == ("pay@warden", "s:cret")
    assert (env["POSTGRES_HOST"], env["POSTGRES_PORT"], env["POSTGRES_DBNAME"]) == ("db.internal", "6543", "paywarden")
    pool = env["POSTGRES_POOL_SIZE"], env["POSTGRES_MAX_OVERFLOW"], env["POSTGRES_CONNECT_TIMEOUT"]
    assert pool == ("0", "12", "3")
    assert postgres_env("postgres://u@h/d")["POSTGRES_PORT"] == "5432"


def test_a_postgres_url_without_a_database_is_refused_without_showing_the_password():
    with pytest.raises(ConfigError, match="PAYWARDEN_DATABASE_URL") as refused:
        postgres_env("postgresql://user:hunter2@db:5432/")
    assert "hunter2" not in str(refused.value)


@pytest.mark.parametrize("name, value", [
    ("PAYWARDEN_DATABASE_POOL_MAX", "1"), ("PAYWARDEN_DATABASE_TIMEOUT_SECONDS", "0"),
    ("PAYWARDEN_LOCK_MARGIN_MS", "soon"), ("PAYWARDEN_DATABASE_URL", "mysql://db/x"),
    ("PAYWARDEN_REDIS_URL", "localhost:6379"),
])
def test_a_bad_value_stops_start_up_naming_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        load_config({name: value})


def test_each_store_url_selects_its_store(tmp_path: Path):
    assert store_env(Config(data_dir=tmp_path), "payments")["SQLITE_DBNAME"] == str(tmp_path / "payments.db")
    directory = tmp_path / "elsewhere"
    sqlite = store_env(Config(data_dir=tmp_path, database_url=f"sqlite://{directory}"), "payments")
    assert sqlite["SQLITE_DBNAME"] == str(directory / "payments.db")
    postgres = store_env(Config(data_dir=tmp_path, database_url="postgresql://u@h/d", database_pool_max=4), "x")
    assert postgres["PERSISTENCE_MODULE"] == FACTORY_TOPIC and postgres["POSTGRES_MAX_OVERFLOW"] == "4"


class SqliteOrphanView(SqliteAccountsView):
    """A read model nobody wrote a PostgreSQL view for."""


def test_a_view_is_built_as_its_postgres_twin_on_postgres_and_one_without_a_twin_is_refused():
    assert POSTGRES_VIEWS[SqliteAccountsView] is PostgresAccountsView
    assert issubclass(PostgresAccountsView, AccountsView) and PostgresAccountsView.paramstyle == "format"
    with pytest.raises(ConfigError, match="SqliteOrphanView has no PostgreSQL twin"):
        build_view(Config(database_url="postgresql://u@127.0.0.1:1/d"), "orphan", SqliteOrphanView)


@pytest.mark.parametrize("env, message", [
    ({"PAYWARDEN_DEVNET_RPC_URL": "http://127.0.0.1:8899"}, "PAYWARDEN_REDIS_URL"),
    ({}, "in-process sandbox chain"),
])
def test_serve_refuses_several_workers_that_could_not_share_state(monkeypatch, capsys, env, message):
    for name in ("PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL", "PAYWARDEN_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["serve", "--workers", "2"]) == 2
    assert message in capsys.readouterr().err


def test_the_bench_report_names_every_answer_and_its_percentiles():
    report = Report("verify", 100, 8, 2.0, latencies_ms=[float(i) for i in range(1, 101)])
    assert (report.percentile(50), report.percentile(95), report.percentile(99)) == (50.0, 95.0, 99.0)
    assert report.throughput == 50.0
    assert answer_of(200, {"isValid": True, "payer": "x"}) == "200 valid"
    assert answer_of(400, {"isValid": False, "invalidReason": "simulation_failed"}) == "400 simulation_failed"
    assert answer_of(429, {"error": "rate_limited", "message": "..."}) == "429 rate_limited"
    assert answer_of(502, "<html>bad gateway</html>").startswith("502 ")
    report.answers.update({"200 valid": 99, "500 unexpected_verify_error": 1})
    assert "500 unexpected_verify_error   <- unexpected" in report.text()
