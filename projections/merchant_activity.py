"""The console overview's read model: each merchant's payments with their current state, and per UTC day the
verifications and settlements answered and the volume settled.

Follows the Payments log. A verification is an Approved or Rejected outcome; a settlement a Confirmed or Failed one;
the settled volume sums the amounts of Confirmed payments, in atomic units. Anonymous payments are not kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from domain.networks import USDC_DECIMALS, network
from domain.payment import Payment
from projections.catalog import timestamp as iso  # microseconds: the latest-first order is exact
from projections.sql import SqlView

MERCHANT_PREFIX = "merchant:"


@dataclass(frozen=True)
class PaymentLine:
    when: str
    state: str
    amount: str
    network: str
    payer: str | None


class ActivityView(SqlView):
    tables = (
        "CREATE TABLE IF NOT EXISTS activity_payments (payment_id TEXT PRIMARY KEY, merchant_id TEXT NOT NULL, "
        "state TEXT NOT NULL, amount BIGINT NOT NULL, network TEXT NOT NULL, asset TEXT NOT NULL, payer TEXT, "
        "updated_at TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS activity_payments_latest ON activity_payments (merchant_id, updated_at)",
        "CREATE TABLE IF NOT EXISTS activity_days (merchant_id TEXT NOT NULL, day TEXT NOT NULL, "
        "verifies INTEGER NOT NULL, settles INTEGER NOT NULL, settled BIGINT NOT NULL, "
        "PRIMARY KEY (merchant_id, day))",
    )

    def today(self, merchant_id: str, day: str | None = None) -> dict[str, Any]:
        from datetime import UTC, datetime

        day = day or datetime.now(UTC).strftime("%Y-%m-%d")
        rows = self.rows("SELECT verifies, settles, settled FROM activity_days WHERE merchant_id = ? AND day = ?",
                         (merchant_id, day))
        verifies, settles, settled = rows[0] if rows else (0, 0, 0)
        return {"verifies": int(verifies), "settles": int(settles), "volume": usdc(int(settled))}

    def latest(self, merchant_id: str, limit: int = 10) -> list[PaymentLine]:
        rows = self.rows("SELECT updated_at, state, amount, network, asset, payer FROM activity_payments "
                         "WHERE merchant_id = ? ORDER BY updated_at DESC, payment_id LIMIT ?", (merchant_id, limit))
        return [PaymentLine(r[0][:19] + "Z", r[1], _amount(int(r[2]), r[3], r[4]), _network(r[3]), r[5]) for r in rows]


def usdc(atomic: int) -> str:
    return f"{atomic / 10**USDC_DECIMALS:,.2f}"


def _network(caip2: str) -> str:
    known = network(caip2)
    return known.name if known else caip2


def _amount(atomic: int, caip2: str, asset: str) -> str:
    known = network(caip2)
    return f"{usdc(atomic)} USDC" if known and known.usdc_mint == asset else f"{atomic} of {asset[:8]}…"


class SqliteActivityView(ActivityView, SQLiteTrackingRecorder):
    pass


class PostgresActivityView(ActivityView, PostgresTrackingRecorder):
    paramstyle = "format"


class ActivityProjection(Projection[ActivityView]):
    name = "merchant_activity"
    topics = tuple(get_topic(cls) for cls in (Payment.Received, Payment.Approved, Payment.Rejected,
                                              Payment.SettlementSubmitted, Payment.Confirmed, Payment.Failed))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: Payment.Received, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            if e.client_id.startswith(MERCHANT_PREFIX):
                c.execute("INSERT INTO activity_payments VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
                          (str(e.originator_id), e.client_id.removeprefix(MERCHANT_PREFIX), "RECEIVED", e.amount,
                           e.network, e.asset, iso(e.timestamp)))

    @process_event.register
    def _(self, e: Payment.Approved, tracking: Tracking) -> None:
        self._advance(e, tracking, "APPROVED", verifies=1, payer=e.payer)

    @process_event.register
    def _(self, e: Payment.Rejected, tracking: Tracking) -> None:
        self._advance(e, tracking, "REJECTED", verifies=1, payer=e.payer)

    @process_event.register
    def _(self, e: Payment.SettlementSubmitted, tracking: Tracking) -> None:
        self._advance(e, tracking, "SUBMITTED")

    @process_event.register
    def _(self, e: Payment.Confirmed, tracking: Tracking) -> None:
        self._advance(e, tracking, "CONFIRMED", settles=1, settled=True)

    @process_event.register
    def _(self, e: Payment.Failed, tracking: Tracking) -> None:
        self._advance(e, tracking, "FAILED", settles=1)

    def _advance(self, e: Any, tracking: Tracking, state: str, *, verifies: int = 0, settles: int = 0,
                 settled: bool = False, payer: str | None = None) -> None:
        key, moment = str(e.originator_id), iso(e.timestamp)
        with self.view.tracked(tracking) as c:
            c.execute("SELECT merchant_id, amount FROM activity_payments WHERE payment_id = ?", (key,))
            rows = c.fetchall()
            if not rows:  # an anonymous payment
                return
            merchant_id, amount = rows[0]
            c.execute("UPDATE activity_payments SET state = ?, payer = COALESCE(?, payer), updated_at = ? "
                      "WHERE payment_id = ?", (state, payer, moment, key))
            if verifies or settles:
                c.execute("INSERT INTO activity_days VALUES (?, ?, ?, ?, ?) ON CONFLICT (merchant_id, day) DO UPDATE "
                          "SET verifies = activity_days.verifies + excluded.verifies, settles = "
                          "activity_days.settles + excluded.settles, settled = activity_days.settled + "
                          "excluded.settled", (merchant_id, moment[:10], verifies, settles,
                                               int(amount) if settled else 0))
