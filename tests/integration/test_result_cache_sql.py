"""The terminal result cache without Redis (the embedded default, and PostgreSQL alone): SQL tables filled only
by `ResultCacheProjection`, read by the Payments application when another request holds the payment's lock.
Until the projection catches up a duplicate is answered from the event store; after, from the cache alone, with
the same answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from solders.keypair import Keypair

from application.outcomes import terminal_entries
from domain.codes import Code
from interfaces.runtime.workers import catch_up_all
from projections.results import PostgresResultCacheView, SqliteResultCacheView
from tests.conftest import make_gateway
from tests.integration.test_facilitator_http import key_of


@pytest.fixture(params=["embedded", "postgres"])
def database(request: pytest.FixtureRequest) -> dict[str, str]:
    return {} if request.param == "embedded" else {"database_url": request.getfixturevalue("postgres_url")}


def test_the_sql_result_cache_is_filled_by_its_projection_and_answers_as_the_event_store(tmp_path: Path, sandbox,
                                                                                         database):
    g = make_gateway(tmp_path, sandbox, **database)
    try:
        view = g.container.result_cache
        assert isinstance(view, PostgresResultCacheView if database else SqliteResultCacheView)
        settled, rejected = g.body(), g.body(g.transaction(pay_to=Keypair().pubkey()))
        assert g.post("/settle", settled).status_code == 200
        assert g.post("/verify", rejected).json["invalidReason"] == Code.RECIPIENT_MISMATCH

        # The application writes nothing to the cache: before the projection runs, the event store answers.
        payments = g.container.payments
        keys = {name: key_of(g, body) for name, body in (("settled", settled), ("rejected", rejected))}
        assert all(view.get(key, op) is None for key in keys.values() for op in ("verify", "settle"))
        behind = [g.post("/verify", settled).json, g.post("/settle", settled).json, g.post("/verify", rejected).json]
        assert behind[0]["invalidReason"] == behind[1]["errorReason"] == Code.DUPLICATE_SETTLEMENT

        # The projection writes exactly what `terminal_entries` (the application's rule) says.
        assert catch_up_all(g.container, ["result_cache"]) > 0
        for key in keys.values():
            assert {op: view.get(key, op) for op in ("verify", "settle") if view.get(key, op)} == terminal_entries(
                payments.get_payment(key))
        assert set(terminal_entries(payments.get_payment(keys["settled"]))) == {"verify", "settle"}

        # Caught up, a settle that finds its payment held by another request (the lock is taken first; the event
        # store answers whoever gets it) is answered from the cache alone, with the same answer. A verify takes no
        # lock (docs/facilitator.md): held or not, the event store answers it, the same answer.
        with payments._locks.hold(keys["settled"], 10), payments._locks.hold(keys["rejected"], 10):
            verifies = [g.post("/verify", settled), g.post("/verify", rejected)]
            payments.repository.get = _no_event_store
            try:
                held = g.post("/settle", settled)
            finally:
                del payments.repository.get
        assert [verifies[0].json, held.json, verifies[1].json] == behind
        assert verifies[1].headers.get("Idempotent-Replayed") == "true"
    finally:
        g.container.close()


def _no_event_store(*_, **__):
    raise AssertionError("a cached result must not read the event store")
