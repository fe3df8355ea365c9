"""A view records its position inside its own transaction (`SqlView.record_position`) with the tracking recorder's
own statement, not the recorder's private `_insert_tracking`: what it records is what the recorder's public
`max_tracking_id` and `has_tracking_id` read, a position that is not past the recorded one is refused, and a
refused batch leaves nothing. On SQLite and PostgreSQL; these fail if eventsourcing changes the statement's
shape (its parameters, or its RETURNING of the new position)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError, Tracking

from interfaces.config import Config
from interfaces.container import build_view
from projections.payment_list import SqlitePaymentListView


@pytest.fixture(params=["embedded", "postgres"])
def view(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    stores = {} if request.param == "embedded" else {"database_url": request.getfixturevalue("postgres_url")}
    view = build_view(Config(data_dir=tmp_path, **stores), "payment_list", SqlitePaymentListView)
    yield view
    view.datastore.close()


def test_a_position_recorded_in_the_views_transaction_is_what_the_recorder_reads(view):
    with view.datastore.transaction(commit=True) as cursor:
        view.record_position(cursor, Tracking("payments", 7))
    assert view.max_tracking_id("payments") == 7
    assert view.has_tracking_id("payments", 7)
    assert view.max_tracking_id("accounts") is None
    with view.tracked(Tracking("payments", 9)):
        pass
    assert view.max_tracking_id("payments") == 9


@pytest.mark.parametrize("position", [9, 8])
def test_a_position_not_past_the_recorded_one_is_refused_and_its_transaction_rolled_back(view, position):
    with view.batch(Tracking("payments", 8), Tracking("payments", 9)) as batch:
        batch.track(Tracking("payments", 8))
    assert view.max_tracking_id("payments") == 9
    with pytest.raises(IntegrityError), view.batch(Tracking("payments", position), Tracking("payments", 12)):
        pytest.fail("a batch whose first notification was applied already must not start")
    with pytest.raises(IntegrityError), view.datastore.transaction(commit=True) as cursor:
        view.record_position(cursor, Tracking("payments", 10))
        view.record_position(cursor, Tracking("payments", position))
    assert view.max_tracking_id("payments") == 9  # the position 10 of the refused transaction did not stay
