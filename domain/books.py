"""The books against the chain, as they are kept: one `Reconciliation` per deployment records each pass of the
reconciler (how far it read the payments log and each fee payer's history on the chain) and every mismatch it
found, so the audit history shows when the books were last compared with the chain and what disagreed.

Kinds of mismatch: `confirmed_not_on_chain` (a CONFIRMED payment whose transaction the chain does not have),
`confirmed_amount` (its transaction moved another amount, asset or recipient, or failed), and `unbooked_transfer`
(a transaction signed by one of our fee payers that no payment settled: a transfer made behind the books' back).
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

KINDS = ("confirmed_not_on_chain", "confirmed_amount", "unbooked_transfer")
KEPT_MISMATCHES = 20  # the latest, for the console and /readyz; every one is an event


def reconciliation_id() -> UUID:
    return uuid5(NAMESPACE_URL, "paywarden:books:reconciliation")


class Reconciliation(Aggregate):
    class Started(Aggregate.Created):
        pass

    class Passed(Aggregate.Event):
        """One pass: the payments log read up to `position`, each fee payer's chain history up to its newest
        signature (`seen`: address -> signature), `checked` payments and transactions compared."""

        at: str
        position: int
        seen: dict[str, str]
        checked: int

    class MismatchFound(Aggregate.Event):
        kind: str
        network: str
        signature: str
        payment_id: str
        detail: str
        at: str

    @staticmethod
    def create_id() -> UUID:
        return reconciliation_id()

    @event(Started)
    def __init__(self) -> None:
        self.position, self.seen, self.checked, self.mismatches = 0, dict[str, str](), 0, 0
        self.last_pass: str | None = None
        self.latest: list[dict[str, Any]] = []

    def record(self, *, at: str, position: int, seen: dict[str, str], checked: int,
               mismatches: list[dict[str, str]]) -> None:
        for found in mismatches:
            if found["kind"] not in KINDS:
                raise ValueError(f"not a kind of mismatch: {found['kind']}")
            self._mismatch(kind=found["kind"], network=found["network"], signature=found["signature"],
                           payment_id=found["payment_id"], detail=found["detail"], at=at)
        self._passed(at=at, position=position, seen=seen, checked=checked)

    @event(Passed)
    def _passed(self, at: str, position: int, seen: dict[str, str], checked: int) -> None:
        self.last_pass, self.position, self.seen = at, position, dict(seen)
        self.checked += checked

    @event(MismatchFound)
    def _mismatch(self, kind: str, network: str, signature: str, payment_id: str, detail: str, at: str) -> None:
        self.mismatches += 1
        self.latest = [*self.latest, {"kind": kind, "network": network, "signature": signature,
                                      "payment_id": payment_id, "detail": detail, "at": at}][-KEPT_MISMATCHES:]
