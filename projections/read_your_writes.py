"""Read-your-writes, in one place: a command returns only once the read models of its application hold its events.

The applications whose commands people and scripts issue (Merchants, ProxyServices, Webhooks, and Listings for a
delisting) are eventsourcing `Leader`s: each `save` prompts the followers they `lead` with what it recorded. The
composition root makes a `ReadYourWrites` their follower, holding the projections of the views that follow that
application's log. Prompted, it brings each of them up to the save's last notification in the commanding process
(nothing to do when the projection worker got there first), then runs `then` (the accounts view's: tell every API
worker to empty its key cache, so a revoked key is refused from the moment the command returns, even when the
worker applied the revocation first and has not told them yet).

Why not wait for the projection worker (`TrackingRecorder.wait`): the CLI runs where no worker may be running, a
revocation must hold even while the worker is down, and a wait polls (100 ms at least). Constructed with `level`,
it also brings its views level once, for the logs only commands write: a view rebuilt after a change of shape
(projections/reshape.py), or left behind by a command that stopped between its save and its catch-up, is whole
before the process reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.application import Application
from eventsourcing.projection import Projection
from eventsourcing.system import RecordingEvent, RecordingEventReceiver

from projections.runner import catch_up


class ReadYourWrites(RecordingEventReceiver[Any]):
    def __init__(self, app: Application[Any], projections: Sequence[Projection[Any]], *,
                 then: Callable[[], None] | None = None, level: bool = False) -> None:
        self._app, self._projections, self._then = app, list(projections), then
        for projection in self._projections if level else ():
            catch_up(app, projection)

    def receive_recording_event(self, new_recording_event: RecordingEvent[Any]) -> None:
        position = new_recording_event.recordings[-1].notification.id
        for projection in self._projections:
            if not projection.view.has_tracking_id(self._app.name, position):
                catch_up(self._app, projection)
        if self._then is not None:
            self._then()
