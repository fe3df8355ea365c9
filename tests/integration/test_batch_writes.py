"""Statements a read model writes without reading their answer (`Cursor.write`) are queued in the runner's batch and
sent in order, on PostgreSQL as one pipeline: the money and paid-access read models cost a batch a few round trips
instead of one per event, and still read what they wrote, fail as one, and rebuild to the same rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import InfrastructureFactory, PersistenceError, Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.utils import Environment

from interfaces.adapters.postgres import postgres_env
from interfaces.runtime.workers import catch_up_all
from projections.runner import catch_up
from tests.conftest import make_gateway
from tests.integration.test_projection_batches import Counters, CountsProjection, CountsView, SqliteCountsView, bumps

PAYMENTS = 6


class PostgresCountsView(CountsView, PostgresTrackingRecorder):
    paramstyle = "format"


class WritingCounts(CountsProjection):
    """`CountsProjection` with its statements written, not executed; it reads its own rows after each event."""

    seen: list[dict[str, int]]

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            if tracking.notification_id == self.fail_at:
                c.write("UPDATE counts SET total = ? WHERE no_such_column = ?", (1, "a"))  # the batch fails
            elif hasattr(domain_event, "name"):
                c.write("INSERT INTO counts VALUES (?, 0)", (domain_event.name,))
            else:
                c.write("UPDATE counts SET total = total + ? WHERE name = ?", (domain_event.by, "a"))
        if tracking.notification_id % 2 == 0:
            self.seen.append(self.view.totals())


@pytest.fixture(params=["sqlite", "postgres"])
def counts(request, tmp_path):
    app = Counters(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "app.db")})
    if request.param == "sqlite":
        env, view_class = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "v.db")}, \
            SqliteCountsView
    else:
        env, view_class = postgres_env(request.getfixturevalue("postgres_url")), PostgresCountsView
    view = InfrastructureFactory.construct(env=Environment("counts", env)).tracking_recorder(view_class)
    yield app, view
    app.close()
    view.datastore.close()


def test_written_statements_run_in_order_and_a_read_in_the_batch_sees_them(counts):
    app, view = counts
    bumps(app, 5)
    projection = WritingCounts(view)
    projection.seen = []
    assert catch_up(app, projection) == 6
    assert view.totals() == {"a": 5}
    assert projection.seen == [{"a": 1}, {"a": 3}, {"a": 5}]  # notifications 2, 4, 6: every write before each read


def test_a_written_statement_that_fails_rolls_its_whole_batch_back(counts):
    app, view = counts
    bumps(app, 3)
    projection = WritingCounts(view)
    projection.seen, projection.fail_at = [], 3
    with pytest.raises(PersistenceError):  # raised when the queue is sent, before the batch commits
        catch_up(app, projection)
    assert view.totals() == {} and not view.max_tracking_id(app.name)


class Statements:
    """psycopg's statements by the table they name, and the pipelines entered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tables: tuple[str, ...]) -> None:
        self.calls: Counter[str] = Counter()
        execute, executemany, pipeline = psycopg.Cursor.execute, psycopg.Cursor.executemany, \
            psycopg.Connection.pipeline

        def named(kind: str, query: Any) -> None:
            text = query.as_string(None) if hasattr(query, "as_string") else str(query)
            for table in tables:
                if table in text:
                    self.calls[f"{kind} {table}"] += 1
                    break

        def counted_execute(cursor, query, params=None, **kwargs):
            named("execute", query)
            return execute(cursor, query, params, **kwargs)

        def counted_executemany(cursor, query, params_seq, **kwargs):
            named("executemany", query)
            return executemany(cursor, query, params_seq, **kwargs)

        def counted_pipeline(connection):
            self.calls["pipeline"] += 1
            return pipeline(connection)

        monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
        monkeypatch.setattr(psycopg.Cursor, "executemany", counted_executemany)
        monkeypatch.setattr(psycopg.Connection, "pipeline", counted_pipeline)


@pytest.mark.postgres
def test_the_money_and_paid_access_read_models_send_a_batch_of_payments_in_a_few_statements(
        tmp_path, sandbox, postgres_url, monkeypatch):
    gateway = make_gateway(tmp_path, sandbox, database_url=postgres_url)
    try:
        for i in range(PAYMENTS):
            answer = gateway.post("/settle", gateway.body(amount=10_000 + i))
            assert answer.status_code == 200 and answer.json["success"], answer.text
        tables = ("paid_access_payments", "payment_volume_buckets", "payment_volume_payments")  # a bucket's names both
        statements = Statements(monkeypatch, tables)
        assert catch_up_all(gateway.container, ["payment_volume", "paid_access"]) > 0
        # Every payment's events in one batch here: each read model queues its statements (the money read model a
        # payment's row, then its two buckets' upserts, day and hour, one run of one statement; paid access the
        # payer's row, then its confirmation) and sends them in one pipeline, none waiting for its answer alone.
        # One round trip per statement was 4 per payment for the money read model and 2 for paid access.
        assert statements.calls == {"executemany payment_volume_payments": PAYMENTS,
                                    "executemany payment_volume_buckets": PAYMENTS,
                                    "executemany paid_access_payments": 2 * PAYMENTS, "pipeline": 2}, statements.calls
        container = gateway.container
        payer_rows = container.paid_access.rows("SELECT COUNT(*) FROM paid_access_payments WHERE confirmed_at "
                                                "IS NOT NULL")
        assert int(payer_rows[0][0]) == PAYMENTS
        buckets = container.payment_volume.rows("SELECT span, SUM(settled) AS settled, SUM(payments) AS payments FROM "
                                                "payment_volume_buckets GROUP BY span ORDER BY span")
        settled = sum(10_000 + i for i in range(PAYMENTS))
        assert [(r[0], int(r[1]), int(r[2])) for r in buckets] == [("day", settled, PAYMENTS),
                                                                    ("hour", settled, PAYMENTS)]
    finally:
        gateway.container.close()
