"""The projection runner outlives a store outage: it backs off and resumes, it does not die."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from eventsourcing.persistence import OperationalError

from projections.runner import follow
from tests.faults import wait_until


class FlakyTracking:
    """The view's store is down for the first `failures` reads of the position."""

    def __init__(self, failures: int) -> None:
        self.failures, self.reads = failures, 0

    def max_tracking_id(self, application_name: str) -> int | None:
        self.reads += 1
        if self.reads <= self.failures:
            raise OperationalError("connection refused")
        return None


def test_a_runner_waits_out_a_store_outage_and_carries_on():
    tracking = FlakyTracking(failures=3)
    app = SimpleNamespace(name="Payments", recorder=SimpleNamespace(select_notifications=lambda **_: []))
    projection = SimpleNamespace(name="flaky", topics=(), recorder=tracking)
    stop = threading.Event()
    runner = threading.Thread(target=follow, args=(app, projection, stop),
                              kwargs={"poll_seconds": 0.01, "max_backoff_seconds": 0.05})
    runner.start()
    try:
        wait_until(lambda: tracking.reads >= 6, timeout=5, what="reads after the outage")
        assert runner.is_alive()
    finally:
        stop.set()
        runner.join(5)
    assert not runner.is_alive()
