"""The books against the chain, continuously: a reconciler in the projection worker compares, as they happen,
every CONFIRMED payment with its transaction on the chain, and every transaction our fee payers signed with a
payment that settled it. Each pass and each mismatch is an event of the `Books` application (domain/books.py);
/metrics counts the mismatches (`paywarden_books_mismatches_total`), /readyz and the console show the last pass.

A pass reads the payments log after the position it last reached (a `Payment.Confirmed` is checked against the
transaction its payment submitted, as `audit chain` checks it), then each fee payer's history on the chain after
the signature it last saw (`getSignaturesForAddress`, at most 1,000 a pass, newest first): a transaction the fee
payer signed that no `Payment.SettlementSubmitted` recorded is an unbooked transfer. A payment's broadcast is
recorded before it is sent, so a settling payment is never mistaken for one. A network without an RPC endpoint is
not reconciled.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from eventsourcing.application import Application

from application.books import Books
from interfaces.audit.chain import BookedPayment, JsonRpc, confirmed_problem
from interfaces.audit.history import plain_state

PAYMENT = "domain.payment:Payment."
BATCH = 500
REMEMBERED = 100_000  # settlement signatures kept in memory; older ones are looked up in the payments read model
log = logging.getLogger("paywarden.books")


@dataclass
class Reconciler:
    books: Books
    payments: Application[UUID]  # read only: the payments event store
    rpc_for: Callable[[str], JsonRpc | None]  # a network's JSON-RPC, None when none is configured
    fee_payers: Mapping[str, Sequence[str]]  # network -> our fee payers' addresses
    booked_elsewhere: Callable[[str], bool] = lambda _: False  # a settlement signature the read model knows
    settled: OrderedDict[str, str] = field(default_factory=OrderedDict)  # signature -> payment id

    def run_once(self) -> list[dict[str, str]]:
        """One pass; returns the mismatches it found (each recorded as an event)."""
        state = self.books.reconciliation()
        at = datetime.now(UTC).isoformat()
        mismatches: list[dict[str, str]] = []
        position, checked = self._payments(state.position, mismatches)
        seen = dict(state.seen)
        for network, addresses in sorted(self.fee_payers.items()):
            rpc = self.rpc_for(network)
            if rpc is None:
                continue
            for address in addresses:
                checked += self._fee_payer(rpc, network, address, seen, mismatches)
        if position != state.position or seen != state.seen or mismatches or state.last_pass is None:
            self.books.record(at=at, position=position, seen=seen, checked=checked, mismatches=mismatches)
        for found in mismatches:
            log.error("books mismatch %s on %s: %s", found["kind"], found["network"], found["detail"])
        return mismatches

    def _payments(self, position: int, mismatches: list[dict[str, str]]) -> tuple[int, int]:
        checked, recent = 0, _Recent()
        while True:
            notifications = self.payments.recorder.select_notifications(position, BATCH, inclusive_of_start=False)
            confirmed: list[tuple[UUID, BookedPayment | None]] = []
            for n in notifications:
                kind, key = n.topic.removeprefix(PAYMENT), str(n.originator_id)
                if kind == "Received":
                    recent.received[key] = n
                elif kind == "SettlementSubmitted":
                    state = self._state(n)
                    self._remember(str(state.get("signature")), key)
                    recent.submitted[key] = str(state.get("signature") or "") or None
                elif kind == "Confirmed":
                    confirmed.append((UUID(key), self._folded(recent, key, self._state(n))))
            mismatches += self._confirmed(confirmed)
            checked += len(confirmed)
            recent.next_batch()
            if notifications:
                position = notifications[-1].id
            if len(notifications) < BATCH:
                return position, checked

    def _folded(self, recent: _Recent, key: str, confirmed: dict[str, Any]) -> BookedPayment | None:
        """The payment as `_booked` reads it, from its Received and SettlementSubmitted in this pass's last two
        batches (a settle's events follow one another); None when they are not there (then `_booked` reads them)."""
        received = recent.received.get(key)
        if received is None or key not in recent.submitted:
            return None
        state = self._state(received)
        return BookedPayment(key, state.get("timestamp") or datetime.now(UTC), state["network"], state["asset"],
                             int(state["amount"]), state["pay_to"], state="CONFIRMED",
                             signature=confirmed.get("signature") or recent.submitted[key])

    def _state(self, notification: Any) -> dict[str, Any]:
        state: dict[str, Any] = self.payments.mapper.transcoder.decode(plain_state(self.payments, notification.state))
        return state

    def _confirmed(self, confirmed: Sequence[tuple[UUID, BookedPayment | None]]) -> list[dict[str, str]]:
        """The mismatches of these CONFIRMED payments, in their order; their transactions looked up in batches, one
        per network (`JsonRpc.transactions`)."""
        by_network: dict[str, list[BookedPayment]] = {}
        payment_ids = [payment_id for payment_id, _ in confirmed]
        for payment_id, folded in confirmed:
            payment = folded or self._booked(payment_id)
            if payment is not None and payment.signature is not None and self.rpc_for(payment.network) is not None:
                by_network.setdefault(payment.network, []).append(payment)
        problems: dict[str, dict[str, str]] = {}
        for network, payments in by_network.items():
            rpc = self.rpc_for(network)
            assert rpc is not None
            landed_all = rpc.transactions([str(p.signature) for p in payments])
            for payment, landed in zip(payments, landed_all, strict=True):
                if (problem := confirmed_problem(payment, landed)) is not None:
                    kind = "confirmed_not_on_chain" if landed is None else "confirmed_amount"
                    problems[payment.payment_id] = {
                        "kind": kind, "network": payment.network, "signature": str(payment.signature),
                        "payment_id": payment.payment_id,
                        "detail": f"payment {payment.payment_id} is CONFIRMED in the books, but {problem}"}
        return [problems[str(i)] for i in payment_ids if str(i) in problems]

    def _booked(self, payment_id: UUID) -> BookedPayment | None:
        """The payment as its own events record it."""
        payment: BookedPayment | None = None
        for stored in self.payments.recorder.select_events(payment_id):
            kind = stored.topic.removeprefix(PAYMENT)
            state = self.payments.mapper.transcoder.decode(plain_state(self.payments, stored.state))
            if kind == "Received":
                payment = BookedPayment(str(payment_id), state.get("timestamp") or datetime.now(UTC),
                                        state["network"], state["asset"], int(state["amount"]), state["pay_to"])
            elif payment is not None and kind in ("SettlementSubmitted", "Confirmed"):
                payment.signature = state.get("signature") or payment.signature
                payment.state = "CONFIRMED" if kind == "Confirmed" else "SUBMITTED"
        return payment

    def _fee_payer(self, rpc: JsonRpc, network: str, address: str, seen: dict[str, str],
                   mismatches: list[dict[str, str]]) -> int:
        signatures = rpc.signatures_for(address, until=seen.get(address))
        for entry in reversed(signatures):  # oldest first
            signature = str(entry["signature"])
            if signature in self.settled or self.booked_elsewhere(signature):
                continue
            landed = rpc.transaction(signature)
            if not _signed_by(landed, address):  # it names the fee payer (funding it, say) without its signature
                continue
            mismatches.append({"kind": "unbooked_transfer", "network": network, "signature": signature,
                               "payment_id": "", "detail": f"fee payer {address} signed {signature}, which no "
                                                           f"payment settled{_movements(landed)}"})
        if signatures:
            seen[address] = str(signatures[0]["signature"])
        return len(signatures)

    def _remember(self, signature: str, payment_id: str) -> None:
        self.settled[signature] = payment_id
        while len(self.settled) > REMEMBERED:
            self.settled.popitem(last=False)


class _Recent:
    """The Received notifications and submitted signatures of a pass's current and previous batch of notifications,
    by payment: what a Confirmed among them is checked with, without reading its payment's events again."""

    def __init__(self) -> None:
        self.received: dict[str, Any] = {}
        self.submitted: dict[str, str | None] = {}
        self._previous: tuple[dict[str, Any], dict[str, str | None]] = ({}, {})

    def next_batch(self) -> None:
        """Forget what is two batches old: a payment never settled leaves nothing behind for long."""
        for kept, older in zip((self.received, self.submitted), self._previous, strict=True):
            for key in older:
                if kept.get(key) is older[key]:
                    del kept[key]
        self._previous = (dict(self.received), dict(self.submitted))


def _signed_by(landed: dict[str, Any] | None, address: str) -> bool:
    if landed is None:
        return False
    message = landed["transaction"]["message"]
    return address in message["accountKeys"][:message["header"]["numRequiredSignatures"]]


def _movements(landed: dict[str, Any] | None) -> str:
    """What the transaction moved, as token balances changed (`owner: +amount mint`)."""
    meta = (landed or {}).get("meta") or {}
    changes: dict[tuple[str, str], int] = {}
    for sign, balances in ((-1, meta.get("preTokenBalances") or []), (1, meta.get("postTokenBalances") or [])):
        for b in balances:
            key = (str(b.get("owner") or b.get("accountIndex")), str(b.get("mint")))
            changes[key] = changes.get(key, 0) + sign * int(b["uiTokenAmount"]["amount"])
    moved = [f"{owner}: {amount:+d} {mint}" for (owner, mint), amount in sorted(changes.items()) if amount]
    return f" (token balances: {'; '.join(moved)})" if moved else ""


def follow(reconciler_of: Callable[[], Reconciler | None], stop: threading.Event, *, seconds: float) -> None:
    """A pass every `seconds` until `stop`; `reconciler_of` builds it once an RPC endpoint is known (beside `up`,
    the localnet it serves). Failures (an RPC endpoint or a store down) are logged and retried."""
    reconciler: Reconciler | None = None
    while not stop.is_set():
        try:
            reconciler = reconciler or reconciler_of()
            if reconciler is not None:
                reconciler.run_once()
        except Exception:
            log.exception("books reconciliation failed; retrying")
        stop.wait(seconds)
