"""A projection applies a batch of events in one transaction; what it reads while applying one must include what
the batch wrote before it (a payment's Received and Approved arrive in one batch: the Approved reads the row the
Received wrote). On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from eventsourcing.persistence import Tracking

from interfaces.config import Config
from interfaces.container import build_view
from projections.results import SqliteResultCacheView


@pytest.fixture(params=["embedded", "postgres"])
def config(request, tmp_path):
    if request.param == "postgres":
        return Config(database_url=request.getfixturevalue("postgres_url"), data_dir=tmp_path)
    return Config(data_dir=tmp_path)


def test_reads_inside_a_batch_see_the_batch_writes_and_a_failed_batch_leaves_nothing(config):
    view = build_view(config, "result_cache", SqliteResultCacheView)
    try:
        with view.batch():
            view.record(Tracking("Payments", 1), payment_id="p1", payment={"state": "RECEIVED"})
            assert view.payment("p1") == {"state": "RECEIVED"}
            view.record(Tracking("Payments", 2), payment_id="p1", payment={"state": "APPROVED"})
        assert view.payment("p1") == {"state": "APPROVED"} and view.max_tracking_id("Payments") == 2
        with pytest.raises(RuntimeError), view.batch():
            view.record(Tracking("Payments", 3), payment_id="p2", payment={"state": "RECEIVED"})
            assert view.payment("p2") == {"state": "RECEIVED"}
            raise RuntimeError("the worker dies mid-batch")
        assert view.payment("p2") is None and view.max_tracking_id("Payments") == 2
    finally:
        view.datastore.close()
