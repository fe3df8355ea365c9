"""Runs a projection over an application's notification log: catch up now, or follow until stopped.

Works on every store (SQLite has no subscriptions): it reads notifications after the view's own tracking
position (an `EventSourcedProjection` tracks in its own event store), so a restarted runner resumes exactly where
it stopped. It reads only the topics the projection names, and applies each batch of notifications it read in
one transaction of its view (`SqlView.batch`): one commit per batch, not per event, all or nothing. An
`EventSourcedProjection` records each event that leads to new events with its tracking, as the library does, and
the position past the events that lead to nothing once per batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.persistence import IntegrityError, Notification, Tracking
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
        try:
            if not notifications:
                return done
            if isinstance(projection, Projection):
                _apply(app, projection, notifications)
            else:
                _apply_event_sourced(app, projection, notifications)
        except IntegrityError:
            continue  # another runner applied some of them first: nothing of this batch stayed; re-read
        done += len(notifications)
        if len(notifications) < BATCH:
            return done


def _apply(app: Application, projection: Projection[Any], notifications: Sequence[Notification]) -> None:
    batch = getattr(projection.view, "batch", None)
    with batch() if batch is not None else nullcontext():
        for notification in notifications:
            projection.process_event(app.mapper.to_domain_event(notification), Tracking(app.name, notification.id))


def _apply_event_sourced(app: Application, projection: EventSourcedProjection[Any],
                         notifications: Sequence[Notification]) -> None:
    idle: Tracking | None = None  # the last notification that led to no event, not yet recorded
    for notification in notifications:
        tracking = Tracking(app.name, notification.id)
        processing = ProcessingEvent[Any](tracking=tracking)
        projection.policy(app.mapper.to_domain_event(notification), processing)
        if processing.events:  # recorded as EventSourcedProjection.process_event records it, step by step
            recordings = projection._record(processing)  # noqa: SLF001 - the library's own steps
            projection._take_snapshots(processing)  # noqa: SLF001
            projection.notify(processing.events)
            projection._notify(recordings)  # noqa: SLF001
            idle = None
        else:
            idle = tracking
    if idle is not None:
        projection.recorder.insert_tracking(idle)


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
