"""Runs a projection over an application's notification log: catch up now, or follow until stopped.

Works on every store (SQLite has no subscriptions): it reads notifications after the view's own tracking
position (an `EventSourcedProjection` tracks in its own event store), so a restarted runner resumes exactly where
it stopped.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.projection import EventSourcedProjection, Projection

BATCH = 500


def catch_up(app: Application, projection: Projection[Any] | EventSourcedProjection[Any]) -> int:
    """Apply every pending event; return how many notifications were processed."""
    done = 0
    tracking = projection.view if isinstance(projection, Projection) else projection.recorder
    while True:
        position = tracking.max_tracking_id(app.name)
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


def follow(app: Application, projection: Projection[Any] | EventSourcedProjection[Any], stop: threading.Event, *,
           poll_seconds: float = 0.2, max_backoff_seconds: float = 5.0) -> None:
    """Catch up, then poll, until `stop`. A store that is down (database, Redis) is waited out, never fatal."""
    failures = 0
    while not stop.is_set():
        try:
            done = catch_up(app, projection)
        except Exception:
            failures += 1
            logging.getLogger("paywarden.projections").exception(
                "projection %s failed (%d in a row); retrying", projection.name, failures)
            stop.wait(min(poll_seconds * 2**failures, max_backoff_seconds))
            continue
        failures = 0
        if done == 0:
            stop.wait(poll_seconds)
