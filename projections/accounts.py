"""The accounts read model: API key hash → merchant, environment, status, capabilities, rate limit and the
proxy service a key is scoped to (its routes are in `projections/service_scopes.py`).

Every authenticated request reads this view; it never replays a Merchant.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from domain.merchant import Merchant
from projections.sql import SqlView


@dataclass(frozen=True)
class KeyRecord:
    key_hash: str
    prefix: str
    merchant_id: str
    merchant: str
    env: str
    revoked: bool
    rate_limit_per_minute: int | None
    discovery_enabled: bool
    capabilities: frozenset[tuple[str, str, str]]
    service: str | None = None  # the id of the proxy service the key is scoped to


def scoped_service(value: str) -> str | None:
    """A KeyIssued's `service` when it names a service (an id); the free text of keys issued before keys were
    scoped was never enforced, and such keys stay unscoped."""
    try:
        return str(uuid.UUID(value)) if value else None
    except ValueError:
        return None


class AccountsView(SqlView):
    # Called after each commit of the view: the composition root makes it tell the API workers, whose in-process
    # key cache must drop what it holds (interfaces/adapters/accounts_cache.py).
    on_change: Callable[[], None] | None = None

    @contextmanager
    def tracked(self, tracking: Tracking) -> Iterator[Any]:
        with super().tracked(tracking) as cursor:
            yield cursor
        if self.on_change is not None:
            self.on_change()

    tables = (
        "CREATE TABLE IF NOT EXISTS accounts_merchants (merchant_id TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL, "
        "rate_limit INTEGER, discovery_enabled BOOLEAN NOT NULL)",
        "CREATE TABLE IF NOT EXISTS accounts_keys (key_hash TEXT PRIMARY KEY, prefix TEXT UNIQUE NOT NULL, "
        "merchant_id TEXT NOT NULL, env TEXT NOT NULL, revoked BOOLEAN NOT NULL)",
        "CREATE TABLE IF NOT EXISTS accounts_capabilities (merchant_id TEXT NOT NULL, network TEXT NOT NULL, "
        "scheme TEXT NOT NULL, asset TEXT NOT NULL, PRIMARY KEY (merchant_id, network, scheme, asset))",
        # A table of its own (not a column of accounts_keys), so a view made before keys were scoped gains it.
        "CREATE TABLE IF NOT EXISTS accounts_key_scopes (key_hash TEXT PRIMARY KEY, service_id TEXT NOT NULL)",
    )

    def get_key(self, key_hash: str) -> KeyRecord | None:
        # One round trip (every request pays it): a row per capability, none when the merchant has none.
        rows = self.rows(
            "SELECT k.key_hash, k.prefix, k.merchant_id, m.name, k.env, k.revoked, m.rate_limit, m.discovery_enabled, "
            "s.service_id, c.network, c.scheme, c.asset FROM accounts_keys k JOIN accounts_merchants m "
            "ON m.merchant_id = k.merchant_id LEFT JOIN accounts_key_scopes s ON s.key_hash = k.key_hash "
            "LEFT JOIN accounts_capabilities c ON c.merchant_id = k.merchant_id WHERE k.key_hash = ?",
            (key_hash,),
        )
        if not rows:
            return None
        stored_hash, prefix, merchant_id, name, env, revoked, rate_limit, discovery, service = rows[0][:9]
        capabilities = frozenset(tuple(r[9:]) for r in rows if r[9] is not None)
        return KeyRecord(stored_hash, prefix, merchant_id, name, env, bool(revoked), rate_limit, bool(discovery),
                         capabilities, service)

    def get_merchant_by_prefix(self, prefix: str) -> str | None:
        rows = self.rows(
            "SELECT m.name FROM accounts_keys k JOIN accounts_merchants m ON m.merchant_id = k.merchant_id "
            "WHERE k.prefix = ?", (prefix,),
        )
        return rows[0][0] if rows else None

    def get_capabilities(self, merchant_id: str) -> frozenset[tuple[str, str, str]]:
        """The merchant's enabled (network, scheme, asset): what a proxied payment is checked against."""
        rows = self.rows("SELECT network, scheme, asset FROM accounts_capabilities WHERE merchant_id = ?",
                         (merchant_id,))
        return frozenset((str(n), str(s), str(a)) for n, s, a in rows)

    def get_discovery_enabled(self, merchant_id: str) -> bool:
        rows = self.rows("SELECT discovery_enabled FROM accounts_merchants WHERE merchant_id = ?", (merchant_id,))
        return bool(rows[0][0]) if rows else True


class SqliteAccountsView(AccountsView, SQLiteTrackingRecorder):
    pass


class PostgresAccountsView(AccountsView, PostgresTrackingRecorder):
    paramstyle = "format"


class AccountsProjection(Projection[AccountsView]):
    name = "accounts"
    topics = tuple(get_topic(cls) for cls in (
        Merchant.Registered, Merchant.KeyIssued, Merchant.KeyRevoked, Merchant.CapabilityEnabled,
        Merchant.RateLimitSet, Merchant.DiscoveryToggled, Merchant.CapabilityDisabled,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: Merchant.Registered, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO accounts_merchants VALUES (?, ?, NULL, ?)", (str(e.originator_id), e.name, True))

    @process_event.register
    def _(self, e: Merchant.KeyIssued, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO accounts_keys VALUES (?, ?, ?, ?, ?)",
                      (e.key_hash, e.prefix, str(e.originator_id), e.env, False))
            if (service := scoped_service(e.service)) is not None:
                c.execute("INSERT INTO accounts_key_scopes VALUES (?, ?)", (e.key_hash, service))

    @process_event.register
    def _(self, e: Merchant.KeyRevoked, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE accounts_keys SET revoked = ? WHERE prefix = ?", (True, e.prefix))

    @process_event.register
    def _(self, e: Merchant.CapabilityEnabled, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO accounts_capabilities VALUES (?, ?, ?, ?)",
                      (str(e.originator_id), e.network, e.scheme, e.asset))

    @process_event.register
    def _(self, e: Merchant.RateLimitSet, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE accounts_merchants SET rate_limit = ? WHERE merchant_id = ?",
                      (e.per_minute, str(e.originator_id)))

    @process_event.register
    def _(self, e: Merchant.DiscoveryToggled, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE accounts_merchants SET discovery_enabled = ? WHERE merchant_id = ?",
                      (e.enabled, str(e.originator_id)))

    @process_event.register
    def _(self, e: Merchant.CapabilityDisabled, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("DELETE FROM accounts_capabilities WHERE merchant_id = ? AND network = ? AND scheme = ? "
                      "AND asset = ?", (str(e.originator_id), e.network, e.scheme, e.asset))

