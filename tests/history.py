"""A merchant's generated payment history, recorded as the Payments application records it: each payment a
`Payment` aggregate driven through its own commands (settled, verified only, rejected or failed), its events
re-dated into the past and inserted by the application's recorder, so the read models build from real events.

Used by the console's browser test (a month of history behind the overview's chart) and by the export's memory
benchmark (`python -m tests.bench_export`). `expected` is what the chart must show: settled USDC and payments per
(span, bucket, service), counted here independently of the read model.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from solders.pubkey import Pubkey
from solders.signature import Signature

from domain.idempotency import idempotency_key
from domain.networks import DEVNET
from domain.payment import Payment

SERVICES = {
    "api.acme.example/weather": ("https://api.acme.example/weather/forecast", 7_000),
    "api.acme.example/news": ("https://api.acme.example/news/today", 42_000),
    "api.acme.example/maps": ("https://api.acme.example/maps/tile", 1_500),
}


@dataclasses.dataclass
class History:
    payments: int = 0
    settled: Counter[tuple[str, str, str]] = dataclasses.field(default_factory=Counter)  # atomic units
    counts: Counter[tuple[str, str, str]] = dataclasses.field(default_factory=Counter)

    def add(self, service: str, amount: int, at: datetime) -> None:
        for span, bucket in (("day", at.strftime("%Y-%m-%d")), ("hour", at.strftime("%Y-%m-%dT%H"))):
            self.settled[(span, bucket, service)] += amount
            self.counts[(span, bucket, service)] += 1

    def expected(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        return {k: (self.settled[k], self.counts[k]) for k in self.counts}


def _address() -> str:
    return str(Pubkey.from_bytes(os.urandom(32)))


def _at(events: list[Any], moment: datetime) -> list[Any]:
    return [dataclasses.replace(e, timestamp=moment + timedelta(microseconds=i)) for i, e in enumerate(events)]


def record_history(payments_app: Any, merchant_id: str, pay_to: str, *, payments: int, days: float = 30,
                   seed: int = 28, end: datetime | None = None, batch: int = 5000) -> History:
    """`payments` payments of the merchant spread over the `days` before `end` (default: an hour ago, so the
    current hour is left to live payments)."""
    rng, history = random.Random(seed), History()
    end = end or datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(microseconds=1)
    start, client_id, stored = end - timedelta(days=days), f"merchant:{merchant_id}", []
    names = list(SERVICES)
    for n in range(payments):
        # busier towards the present, and busier in the afternoon (UTC)
        moment = start + (end - start) * (1 - rng.random() ** 1.6)
        moment = moment.replace(hour=rng.choices(range(24), [1 + (6 <= h <= 20) * 3 for h in range(24)])[0]) \
            if moment.date() < end.date() else moment
        service = rng.choices(names, (6, 3, 2))[0]
        url, price = SERVICES[service]
        amount = price * rng.choice((1, 1, 1, 2, 5))
        outcome = rng.choices(("settled", "verified", "rejected", "failed"), (75, 12, 8, 5))[0]
        digest = hashlib.sha256(f"{seed}:{n}".encode()).hexdigest()
        payment = Payment(
            idempotency_key=idempotency_key(client_id, amount, digest), client_id=client_id, network=DEVNET.caip2,
            asset=DEVNET.usdc_mint, amount=amount, pay_to=pay_to, terms_digest=digest,
            client_signature=str(Signature.from_bytes(os.urandom(64))), extensions={},
            resource={"url": url, "mimeType": "application/json"}, max_timeout_seconds=60, message_hash=digest)
        payer, fee_payer, blockhash = _address(), _address(), _address()
        if outcome == "rejected":
            payment.reject("insufficient_funds", "the payer's balance is lower than the amount", payer, None)
            events = _at(payment.collect_events(), moment)
        else:
            payment.approve(payer, fee_payer, blockhash)
            events = _at(payment.collect_events(), moment)
            if outcome != "verified":
                settled_at = moment + timedelta(seconds=rng.uniform(1, 20))
                if settled_at > end:
                    settled_at = end
                payment.submit(str(Signature.from_bytes(os.urandom(64))), fee_payer, blockhash,
                               base64.b64encode(os.urandom(420)).decode())
                if outcome == "settled":
                    payment.confirm(answered=True)
                    history.add(service, amount, settled_at)
                else:
                    payment.fail("submission_failed", "the transaction failed on chain")
                events += _at(payment.collect_events(), settled_at)
        stored += [payments_app.mapper.to_stored_event(e) for e in events]
        history.payments += 1
        if len(stored) >= batch:
            payments_app.recorder.insert_events(stored)
            stored = []
    if stored:
        payments_app.recorder.insert_events(stored)
    return history
