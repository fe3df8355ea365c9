"""Runs projections over an application's notification log: catch up now, or follow until stopped.

Works on every store (SQLite has no subscriptions): it reads notifications after the view's own tracking
position (an `EventSourcedProjection` tracks in its own event store), so a restarted runner resumes exactly where
it stopped. It reads only the topics the projection names, and applies each batch of notifications it read in
one transaction of its view (`SqlView.batch`, told the batch's first and last notification): one commit per
batch, not per event, all or nothing. An `EventSourcedProjection` records each event that leads to new events
with its tracking, as the library does, and the position past the events that lead to nothing once per batch.

`Follower` is what the projection worker runs: one reader of an application's log for every projection of it in
the process. Each batch is read and decoded once and each projection applies its share (the notifications of its
topics past its own position) in its own transaction with its own tracking, as `catch_up` would; a projection
that fails, or that another runner overtook, leaves the group and catches up alone (with a growing pause after a
failure) until it is level again, so one broken read model never holds up the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eventsourcing.application import Application, ProcessingEvent, project_aggregate
from eventsourcing.persistence import IntegrityError, Notification, Tracking
from eventsourcing.projection import EventSourcedProjection, Projection

BATCH = 500
log = logging.getLogger("paywarden.projections")


class Later(Exception):  # noqa: N818 - a signal to the runner, not an error
    """Raised by a projection, before it writes anything for the event, when it cannot apply that event yet: the
    events of the batch before it are applied and committed, and the runner stops there until its next round."""


AnyProjection = Projection[Any] | EventSourcedProjection[Any]
Share = Sequence[tuple[int, Callable[[], Any]]]  # (notification id, the decoded event, decoded when first asked)


def catch_up(app: Application, projection: AnyProjection) -> int:
    """Apply every pending event; return how many notifications were processed."""
    done = 0
    while True:
        position = _tracking(projection).max_tracking_id(app.name)
        notifications = app.recorder.select_notifications(
            start=position, limit=BATCH, topics=projection.topics, inclusive_of_start=False,
        )
        if not notifications:
            return done
        try:
            applied = apply(app, projection, _decoding(app, notifications))
        except IntegrityError:
            continue  # another runner applied some of them first: nothing of this batch stayed; re-read
        done += applied
        if applied < len(notifications) or len(notifications) < BATCH:
            return done


def apply(app: Application, projection: AnyProjection, share: Share) -> int:
    """Apply a share of notifications (ascending ids, each projection's own topics); return how many were applied
    (fewer than given when the projection said `Later`)."""
    if not share:
        return 0
    if isinstance(projection, Projection):
        return _apply(app.name, projection, share)
    _apply_event_sourced(app.name, projection, share)
    return len(share)


def _apply(name: str, projection: Projection[Any], share: Share) -> int:
    batch = getattr(projection.view, "batch", None)
    if batch is None:  # a view without batches (Redis): one transaction per event, as the view does it
        for done, (notification_id, event) in enumerate(share):
            try:
                projection.process_event(event(), Tracking(name, notification_id))
            except Later:
                return done
        return len(share)
    try:
        with batch(Tracking(name, share[0][0]), Tracking(name, share[-1][0])) as open_batch:
            for done, (notification_id, event) in enumerate(share):
                try:
                    projection.process_event(event(), Tracking(name, notification_id))
                except Later:
                    if done == 0:
                        raise
                    open_batch.stop_after(Tracking(name, share[done - 1][0]))
                    return done
    except Later:
        return 0  # nothing of the batch could be applied yet: nothing of it stayed
    return len(share)


def _apply_event_sourced(name: str, projection: EventSourcedProjection[Any], share: Share) -> None:
    idle: Tracking | None = None  # the last notification that led to no event, not yet recorded
    for notification_id, event in share:
        tracking = Tracking(name, notification_id)
        processing = ProcessingEvent[Any](tracking=tracking)
        projection.policy(event(), processing)
        if processing.events:
            record(projection, processing)
            idle = None
        else:
            idle = tracking
    if idle is not None:
        projection.recorder.insert_tracking(idle)


def record(projection: EventSourcedProjection[Any], processing: ProcessingEvent[Any]) -> None:
    """What `EventSourcedProjection.process_event` does with the events its policy collected, through the
    library's public interface: the events and their tracking record in one transaction of the projection's
    process recorder (`EventStore.put`), then the snapshots `Application.save` would take (an aggregate whose new
    version is a multiple of its class's interval; `take_snapshot`). The library's `_notify` and the deprecated
    `notify` do nothing for a projection (only a system's leader overrides `_notify`), and no projection of ours
    keeps an aggregate cache for `_record` to fill."""
    projection.events.put(processing.events, tracking=processing.tracking, **processing.saved_kwargs)
    if projection.snapshots is None:
        return
    for event in processing.events:
        aggregate = processing.aggregates.get(event.originator_id)
        if aggregate is None:
            continue
        interval = projection.snapshotting_intervals.get(type(aggregate))
        if interval and event.originator_version % interval == 0:
            projector = projection.snapshotting_projectors.get(type(aggregate), project_aggregate)
            projection.take_snapshot(event.originator_id, version=event.originator_version, projector_func=projector)


def _tracking(projection: AnyProjection) -> Any:
    return projection.view if isinstance(projection, Projection) else projection.recorder


def _decoding(app: Application, notifications: Sequence[Notification]) -> Share:
    return [(n.id, _Once(app, n)) for n in notifications]


def follow(app: Application, projection: AnyProjection, stop: threading.Event, *,
           poll_seconds: float = 0.2, max_backoff_seconds: float = 5.0) -> None:
    """Catch up, then poll, until `stop`. A store that is down (database, Redis) is waited out, never fatal."""
    failures = 0
    while not stop.is_set():
        try:
            done = catch_up(app, projection)
        except Exception:
            failures += 1
            log.exception("projection %s failed (%d in a row); retrying", projection.name, failures)
            stop.wait(min(poll_seconds * 2**failures, max_backoff_seconds))
            continue
        failures = 0
        if done == 0:
            stop.wait(poll_seconds)


# -- one reader for several projections ----------------------------------------------------------------------


class _Once:
    """A notification's domain event, decoded on the first call and kept."""

    def __init__(self, app: Application, notification: Notification) -> None:
        self._app, self._notification = app, notification
        self._event: Any = None

    def __call__(self) -> Any:
        if self._event is None:
            self._event = self._app.mapper.to_domain_event(self._notification)
        return self._event


@dataclass
class _Member:
    projection: AnyProjection
    topics: frozenset[str]  # empty: every topic
    position: int = 0  # everything of its topics up to here is applied (in the group; else re-read)
    joined: bool = False  # level with the group's reads
    failures: int = 0
    retry_at: float = 0.0

    def wants(self, notification: Notification) -> bool:
        return notification.id > self.position and (not self.topics or notification.topic in self.topics)


class BatchEvents:
    """The events of the batch a `Follower`'s group is applying, during its round, else none: for a projection
    that reads an earlier event of the same log. The follower is given it, and so is that projection (through
    the port it reads with), each when it is built."""

    def __init__(self) -> None:
        self._events: dict[tuple[Any, int], _Once] = {}

    def get(self, originator_id: Any, version: int) -> Any | None:
        """The event `originator_id` recorded at `version` if the batch holds it (decoded once for everyone)."""
        event = self._events.get((originator_id, version))
        return event() if event is not None else None

    def hold(self, notifications: Sequence[Notification], events: Sequence[_Once]) -> None:
        self._events = {(n.originator_id, n.originator_version): e for n, e in zip(notifications, events, strict=True)}

    def clear(self) -> None:
        self._events = {}


class Follower:
    """One reader of `app`'s log for `projections` (see the module's doc). `step` is one round: the group's read
    and every share of it, then one batch for each projection catching up alone. `batch` holds the group's batch
    during its round."""

    def __init__(self, app: Application, projections: Sequence[AnyProjection], *, batch: BatchEvents | None = None,
                 poll_seconds: float = 0.2, max_backoff_seconds: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app, self._clock = app, clock
        self._poll, self._max_backoff = poll_seconds, max_backoff_seconds
        self.members = [_Member(p, frozenset(p.topics)) for p in projections]
        self._batch = batch or BatchEvents()
        self._overtaken = self._strict = False

    def step(self) -> tuple[int, bool]:
        """(how many notifications were applied, whether more may be waiting: a full batch was read, or another
        runner overtook a projection as it caught up alone)."""
        done, more, read_to = self._group_step()  # one overtaken there is read again alone below, at once
        now, self._overtaken = self._clock(), False
        for member in self.members:
            if member.joined or member.retry_at > now:
                continue
            applied, full = self._solo_step(member, read_to)
            done, more = done + applied, more or full
        return done, more or self._overtaken

    def catch_up(self) -> int:
        """Every projection level with the log's end as it is now; how many notifications were applied. A
        projection's failure is raised, as `catch_up` raises it."""
        self._strict, total = True, 0
        try:
            while True:
                done, more = self.step()
                total += done
                if not more and (done == 0 or all(m.joined for m in self.members)):
                    return total
        finally:
            self._strict = False

    def _group_step(self) -> tuple[int, bool, int | None]:
        group = [m for m in self.members if m.joined]
        if not group:
            return 0, False, None
        topics: tuple[str, ...] = () if any(not m.topics for m in group) else \
            tuple(sorted(set().union(*(m.topics for m in group))))
        notifications = self.app.recorder.select_notifications(
            start=min(m.position for m in group), limit=BATCH, topics=topics, inclusive_of_start=False)
        if not notifications:
            return 0, False, None
        events = [_Once(self.app, n) for n in notifications]  # each decoded when first asked, then kept
        self._batch.hold(notifications, events)
        done, read_to = 0, notifications[-1].id
        try:
            for member in group:
                share = [(n.id, e) for n, e in zip(notifications, events, strict=True) if member.wants(n)]
                try:
                    applied = apply(self.app, member.projection, share)
                except Exception as failed:
                    self._leave(member, failed)
                    continue
                done += applied
                # Told `Later`: it resumes after the last one it applied (the group reads from its lowest position).
                member.position = read_to if applied == len(share) else share[applied - 1][0] if applied else \
                    member.position
        finally:
            self._batch.clear()
        return done, len(notifications) == BATCH, read_to

    def _solo_step(self, member: _Member, read_to: int | None) -> tuple[int, bool]:
        projection = member.projection
        try:
            position = _tracking(projection).max_tracking_id(self.app.name) or 0
            notifications = self.app.recorder.select_notifications(
                start=position, limit=BATCH, topics=projection.topics, inclusive_of_start=False)
            applied = apply(self.app, projection, _decoding(self.app, notifications))
        except Exception as failed:
            self._leave(member, failed)
            return 0, False
        member.failures = 0
        if applied < len(notifications):  # `Later`: it tries again next round
            return applied, False
        if len(notifications) == BATCH:
            return applied, True
        # Level with the log's end as it was after the group's read of this round (`read_to`): it joins the group.
        member.joined = True
        member.position = max(notifications[-1].id if notifications else position, read_to or 0)
        return applied, False

    def _leave(self, member: _Member, failed: Exception) -> None:
        member.joined = False
        if isinstance(failed, IntegrityError):  # another runner applied some of them first: re-read at once
            self._overtaken = True
            return
        if self._strict:
            raise failed
        member.failures += 1
        member.retry_at = self._clock() + min(self._poll * 2**member.failures, self._max_backoff)
        log.error("projection %s failed (%d in a row); retrying", member.projection.name, member.failures,
                  exc_info=failed)

    def follow(self, stop: threading.Event) -> None:
        """Rounds until `stop`, a pause after each that read no full batch. A store that is down is waited out."""
        failures = 0
        while not stop.is_set():
            try:
                _, more = self.step()
            except Exception:
                failures += 1
                log.exception("reading %s's log failed (%d in a row); retrying", self.app.name, failures)
                stop.wait(min(self._poll * 2**failures, self._max_backoff))
                continue
            failures = 0
            if not more:
                stop.wait(self._poll)
