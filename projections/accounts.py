"""The accounts read model: the one read model of the Merchants log (`Merchant` and `OwnerLogin` events).

Every authenticated request reads it (`get_key`: API key hash → merchant, environment, status, capabilities, rate
limit and the proxy service a key is scoped to, whose routes are in `projections/service_scopes.py`); so do the
console's pages, its JSON API and the CLI's listings (merchants, owner logins with the password hash a login checks,
keys with label and times, capabilities with their public ids, domains with their challenge and status), and the
proxy (a merchant's verified domains and capabilities). It never replays a Merchant. The last use of each key is not
an event and lives apart (projections/key_use.py).

Its tables took this shape when the console's read model was merged into it: a view of the earlier shape is
rebuilt from the event store (projections/reshape.py).
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

from application.merchants import Merchants
from domain.login import OwnerLogin
from domain.merchant import Merchant, capability_id
from projections.account_rows import CapabilityRow, DomainRow, KeyRow, LoginRow, MerchantRow, iso
from projections.reshape import ReshapedView, Shape
from projections.sql import Batch


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


KEY_ROW = "SELECT prefix, env, label, service, created_at, NULL, revoked_at FROM accounts_keys"


class AccountsView(ReshapedView):
    """`on_change` is called after each commit of the view: the composition root passes what tells the API workers,
    whose in-process key cache must drop what it holds (interfaces/adapters/accounts_cache.py)."""

    tables = (
        "CREATE TABLE IF NOT EXISTS accounts_merchants (merchant_id TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL, "
        "created_at TEXT NOT NULL, rate_limit INTEGER, discovery_enabled BOOLEAN NOT NULL)",
        # `service` as issued (free text before keys were scoped); `scope`, the service id a scoped key is held to.
        "CREATE TABLE IF NOT EXISTS accounts_keys (key_hash TEXT PRIMARY KEY, prefix TEXT UNIQUE NOT NULL, "
        "merchant_id TEXT NOT NULL, env TEXT NOT NULL, label TEXT NOT NULL, service TEXT NOT NULL, scope TEXT, "
        "created_at TEXT NOT NULL, revoked_at TEXT)",
        "CREATE INDEX IF NOT EXISTS accounts_keys_merchant ON accounts_keys (merchant_id, created_at)",
        "CREATE TABLE IF NOT EXISTS accounts_capabilities (merchant_id TEXT NOT NULL, id TEXT NOT NULL, "
        "network TEXT NOT NULL, scheme TEXT NOT NULL, asset TEXT NOT NULL, enabled_at TEXT NOT NULL, "
        "PRIMARY KEY (merchant_id, id))",
        "CREATE TABLE IF NOT EXISTS accounts_domains (merchant_id TEXT NOT NULL, domain TEXT NOT NULL, "
        "token TEXT NOT NULL, method TEXT, added_at TEXT NOT NULL, verified_at TEXT, "
        "PRIMARY KEY (merchant_id, domain))",
        "CREATE TABLE IF NOT EXISTS accounts_logins (login_id TEXT PRIMARY KEY, email TEXT UNIQUE NOT NULL, "
        "merchant_id TEXT NOT NULL, password_hash TEXT)",
    )
    # The shape before the console's read model was merged in (no label, no times, scopes in a table of their own).
    shape = Shape(Merchants.name, ("accounts_keys", "label"), ("accounts_merchants", "accounts_keys",
                  "accounts_capabilities", "accounts_key_scopes"))

    def __init__(self, *args: Any, on_change: Callable[[], None] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_change = on_change


    @contextmanager
    def tracked(self, tracking: Tracking) -> Iterator[Any]:
        alone = self.current_batch() is None  # inside a batch, the batch's commit tells (`batch`)
        with super().tracked(tracking) as cursor:
            yield cursor
        if alone and self.on_change is not None:
            self.on_change()

    @contextmanager
    def batch(self, first: Tracking | None = None, last: Tracking | None = None) -> Iterator[Batch]:
        outermost = self.current_batch() is None
        with super().batch(first, last) as open_batch:
            yield open_batch
        if outermost and self.on_change is not None:  # after the commit: a worker reading then sees the change
            self.on_change()

    # -- the authentication path -----------------------------------------------------------------------------

    def get_key(self, key_hash: str) -> KeyRecord | None:
        # One round trip (every request pays it): a row per capability, none when the merchant has none.
        rows = self.rows(
            "SELECT k.key_hash, k.prefix, k.merchant_id, m.name, k.env, k.revoked_at, m.rate_limit, "
            "m.discovery_enabled, k.scope, c.network, c.scheme, c.asset FROM accounts_keys k JOIN accounts_merchants m "
            "ON m.merchant_id = k.merchant_id LEFT JOIN accounts_capabilities c ON c.merchant_id = k.merchant_id "
            "WHERE k.key_hash = ?", (key_hash,),
        )
        if not rows:
            return None
        stored_hash, prefix, merchant_id, name, env, revoked_at, rate_limit, discovery, service = rows[0][:9]
        capabilities = frozenset(tuple(r[9:]) for r in rows if r[9] is not None)
        return KeyRecord(stored_hash, prefix, merchant_id, name, env, revoked_at is not None, rate_limit,
                         bool(discovery), capabilities, service)

    def get_merchant_by_prefix(self, prefix: str) -> str | None:
        rows = self.rows("SELECT m.name FROM accounts_keys k JOIN accounts_merchants m ON m.merchant_id = "
                         "k.merchant_id WHERE k.prefix = ?", (prefix,))
        return rows[0][0] if rows else None

    def get_capabilities(self, merchant_id: str) -> frozenset[tuple[str, str, str]]:
        """The merchant's enabled (network, scheme, asset): what a proxied payment is checked against."""
        rows = self.rows("SELECT network, scheme, asset FROM accounts_capabilities WHERE merchant_id = ?",
                         (merchant_id,))
        return frozenset((str(n), str(s), str(a)) for n, s, a in rows)

    def get_discovery_enabled(self, merchant_id: str) -> bool:
        rows = self.rows("SELECT discovery_enabled FROM accounts_merchants WHERE merchant_id = ?", (merchant_id,))
        return bool(rows[0][0]) if rows else True

    # -- the console and the CLI ---------------------------------------------------------------------------------

    def list_merchants(self, where: str = "1 = 1", params: tuple[Any, ...] = ()) -> list[MerchantRow]:
        rows = self.rows(
            "SELECT m.merchant_id, m.name, m.created_at, m.discovery_enabled, m.rate_limit, "
            "(SELECT COUNT(*) FROM accounts_logins l WHERE l.merchant_id = m.merchant_id) AS logins, "
            "(SELECT COUNT(*) FROM accounts_keys k WHERE k.merchant_id = m.merchant_id AND k.revoked_at IS NULL) "
            f"AS active_keys FROM accounts_merchants m WHERE {where} ORDER BY m.name", params)
        return [MerchantRow(r[0], r[1], r[2], bool(r[3]), r[4], int(r[5]), int(r[6])) for r in rows]

    def get_merchant(self, merchant_id: str) -> MerchantRow | None:
        return next(iter(self.list_merchants("m.merchant_id = ?", (merchant_id,))), None)

    def get_merchant_by_name(self, name: str) -> MerchantRow | None:
        return next(iter(self.list_merchants("m.name = ?", (name,))), None)

    def get_login(self, email: str) -> LoginRow | None:
        rows = self.rows("SELECT l.email, l.merchant_id, m.name, l.password_hash FROM accounts_logins l "
                         "JOIN accounts_merchants m ON m.merchant_id = l.merchant_id WHERE l.email = ?", (email,))
        return LoginRow(*rows[0]) if rows else None

    def list_logins(self, merchant_id: str) -> list[str]:
        return [r[0] for r in self.rows("SELECT email FROM accounts_logins WHERE merchant_id = ? ORDER BY email",
                                        (merchant_id,))]

    def list_keys(self, merchant_id: str) -> list[KeyRow]:
        """The merchant's keys, newest first, without their last use (`projections.key_use.with_last_use`)."""
        rows = self.rows(f"{KEY_ROW} WHERE merchant_id = ? ORDER BY created_at DESC, prefix", (merchant_id,))
        return [KeyRow(*r) for r in rows]

    def get_merchant_key(self, merchant_id: str, prefix: str) -> KeyRow | None:
        """One of the merchant's keys by its prefix (another merchant's reads as unknown)."""
        rows = self.rows(f"{KEY_ROW} WHERE merchant_id = ? AND prefix = ?", (merchant_id, prefix))
        return KeyRow(*rows[0]) if rows else None

    def list_capabilities(self, merchant_id: str) -> list[CapabilityRow]:
        rows = self.rows("SELECT id, network, scheme, asset, enabled_at FROM accounts_capabilities "
                         "WHERE merchant_id = ? ORDER BY enabled_at, id", (merchant_id,))
        return [CapabilityRow(*r) for r in rows]

    def list_domains(self, merchant_id: str) -> list[DomainRow]:
        rows = self.rows("SELECT domain, method, added_at, verified_at, token FROM accounts_domains "
                         "WHERE merchant_id = ? ORDER BY domain", (merchant_id,))
        return [DomainRow(r[0], "verified" if r[3] else "pending", r[1], r[2], r[3], r[4]) for r in rows]

    def list_verified_domains(self, merchant_id: str) -> list[str]:
        """The merchant's verified domains (a proxy service's base URL must be on one of them)."""
        return [r[0] for r in self.rows("SELECT domain FROM accounts_domains WHERE merchant_id = ? AND "
                                        "verified_at IS NOT NULL ORDER BY domain", (merchant_id,))]


