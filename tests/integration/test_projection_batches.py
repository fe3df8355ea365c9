"""The projection runner applies a batch of notifications in one transaction of its view: one commit per batch,
all or nothing, and a batch that another runner overlapped leaves nothing behind and is read again."""

from __future__ import annotations

from functools import singledispatchmethod
from typing import Any

import pytest
from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import InfrastructureFactory, Tracking
from eventsourcing.projection import EventSourcedProjection, Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import Environment, get_topic

from projections.runner import catch_up
from projections.sql import SqlView


class Counter(Aggregate):
    @event("Created")
    def __init__(self, name: str) -> None:
        self.name = name

    @event("Bumped")
    def bump(self, by: int) -> None:
        pass


class Counters(Application[Any]):
    def start(self, name: str) -> Counter:
        counter = Counter(name)
        self.save(counter)
        return counter


class CountsView(SqlView):
    tables = ("CREATE TABLE IF NOT EXISTS counts (name TEXT PRIMARY KEY, total INTEGER NOT NULL)",)

    def totals(self) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in self.rows("SELECT name, total FROM counts")}


class SqliteCountsView(CountsView, SQLiteTrackingRecorder):
    pass


class CountsProjection(Projection[CountsView]):
    name = "counts"
    topics = (get_topic(Counter.Created), get_topic(Counter.Bumped))
    fail_at: int | None = None  # a notification id whose processing raises

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        if tracking.notification_id == self.fail_at:
            raise RuntimeError("cannot apply this one")
        with self.view.tracked(tracking) as c:
            if isinstance(domain_event, Counter.Created):
                c.execute("INSERT INTO counts VALUES (?, 0)", (domain_event.name,))
            else:
                c.execute("UPDATE counts SET total = total + ? WHERE name = "
                          "(SELECT name FROM counts ORDER BY name LIMIT 1)", (domain_event.by,))


@pytest.fixture
def stores(tmp_path):
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "counters.db")}
    app = Counters(env=env)
    view_env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "counts.db")}
    view = InfrastructureFactory.construct(env=Environment("counts", view_env)).tracking_recorder(SqliteCountsView)
    yield app, view
    app.close()
    view.datastore.close()


def bumps(app: Counters, count: int) -> None:
    counter = app.start("a")
    for _ in range(count):
        counter.bump(by=1)
    app.save(counter)


def count_commits(view: Any) -> list[int]:
    commits, transaction = [], view.datastore.transaction

    def counted(*, commit: bool = False) -> Any:
        if commit:
            commits.append(1)
        return transaction(commit=commit)

    view.datastore.transaction = counted
    return commits


def test_a_batch_of_notifications_is_applied_in_one_commit(stores):
    app, view = stores
    bumps(app, 99)  # 100 notifications: Created and 99 Bumped
    commits = count_commits(view)
    assert catch_up(app, CountsProjection(view)) == 100
    assert view.totals() == {"a": 99}
    assert view.max_tracking_id(app.name) == 100
    assert len(commits) == 1
    assert catch_up(app, CountsProjection(view)) == 0  # nothing left: no write at all
    assert len(commits) == 1


def test_a_failing_event_rolls_back_its_whole_batch_and_the_runner_resumes_there(stores):
    app, view = stores
    bumps(app, 9)
    projection = CountsProjection(view)
    projection.fail_at = 7
    with pytest.raises(RuntimeError):
        catch_up(app, projection)
    assert view.totals() == {}
    assert view.max_tracking_id(app.name) is None
    projection.fail_at = None
    assert catch_up(app, projection) == 10
    assert view.totals() == {"a": 9}


def test_a_batch_overlapping_another_runners_is_read_again_and_nothing_applies_twice(stores):
    app, view = stores
    bumps(app, 9)
    projection = CountsProjection(view)
    with view.batch():  # another runner got there first with the first four notifications
        for notification in app.recorder.select_notifications(start=None, limit=4):
            projection.process_event(app.mapper.to_domain_event(notification), Tracking(app.name, notification.id))
    select, reads = app.recorder.select_notifications, []

    def stale_select(**kwargs: Any) -> Any:  # our runner had read the position before the other one committed
        reads.append(kwargs["start"])
        return select(**{**kwargs, "start": None} if len(reads) == 1 else kwargs)

    app.recorder.select_notifications = stale_select
    assert catch_up(app, projection) == 6
    assert reads == [4, 4]
    assert view.totals() == {"a": 9}
    assert view.max_tracking_id(app.name) == 10


class Tally(Aggregate):
    @event("Opened")
    def __init__(self, name: str) -> None:
        self.name = name


class Tallies(EventSourcedProjection[Any]):
    """An event-sourced projection: a Created counter opens a tally; a bump leads to nothing."""

    topics = (get_topic(Counter.Created), get_topic(Counter.Bumped))

    @singledispatchmethod
    def policy(self, domain_event: Any, processing_event: ProcessingEvent[Any]) -> None:
        pass

    @policy.register
    def _(self, created: Counter.Created, processing_event: ProcessingEvent[Any]) -> None:
        processing_event.collect_events(Tally(created.name))


def test_an_event_sourced_projection_records_its_new_events_and_the_idle_position_once_per_batch(stores, tmp_path):
    app, _ = stores
    bumps(app, 9)  # Created (1 new tally), then 9 bumps that lead to nothing
    tallies = Tallies(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "t.db")})
    idle_writes, insert_tracking = [], tallies.recorder.insert_tracking
    tallies.recorder.insert_tracking = lambda tracking: (idle_writes.append(tracking), insert_tracking(tracking))
    try:
        assert catch_up(app, tallies) == 10
        assert [t.notification_id for t in idle_writes] == [10]
        assert tallies.recorder.max_tracking_id(app.name) == 10
        assert len(tallies.recorder.select_notifications(start=None, limit=10)) == 1  # the one tally opened
        assert catch_up(app, tallies) == 0
    finally:
        tallies.close()


class SnapshottedTallies(Tallies):
    snapshotting_intervals = {Tally: 1}


def test_an_event_sourced_projection_snapshots_its_new_aggregates_at_their_interval(stores, tmp_path):
    app, _ = stores
    bumps(app, 2)
    tallies = SnapshottedTallies(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                                      "SQLITE_DBNAME": str(tmp_path / "t.db")})
    try:
        assert catch_up(app, tallies) == 3
        [opened] = tallies.recorder.select_notifications(start=None, limit=10)
        assert tallies.snapshots is not None
        [snapshot] = tallies.snapshots.get(opened.originator_id)
        assert snapshot.originator_version == 1 and snapshot.state["name"] == "a"
        assert tallies.recorder.max_tracking_id(app.name) == 3
    finally:
        tallies.close()


def test_a_projection_reads_what_its_batch_wrote_so_far(stores):
    app, view = stores
    bumps(app, 2)
    seen = []

    class Reading(CountsProjection):
        def process_event(self, domain_event: Any, tracking: Tracking) -> None:
            super().process_event(domain_event, tracking)
            seen.append(self.view.totals())  # a read model that reads its own rows (the result cache does)

    assert catch_up(app, Reading(view)) == 3
    assert seen == [{"a": 0}, {"a": 1}, {"a": 2}]
