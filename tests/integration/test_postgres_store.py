"""PostgreSQL as the event store and read-model database: its own table for each application and view, schema
creation that processes starting at once survive, and the audit trail in the database."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest
from falcon import testing

from application.merchants import Merchants
from interfaces.config import Config
from interfaces.container import build, build_view, store_env
from interfaces.http.facilitator.app import create_app
from interfaces.wiring import api_collaborators
from projections.accounts import PostgresAccountsView, SqliteAccountsView
from tests.conftest import Gateway, make_gateway

pytestmark = pytest.mark.postgres


@pytest.fixture
def postgres_url(empty_postgres_url):
    """An empty database: these tests are about the schema the stores create in one (tests/conftest.py's
    `postgres_url` copies one whose schema is made)."""
    return empty_postgres_url


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {name for (name,) in rows}


def test_each_application_and_view_has_its_own_table_in_one_database(tmp_path: Path, sandbox, postgres_url):
    gateway = make_gateway(tmp_path, sandbox, database_url=postgres_url)
    try:
        assert gateway.post("/verify", gateway.body()).status_code == 200
        names = tables(postgres_url)
        assert {"payments_events", "merchants_events", "accounts_tracking", "accounts_keys"} <= names
        with psycopg.connect(postgres_url) as conn:
            payment_topics = {t for (t,) in conn.execute("SELECT DISTINCT topic FROM payments_events")}
            merchant_topics = {t for (t,) in conn.execute("SELECT DISTINCT topic FROM merchants_events")}
        assert payment_topics == {"domain.payment:Payment.Received", "domain.payment:Payment.Approved"}
        assert merchant_topics and all(t.startswith("domain.merchant:") for t in merchant_topics)
        assert isinstance(gateway.container.accounts, PostgresAccountsView)
    finally:
        gateway.container.close()


def test_processes_starting_at_once_create_the_schema_once_without_failing(tmp_path: Path, postgres_url):
    config = Config(data_dir=tmp_path, database_url=postgres_url)
    built, failures, start = [], [], threading.Barrier(4)

    def start_up() -> None:
        start.wait()
        try:
            built.append(Merchants(store_env(config, "merchants")))
            built.append(build_view(config, "accounts", SqliteAccountsView))
        except Exception as failure:  # noqa: BLE001 - the assertion reports it
            failures.append(failure)

    threads = [threading.Thread(target=start_up) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert failures == [] and len(built) == 8
        assert {"merchants_events", "accounts_tracking", "accounts_merchants"} <= tables(postgres_url)
    finally:
        for item in built:
            item.close() if isinstance(item, Merchants) else item.datastore.close()


def test_a_restart_finds_its_schema_and_its_history(tmp_path: Path, sandbox, postgres_url):
    first = make_gateway(tmp_path, sandbox, database_url=postgres_url)
    body = first.body()
    approved = first.post("/verify", body)
    first.container.close()
    # A new process: same database, same fee payer, nothing carried over in memory.
    container = build(Config(data_dir=tmp_path, database_url=postgres_url), sandbox=sandbox)
    second = Gateway(container, testing.TestClient(create_app(api_collaborators(container))), first.api_key, sandbox,
                     first.fee_payer)
    try:
        replay = second.post("/verify", body)
        assert (replay.status_code, replay.json) == (200, approved.json)
        assert replay.headers.get("Idempotent-Replayed") == "true"
    finally:
        second.container.close()


def test_concurrent_writers_never_let_a_follower_skip_an_event(tmp_path: Path, postgres_url):
    config = Config(data_dir=tmp_path, database_url=postgres_url)
    writers = [Merchants(store_env(config, "merchants")) for _ in range(4)]
    follower = Merchants(store_env(config, "merchants"))
    # Widen the race: each insert dawdles before its commit, so a later insert could commit first.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE FUNCTION dawdle() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$ BEGIN PERFORM pg_sleep(random() * 0.004); RETURN NULL; END; $$")
        conn.execute("CREATE TRIGGER dawdle AFTER INSERT ON merchants_events FOR EACH ROW EXECUTE FUNCTION dawdle()")
    seen, done = [], threading.Event()

    def follow() -> None:
        position = 0
        while True:
            finished = done.is_set()
            batch = follower.recorder.select_notifications(start=position, limit=100, inclusive_of_start=False)
            seen.extend(n.id for n in batch)
            position = batch[-1].id if batch else position
            if finished and not batch:
                return

    def write(app: Merchants, i: int) -> None:
        for j in range(50):
            app.register(f"merchant-{i}-{j}")

    reader = threading.Thread(target=follow)
    reader.start()
    threads = [threading.Thread(target=write, args=(app, i)) for i, app in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    done.set()
    reader.join(30)
    try:
        recorded = [n.id for n in follower.recorder.select_notifications(start=None, limit=1000)]
        assert len(recorded) == 200 and seen == recorded  # in order, and nothing passed over
    finally:
        for app in (*writers, follower):
            app.close()


def test_one_round_trip_inserts_keep_each_applications_events_in_its_own_table(tmp_path: Path, postgres_url):
    config = Config(data_dir=tmp_path, database_url=postgres_url)
    merchants, again = Merchants(store_env(config, "merchants")), Merchants(store_env(config, "merchants"))
    try:
        from application.merchants import MerchantExistsError

        first = merchants.register("acme")
        with pytest.raises(MerchantExistsError):  # the event store refuses the same aggregate id twice
            again.register("acme")
        assert merchants.recorder.max_notification_id() == 1 and merchants.get_merchant("acme").id == first.id
        with psycopg.connect(postgres_url) as conn:
            functions = {f for (f,) in conn.execute("SELECT proname FROM pg_proc WHERE proname LIKE '%_insert'")}
        assert "merchants_events_insert" in functions
    finally:
        merchants.close()
        again.close()
