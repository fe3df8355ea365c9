"""The Books application: the reconciliation of the payments with the chain, kept as events (domain/books.py).

The reconciler (interfaces/audit/books.py) compares and calls `record` once per pass; `status` is what /metrics,
/readyz and the console show. The aggregate is snapshotted every 100 passes, so reading it stays cheap.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application

from domain.books import Reconciliation, reconciliation_id


class Books(Application[UUID]):
    name = "books"
    snapshotting_intervals = {Reconciliation: 100}  # noqa: RUF012 — eventsourcing's documented class attribute

    def reconciliation(self) -> Reconciliation:
        try:
            found: Reconciliation = self.repository.get(reconciliation_id())
            return found
        except AggregateNotFoundError:
            return Reconciliation()

    def record(self, *, at: str, position: int, seen: dict[str, str], checked: int,
               mismatches: list[dict[str, str]]) -> None:
        books = self.reconciliation()
        books.record(at=at, position=position, seen=seen, checked=checked, mismatches=mismatches)
        self.save(books)

    def status(self) -> dict[str, Any]:
        books = self.reconciliation()
        return {"last_pass": books.last_pass, "checked": books.checked, "mismatches": books.mismatches,
                "latest": list(books.latest)}