class SqliteAccountsView(AccountsView, SQLiteTrackingRecorder):
    pass


class PostgresAccountsView(AccountsView, PostgresTrackingRecorder):
    paramstyle = "format"


class AccountsProjection(Projection[AccountsView]):
    name = "accounts"
    topics = tuple(get_topic(cls) for cls in (
        Merchant.Registered, Merchant.KeyIssued, Merchant.KeyRevoked, Merchant.CapabilityEnabled,
        Merchant.CapabilityDisabled, Merchant.RateLimitSet, Merchant.DiscoveryToggled, Merchant.DomainAdded,
        Merchant.DomainVerified, Merchant.DomainRemoved, OwnerLogin.Created, OwnerLogin.PasswordSet,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: Merchant.Registered, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO accounts_merchants VALUES (?, ?, ?, NULL, ?)", str(e.originator_id),
                    e.name, iso(e.timestamp), True)

    @process_event.register
    def _(self, e: Merchant.KeyIssued, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO accounts_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)", e.key_hash,
                    e.prefix, str(e.originator_id), e.env, e.label, e.service, scoped_service(e.service),
                    iso(e.timestamp))

    @process_event.register
    def _(self, e: Merchant.KeyRevoked, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE accounts_keys SET revoked_at = ? WHERE prefix = ?", iso(e.timestamp),
                    e.prefix)

    @process_event.register
    def _(self, e: Merchant.CapabilityEnabled, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO accounts_capabilities VALUES (?, ?, ?, ?, ?, ?)", str(e.originator_id),
                    capability_id(e.network, e.scheme, e.asset), e.network, e.scheme, e.asset, iso(e.timestamp))

    @process_event.register
    def _(self, e: Merchant.CapabilityDisabled, tracking: Tracking) -> None:
        self._write(tracking, "DELETE FROM accounts_capabilities WHERE merchant_id = ? AND id = ?",
                    str(e.originator_id), capability_id(e.network, e.scheme, e.asset))

    @process_event.register
    def _(self, e: Merchant.RateLimitSet, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE accounts_merchants SET rate_limit = ? WHERE merchant_id = ?", e.per_minute,
                    str(e.originator_id))

    @process_event.register
    def _(self, e: Merchant.DiscoveryToggled, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE accounts_merchants SET discovery_enabled = ? WHERE merchant_id = ?",
                    e.enabled, str(e.originator_id))

    @process_event.register
    def _(self, e: Merchant.DomainAdded, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO accounts_domains VALUES (?, ?, ?, NULL, ?, NULL)", str(e.originator_id),
                    e.domain, e.token, iso(e.timestamp))

    @process_event.register
    def _(self, e: Merchant.DomainVerified, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE accounts_domains SET method = ?, verified_at = ? WHERE merchant_id = ? AND "
                    "domain = ?", e.method, iso(e.timestamp), str(e.originator_id), e.domain)

    @process_event.register
    def _(self, e: Merchant.DomainRemoved, tracking: Tracking) -> None:
        self._write(tracking, "DELETE FROM accounts_domains WHERE merchant_id = ? AND domain = ?",
                    str(e.originator_id), e.domain)

    @process_event.register
    def _(self, e: OwnerLogin.Created, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO accounts_logins VALUES (?, ?, ?, NULL)", str(e.originator_id), e.email,
                    str(e.merchant_id))

    @process_event.register
    def _(self, e: OwnerLogin.PasswordSet, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE accounts_logins SET password_hash = ? WHERE login_id = ?", e.password_hash,
                    str(e.originator_id))

    def _write(self, tracking: Tracking, statement: str, *params: Any) -> None:
        with self.view.tracked(tracking) as c:
            c.execute(statement, params)
