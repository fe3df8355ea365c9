"""Runs a projection over an application's notification log: catch up now, or follow until stopped.

Works on every store (SQLite has no subscriptions): it reads notifications after the view's own tracking
position, so a restarted runner resumes exactly where it stopped.
"""

from __future__ import annotations

import threading
from typing import Any

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.projection import Projection

BATCH = 500


def catch_up(app: Application, projection: Projection[Any]) -> int:
    """Apply every pending event; return how many notifications were processed."""
    done = 0
    while True:
        position = projection.view.max_tracking_id(app.name)
        notifications = app.recorder.select_notifications(
            start=position, limit=BATCH, topics=projection.topics, inclusive_of_start=False,
        )
        for notification in notifications:
            event = app.mapper.to_domain_event(notification)
            try:
                projection.process_event(event, Tracking(app.name, notification.id))
            except IntegrityError:
                break  # another runner applied it first: re-read our position
            done += 1
        else:
            if len(notifications) < BATCH:
                return done


def follow(app: Application, projection: Projection[Any], stop: threading.Event, *,
           poll_seconds: float = 0.2) -> None:
    while not stop.is_set():
        if catch_up(app, projection) == 0:
            stop.wait(poll_seconds)
