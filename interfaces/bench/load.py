"""`paywarden-bench load`: fill the configured store with a long history, quickly, as the applications record it.

What it writes, on the store `paywarden up`/`serve` would use (SQLite files in the data directory, or PostgreSQL):

- `--merchants` merchants, registered through `Merchants.register` (their events are the application's own).
- Payments of those merchants until the Payments event store holds `--events` more events: each is a `Payment`
  aggregate driven through its own commands (`Payment(...)`, `approve`/`reject`, `submit`, `confirm`, `fail`) with
  the settle-once `Claim`s a settle makes, so every event is the domain's; the events are encoded by the Payments
  application's mapper and inserted by its recorder (`insert_events`, thousands per transaction). The mix: settled
  and confirmed, verified only, rejected, failed on chain; timestamps spread over `--days` days, in log order.
- `--listings` discovery listings: that many distinct resources, each first paid (and approved) with
  `extensions.bazaar`, then paid again now and then.
- Every read model, by running the real projections over those events (`projections.runner.catch_up`, the same
  code `paywarden project` runs, a batch of events per transaction of the view, `SqlView.batch`), every follower of
  the Payments log fed from one read of it; the discovery follower (`Listings`) runs its own `policy` over a batch at
  a time; the webhook outbox and the audit log follow too, so a stack started afterwards has nothing to catch up.

The payloads (signatures, transactions, hashes) are random bytes of the real sizes: no chain is involved.
Run it with the stack stopped. The figures it gave and what they were used for: docs/performance.md.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from solders.pubkey import Pubkey
from solders.signature import Signature

from domain.claims import Claim, ClaimKind
from domain.clients import merchant_client_id
from domain.idempotency import idempotency_key
from domain.networks import DEVNET
from domain.payment import Payment
from interfaces.bench.load_projection import RecentReceived, project_all

LOAD_DOMAIN = "load.paywarden-bench.com"
PUBLIC_ADDRESS = "93.184.215.14"  # what the loader's own hostnames "resolve" to when discovery is public-only
TAGS = [f"tag{n:03d}" for n in range(200)]
INSERT_BATCH = 5000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--events", type=int, default=1_000_000, help="payment events to add (default 1,000,000)")
    p.add_argument("--listings", type=int, default=100_000, help="discovery listings to add (default 100,000)")
    p.add_argument("--merchants", type=int, default=1000, help="merchants the payments belong to (default 1000)")
    p.add_argument("--days", type=float, default=90.0, help="the history spans this many days (default 90)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: a new history each run)")
    p.add_argument("--no-projections", action="store_true", help="write the events only; read models stay behind")
    p.add_argument("--json", action="store_true", help="also print the summary as one JSON line")


@dataclass
class Listing:
    url: str
    owner: str
    info: dict[str, Any]


@dataclass
class Merchant:
    client_id: str
    pay_to: str


@dataclass
class Totals:
    payments: int = 0
    events: int = 0
    listing_payments: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)


class History:
    """Generates payments as the facilitator records them; `write` inserts them through the application."""

    def __init__(self, payments: Any, merchants: list[Merchant], *, listings: int, days: float, rng: random.Random,
                 expected_payments: int) -> None:
        self._app, self._merchants, self._rng = payments, merchants, rng
        self._wanted_listings = listings
        self._listings: list[Listing] = []
        self._end = datetime.now(UTC) - timedelta(hours=1)
        self._start = self._end - timedelta(days=days)
        self._expected = max(expected_payments, 1)
        self._weights = [1 / (rank + 1) for rank in range(len(merchants))]  # a few big merchants, many small
        self.totals = Totals()

    def write(self, events: int) -> Totals:
        batch: list[Any] = []
        while self.totals.events < events or len(self._listings) < self._wanted_listings:
            for e in self._payment():
                batch.append(self._app.mapper.to_stored_event(e))
            if len(batch) >= INSERT_BATCH:
                self._app.recorder.insert_events(batch)
                self.totals.events += len(batch)
                batch = []
        if batch:
            self._app.recorder.insert_events(batch)
            self.totals.events += len(batch)
        return self.totals

    # -- one payment ----------------------------------------------------------------------------------------

    def _payment(self) -> list[Any]:
        rng, n = self._rng, self.totals.payments
        self.totals.payments += 1
        moment = self._start + (self._end - self._start) * min(n / self._expected, 1.0)
        outcome = rng.choices(("settled", "verified", "rejected", "failed"), (60, 25, 10, 5))[0]
        self.totals.by_outcome[outcome] = self.totals.by_outcome.get(outcome, 0) + 1
        merchant, listing = self._merchant_and_listing(outcome)
        amount = rng.choice((1000, 5000, 10_000, 50_000, 100_000, 1_000_000))
        digest = hashlib.sha256(os.urandom(32)).hexdigest()
        memo = os.urandom(8).hex() if rng.random() < 0.3 else None
        terms = [("exact"), DEVNET.caip2, str(amount), DEVNET.usdc_mint, merchant.pay_to] + ([memo] if memo else [])
        key = idempotency_key(merchant.client_id, amount, digest)
        resource = {"url": listing.url if listing else f"https://{LOAD_DOMAIN}/{merchant.pay_to[:8]}/item",
                    "description": "Paid resource", "mimeType": "application/json"}
        payment = Payment(
            idempotency_key=key, client_id=merchant.client_id, network=DEVNET.caip2, asset=DEVNET.usdc_mint,
            amount=amount, pay_to=merchant.pay_to, terms_digest=hashlib.sha256(json.dumps(terms).encode()).hexdigest(),
            client_signature=str(Signature.from_bytes(os.urandom(64))),
            extensions={"bazaar": {"info": listing.info}} if listing else {}, resource=resource,
            max_timeout_seconds=60, message_hash=digest,
        )
        payer, fee_payer, blockhash = _address(), _address(), _address()
        events: list[Any] = []
        if outcome == "rejected":
            payment.reject("insufficient_funds", "the payer's balance is lower than the amount", payer, None)
            return self._at(payment.collect_events(), moment)
        payment.approve(payer, fee_payer, blockhash)
        events += self._at(payment.collect_events(), moment)
        if outcome == "verified":
            return events
        signature = str(Signature.from_bytes(os.urandom(64)))
        claims = [Claim(kind=ClaimKind.TRANSACTION, subject=digest, payment_id=str(payment.id))]
        if memo:
            claims.append(Claim(kind=ClaimKind.MEMO, subject=f"{DEVNET.caip2}\x1f{merchant.pay_to}\x1f{memo}",
                                payment_id=str(payment.id)))
        payment.submit(signature, fee_payer, blockhash, base64.b64encode(os.urandom(420)).decode())
        settled_at = moment + timedelta(seconds=rng.uniform(1, 30))
        events += self._at([*payment.collect_events(), *(e for c in claims for e in c.collect_events())], settled_at)
        if outcome == "settled":
            payment.confirm(answered=True)
        else:
            payment.fail("submission_failed", "the transaction failed on chain")
        return events + self._at(payment.collect_events(), settled_at + timedelta(milliseconds=800))

    def _merchant_and_listing(self, outcome: str) -> tuple[Merchant, Listing | None]:
        rng = self._rng
        if outcome in ("settled", "verified"):
            remaining = self._wanted_listings - len(self._listings)
            payments_left = max(self._expected * 0.85 - self.totals.payments * 0.85, 1)
            if remaining > 0 and rng.random() < min(1.0, remaining / payments_left * 1.2):
                merchant = rng.choices(self._merchants, self._weights)[0]
                listing = Listing(_url(len(self._listings), merchant), merchant.client_id,
                                  _info(len(self._listings), rng))
                self._listings.append(listing)
                self.totals.listing_payments += 1
                return merchant, listing
            if self._listings and rng.random() < 0.2:  # a listed resource paid again
                listing = rng.choice(self._listings)
                self.totals.listing_payments += 1
                return next(m for m in self._merchants if m.client_id == listing.owner), listing
        return rng.choices(self._merchants, self._weights)[0], None

    @staticmethod
    def _at(events: Any, moment: datetime) -> list[Any]:
        return [dataclasses.replace(e, timestamp=moment + timedelta(microseconds=i)) for i, e in enumerate(events)]


def _address() -> str:
    return str(Pubkey.from_bytes(os.urandom(32)))


def _url(n: int, merchant: Merchant) -> str:
    return f"https://api{n % 997}.{LOAD_DOMAIN}/{merchant.pay_to[:10].lower()}/resource-{n}"


def _info(n: int, rng: random.Random) -> dict[str, Any]:
    tags = sorted(set(rng.choices(TAGS, [1 / (i + 1) for i in range(len(TAGS))], k=rng.randint(2, 5))))
    kind = rng.choices(("http", "websocket", "grpc"), (90, 7, 3))[0]
    return {
        "type": kind, "method": rng.choice(("GET", "GET", "POST")), "title": f"Resource {n}",
        "description": f"Synthetic resource number {n}, for the large-store benchmark.", "tags": tags,
        "input": {"schema": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}}},
        "output": {"type": "application/json", "schema": {"type": "object", "properties": {
            "result": {"type": "string"}}}},
        "provider": {"name": f"Provider {n % 1000}", "url": f"https://{LOAD_DOMAIN}/provider-{n % 1000}"},
    }


class LoadDomains:
    """Every merchant of the load verified the loader's domain, so its listings are theirs to list (as yet
    undeclared: served without title, tags or provider until confirmed; docs/discovery.md)."""

    def list_verified_domains(self, merchant_id: str) -> tuple[str, ...]:
        return (LOAD_DOMAIN,)


class LoadResolver:
    """The loader's own hostnames are public; every other name is resolved for real."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def resolve(self, hostname: str) -> list[str]:
        if hostname == LOAD_DOMAIN or hostname.endswith("." + LOAD_DOMAIN):
            return [PUBLIC_ADDRESS]
        return list(self._inner.resolve(hostname))


