"""An aggregate's history read straight from the event store, generically: topic, time and every recorded field.

No event class is needed (the state is decoded by the application's transcoder), so the history of a payment
recorded by an older or newer version of the code reads the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from eventsourcing.application import Application

from domain.idempotency import payment_id
from projections.payment_list import PaymentListView

HEX64 = re.compile(r"^[0-9a-f]{64}$")


def history(app: Application, originator_id: UUID) -> list[dict[str, Any]]:
    """Every event of one aggregate, oldest first: {application, id, version, type, topic, time, fields}."""
    out = []
    for stored in app.recorder.select_events(originator_id):
        state = app.mapper.transcoder.decode(plain_state(app, stored.state))
        moment = state.pop("timestamp", None)
        for envelope in ("originator_id", "originator_version", "originator_topic"):
            state.pop(envelope, None)
        out.append({
            "application": app.name, "id": str(stored.originator_id), "version": stored.originator_version,
            "type": stored.topic.rpartition(":")[2], "topic": stored.topic, "time": _time(moment),
            "fields": json.loads(json.dumps(state, default=str, sort_keys=True)),
        })
    return out


def plain_state(app: Application, state: bytes) -> bytes:
    """A stored state as the transcoder wrote it: decrypted and decompressed when the store does either."""
    if app.mapper.cipher:
        state = app.mapper.cipher.decrypt(state)
    if app.mapper.compressor:
        state = app.mapper.compressor.decompress(state)
    return state


def _time(moment: Any) -> str | None:
    if isinstance(moment, datetime):
        utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return None if moment is None else str(moment)


def payment_ids(handle: str, payments: Application, view: PaymentListView | None) -> list[UUID]:
    """The payments a handle names: a payment id, an idempotency key, a transaction signature or payment hash."""
    found: list[UUID] = []
    try:
        candidate = UUID(handle)
    except ValueError:
        candidate = None
    if candidate is not None and _exists(payments, candidate):
        found.append(candidate)
    if HEX64.match(handle) and _exists(payments, payment_id(handle)):
        found.append(payment_id(handle))
    if view is not None:
        found.extend(UUID(i) for i in view.find_ids(handle))
    return list(dict.fromkeys(found))


def _exists(app: Application, originator_id: UUID) -> bool:
    return bool(app.recorder.select_events(originator_id, limit=1))


def render(events: Iterable[dict[str, Any]]) -> str:
    """Human-readable: one line per event, then its fields indented, in key order."""
    lines = []
    for e in events:
        lines.append(f"{e['application']}/{e['id']} v{e['version']}  {e['time']}  {e['type']}")
        lines.extend(f"    {k}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(e["fields"].items()))
    return "\n".join(lines)
