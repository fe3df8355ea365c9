"""The paid-access read model: which wallet paid for which proxy route, and when the payment was confirmed.

"Has this wallet paid for this route" (a `once-paid` route's Sign-In-With-X, application/access.py) is asked here,
never of a second record: the rows are folded from the Payments log alone, so `audit rebuild --check` rebuilds and
compares them. A payment's Approved names its payer; the success answer that went out by a proxy route names the
route (`via`, `proxy:<service>:<route>`, on `Confirmed` or on the later `SuccessAnswered`); the `Confirmed` event's
time is when it was paid. A payment settled through the facilitator's own `/settle` names no route and buys no
proxy access; a FAILED one is removed.
"""

from __future__ import annotations

from datetime import datetime
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from domain.payment import Payment
from projections.payment_list import EVENTS, timestamp
from projections.sql import SqlView

PROXY_DOOR = "proxy:"
# Every statement below is written (`Cursor.write`), none read: a batch sends them in one pipeline.


class PaidAccessView(SqlView):
    tables = (
        "CREATE TABLE IF NOT EXISTS paid_access_payments (payment_id TEXT PRIMARY KEY, payer TEXT NOT NULL, "
        "service_id TEXT, route_id TEXT, confirmed_at TEXT)",
        "CREATE INDEX IF NOT EXISTS paid_access_by_route ON paid_access_payments (payer, service_id, route_id)",
    )

    def last_paid(self, payer: str, service_id: str, route_id: str) -> datetime | None:
        rows = self.rows("SELECT MAX(confirmed_at) FROM paid_access_payments WHERE payer = ? AND service_id = ? "
                         "AND route_id = ? AND confirmed_at IS NOT NULL", (payer, service_id, route_id))
        found = rows[0][0] if rows else None
        return datetime.fromisoformat(str(found).replace("Z", "+00:00")) if found else None


class SqlitePaidAccessView(PaidAccessView, SQLiteTrackingRecorder):
    pass


class PostgresPaidAccessView(PaidAccessView, PostgresTrackingRecorder):
    paramstyle = "format"


def route_of(via: str | None) -> tuple[str, str] | None:
    """(service id, route id) of a proxy door `proxy:<service>:<route>`; None for any other door."""
    if not via or not via.startswith(PROXY_DOOR):
        return None
    service_id, _, route_id = via.removeprefix(PROXY_DOOR).partition(":")
    return (service_id, route_id) if service_id and route_id else None


SET_ROUTE = "UPDATE paid_access_payments SET service_id = ?, route_id = ? WHERE payment_id = ?"


class PaidAccessProjection(Projection[PaidAccessView]):
    name = "paid_access"
    # Every payment event, so that the position follows the whole log (`view.wait` on any notification).
    topics = tuple(get_topic(cls) for cls in EVENTS)

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: Payment.Approved, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.write("INSERT INTO paid_access_payments (payment_id, payer) VALUES (?, ?)",
                    (str(e.originator_id), e.payer))

    @process_event.register
    def _(self, e: Payment.Confirmed, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.write("UPDATE paid_access_payments SET confirmed_at = ? WHERE payment_id = ?",
                    (timestamp(e.timestamp), str(e.originator_id)))
            if (route := route_of(e.via if e.answered else None)) is not None:
                c.write(SET_ROUTE, (*route, str(e.originator_id)))

    @process_event.register
    def _(self, e: Payment.SuccessAnswered, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            if (route := route_of(e.via)) is not None:
                c.write(SET_ROUTE, (*route, str(e.originator_id)))

    @process_event.register
    def _(self, e: Payment.Failed, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.write("DELETE FROM paid_access_payments WHERE payment_id = ?", (str(e.originator_id),))