# -- the command ----------------------------------------------------------------------------------------------


def _merchants(container: Any, count: int) -> list[Merchant]:
    from application.merchants import MerchantExistsError
    from domain.merchant import merchant_id

    found = []
    for n in range(count):
        name = f"load-{n:05d}"
        try:
            container.merchants.register(name)
        except MerchantExistsError:
            pass
        mid = merchant_id(name)
        found.append(Merchant(merchant_client_id(mid), str(Pubkey.from_bytes(hashlib.sha256(mid.bytes).digest()))))
    return found


def _loader_listings(container: Any, config: Any, resolver: Any) -> RecentReceived:
    """The discovery follower the load runs: the deployment's, with its `ReceivedPayments` port reading the batch
    first (`RecentReceived`). Its store runs in bulk mode during the load, as the views do (`project_all`)."""
    from application.listings import Listings, StoredPayments
    from interfaces.container import store_env

    received = RecentReceived(StoredPayments(container.payments))
    container.listings.close()
    container.listings = Listings(store_env(config, "listings"), payments=received, discovery=container.accounts,
                                  resolver=resolver, production=config.discovery_public_only, domains=LoadDomains())
    return received


def run(args: argparse.Namespace) -> int:
    from interfaces.adapters.resolver import GetaddrinfoResolver
    from interfaces.config import load_config
    from interfaces.container import build

    if args.events < 0 or args.listings < 0 or args.merchants < 1 or args.days <= 0:
        print("paywarden-bench load: --events and --listings must be >= 0, --merchants >= 1, --days > 0",
              file=sys.stderr)
        return 2
    config = load_config()
    resolver = LoadResolver(GetaddrinfoResolver())
    container = build(config, resolver=resolver)
    received = _loader_listings(container, config, resolver)
    rng = random.Random(args.seed)

    def report(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        began = time.monotonic()
        merchants = _merchants(container, args.merchants)
        report(f"{len(merchants)} merchants in {time.monotonic() - began:.0f} s")
        started = time.monotonic()
        history = History(container.payments, merchants, listings=args.listings, days=args.days, rng=rng,
                          expected_payments=int(args.events / 4.2))
        totals = history.write(args.events)
        written = time.monotonic() - started
        report(f"{totals.events} payment events ({totals.payments} payments) in {written:.0f} s")
        projected: dict[str, int] = {}
        if not args.no_projections:
            started = time.monotonic()
            durable: list[Callable[[], None]] = []
            projected = project_all(container, config, report, received, durable)
            for barrier in durable:
                barrier()
            report(f"read models in {time.monotonic() - started:.0f} s")
        summary = {
            "store": "postgresql" if config.database_url.startswith("postgres") else "sqlite",
            "merchants": len(merchants), "payments": totals.payments, "payment_events": totals.events,
            "outcomes": totals.by_outcome, "listing_payments": totals.listing_payments,
            "listings": container.catalog.rows("SELECT COUNT(*) FROM catalog_listings")[0][0]
            if container.catalog is not None else None,
            "projected": projected, "events_seconds": round(written, 1),
            "total_seconds": round(time.monotonic() - began, 1),
        }
        print(f"loaded: {summary['payment_events']} payment events, {summary['payments']} payments of "
              f"{summary['merchants']} merchants, {summary['listings']} catalog listings, "
              f"in {summary['total_seconds']} s")
        if args.json:
            print(json.dumps(summary))
    finally:
        container.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="paywarden-bench load", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
