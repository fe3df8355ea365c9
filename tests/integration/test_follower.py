"""One reader of an application's log for several projections (`projections.runner.Follower`, what the projection
worker runs): each batch is read and decoded once; every projection applies its share in its own transaction with
its own tracking; a failing or overtaken projection catches up alone and never holds up the others; nothing is
applied twice, across restarts too."""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.persistence import InfrastructureFactory
from eventsourcing.utils import Environment

import projections.runner as runner
from projections.runner import Follower, catch_up
from tests.integration.test_projection_batches import Counters, CountsProjection, SqliteCountsView, bumps


@pytest.fixture
def stores(tmp_path):
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "counters.db")}
    app = Counters(env=env)
    views = []

    def view(name: str) -> Any:
        view_env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / f"{name}.db")}
        made = InfrastructureFactory.construct(env=Environment(name, view_env)).tracking_recorder(SqliteCountsView)
        views.append(made)
        return made

    yield app, view
    app.close()
    for made in views:
        made.datastore.close()


def counting(app: Any) -> tuple[list[Any], list[Any]]:
    """Record every read of the log and every decoded notification."""
    reads, decodes = [], []
    select, decode = app.recorder.select_notifications, app.mapper.to_domain_event
    app.recorder.select_notifications = lambda **kw: (reads.append(kw["start"]), select(**kw))[1]
    app.mapper.to_domain_event = lambda n: (decodes.append(n.id), decode(n))[1]
    return reads, decodes


def test_one_read_and_one_decoding_feed_every_projection(stores):
    app, view = stores
    a, b = view("a"), view("b")
    follower = Follower(app, [CountsProjection(a), CountsProjection(b)])
    assert follower.catch_up() == 0  # nothing yet: each finds its place and joins
    bumps(app, 9)
    reads, decodes = counting(app)
    assert follower.step() == (20, False)
    assert len(reads) == 1 and sorted(decodes) == list(range(1, 11))
    assert a.totals() == b.totals() == {"a": 9}
    assert a.max_tracking_id(app.name) == b.max_tracking_id(app.name) == 10
    assert follower.step() == (0, False) and len(reads) == 2  # idle: one read for both


def test_a_failing_projection_leaves_the_group_and_the_others_go_on(stores):
    app, view = stores
    a, b = view("a"), view("b")
    broken = CountsProjection(b)
    follower = Follower(app, [CountsProjection(a), broken], poll_seconds=0.0)
    follower.catch_up()
    bumps(app, 4)  # notifications 1-5
    broken.fail_at = 3
    follower.step()
    assert a.totals() == {"a": 4} and b.totals() == {}  # b's batch rolled back whole
    counter = app.repository.get(app.recorder.select_notifications(start=None, limit=1)[0].originator_id)
    counter.bump(by=10)
    app.save(counter)  # notification 6
    follower.step()
    assert a.totals() == {"a": 14} and b.totals() == {}  # a goes on while b keeps failing alone
    broken.fail_at = None
    follower.step()  # b catches up alone, from its own position, and joins
    assert b.totals() == {"a": 14} and all(m.joined for m in follower.members)
    counter.bump(by=1)
    app.save(counter)
    assert follower.step() == (2, False)
    assert a.totals() == b.totals() == {"a": 15}


def test_a_projection_far_behind_catches_up_alone_then_joins(stores, monkeypatch):
    app, view = stores
    a, b = view("a"), view("b")
    bumps(app, 9)
    assert catch_up(app, CountsProjection(a)) == 10  # a is level, b has nothing
    monkeypatch.setattr(runner, "BATCH", 3)
    follower = Follower(app, [CountsProjection(a), CountsProjection(b)])
    steps = 0
    while not all(m.joined for m in follower.members):
        follower.step()
        steps += 1
    assert steps == 4 and a.totals() == b.totals() == {"a": 9}  # b read 3, 3, 3, then 1: level, it joined
    assert b.max_tracking_id(app.name) == 10


def test_a_restarted_follower_resumes_where_each_projection_stopped(stores):
    app, view = stores
    a, b = view("a"), view("b")
    bumps(app, 4)
    Follower(app, [CountsProjection(a)]).catch_up()
    counter = app.repository.get(app.recorder.select_notifications(start=None, limit=1)[0].originator_id)
    counter.bump(by=5)
    app.save(counter)
    assert Follower(app, [CountsProjection(a), CountsProjection(b)]).catch_up() == 1 + 6
    assert a.totals() == b.totals() == {"a": 9}


def test_a_projection_another_runner_overtook_is_read_again_and_nothing_applies_twice(stores):
    app, view = stores
    a, b = view("a"), view("b")
    follower = Follower(app, [CountsProjection(a), CountsProjection(b)])
    follower.catch_up()
    bumps(app, 4)
    assert catch_up(app, CountsProjection(b)) == 5  # another process's runner applied them to b first
    reads, _ = counting(app)
    assert follower.step() == (5, False)  # b's batch failed on its first position and was read again: empty
    assert len(reads) == 2 and a.totals() == b.totals() == {"a": 4}
    assert all(m.joined for m in follower.members)
