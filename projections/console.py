"""The console read model: what a merchant's console pages, its JSON API and the CLI's listings show.

Follows the Merchants log (`Merchant` and `OwnerLogin` events): merchants, owner logins (with the password hash
the login checks), keys with label, service, created and revoked times, capabilities with their public ids, and
domains with their challenge and status. Last-used times of keys are not events: the API records them here at
most once a minute per key and process (`record_key_use`), the only writer of `console_key_usage`.

For the proxy: `ConsoleView.list_verified_domains(merchant_id)` is the merchant's verified domains.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from domain.domains import challenge_name, challenge_url, challenge_value
from domain.login import OwnerLogin
from domain.merchant import Merchant, capability_id
from projections.sql import SqlView


def iso(moment: datetime) -> str:
    """UTC, to the second, `Z`-suffixed: what the console API answers."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class MerchantRow:
    merchant_id: str
    name: str
    created_at: str
    discovery_enabled: bool
    rate_limit_per_minute: int | None
    logins: int = 0
    keys: int = 0


@dataclass(frozen=True)
class LoginRow:
    email: str
    merchant_id: str
    merchant: str
    password_hash: str | None


@dataclass(frozen=True)
class KeyRow:
    prefix: str
    env: str
    label: str
    service: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


@dataclass(frozen=True)
class CapabilityRow:
    id: str
    network: str
    scheme: str
    asset: str
    enabled_at: str


@dataclass(frozen=True)
class DomainRow:
    domain: str
    status: str  # pending or verified
    method: str | None
    added_at: str
    verified_at: str | None
    token: str

    @property
    def dns_name(self) -> str:
        return challenge_name(self.domain)

    @property
    def dns_value(self) -> str:
        return challenge_value(self.token)

    @property
    def http_url(self) -> str:
        return challenge_url(self.domain, self.token)


class ConsoleView(SqlView):
    not_from_events = ("console_key_usage",)  # written by the API, not by events: a rebuild leaves it out
    tables = (
        "CREATE TABLE IF NOT EXISTS console_merchants (merchant_id TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL, "
        "created_at TEXT NOT NULL, discovery_enabled BOOLEAN NOT NULL, rate_limit INTEGER)",
        "CREATE TABLE IF NOT EXISTS console_logins (login_id TEXT PRIMARY KEY, email TEXT UNIQUE NOT NULL, "
        "merchant_id TEXT NOT NULL, password_hash TEXT)",
        "CREATE TABLE IF NOT EXISTS console_keys (prefix TEXT PRIMARY KEY, merchant_id TEXT NOT NULL, "
        "env TEXT NOT NULL, label TEXT NOT NULL, service TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT)",
        "CREATE TABLE IF NOT EXISTS console_key_usage (prefix TEXT PRIMARY KEY, last_used_at TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS console_capabilities (merchant_id TEXT NOT NULL, id TEXT NOT NULL, "
        "network TEXT NOT NULL, scheme TEXT NOT NULL, asset TEXT NOT NULL, enabled_at TEXT NOT NULL, "
        "PRIMARY KEY (merchant_id, id))",
        "CREATE TABLE IF NOT EXISTS console_domains (merchant_id TEXT NOT NULL, domain TEXT NOT NULL, "
        "token TEXT NOT NULL, method TEXT, added_at TEXT NOT NULL, verified_at TEXT, "
        "PRIMARY KEY (merchant_id, domain))",
    )

    # -- queries --------------------------------------------------------------------------------------------

    def list_merchants(self, where: str = "1 = 1", params: tuple[Any, ...] = ()) -> list[MerchantRow]:
        rows = self.rows(
            "SELECT m.merchant_id, m.name, m.created_at, m.discovery_enabled, m.rate_limit, "
            "(SELECT COUNT(*) FROM console_logins l WHERE l.merchant_id = m.merchant_id) AS logins, "
            "(SELECT COUNT(*) FROM console_keys k WHERE k.merchant_id = m.merchant_id AND k.revoked_at IS NULL) "
            f"AS active_keys FROM console_merchants m WHERE {where} ORDER BY m.name", params)
        return [MerchantRow(r[0], r[1], r[2], bool(r[3]), r[4], int(r[5]), int(r[6])) for r in rows]

    def get_merchant(self, merchant_id: str) -> MerchantRow | None:
        return next(iter(self.list_merchants("m.merchant_id = ?", (merchant_id,))), None)

    def get_merchant_by_name(self, name: str) -> MerchantRow | None:
        return next(iter(self.list_merchants("m.name = ?", (name,))), None)

    def get_login(self, email: str) -> LoginRow | None:
        rows = self.rows("SELECT l.email, l.merchant_id, m.name, l.password_hash FROM console_logins l "
                         "JOIN console_merchants m ON m.merchant_id = l.merchant_id WHERE l.email = ?", (email,))
        return LoginRow(*rows[0]) if rows else None

    def list_logins(self, merchant_id: str) -> list[str]:
        return [r[0] for r in self.rows("SELECT email FROM console_logins WHERE merchant_id = ? ORDER BY email",
                                        (merchant_id,))]

    def list_keys(self, merchant_id: str) -> list[KeyRow]:
        rows = self.rows(
            "SELECT k.prefix, k.env, k.label, k.service, k.created_at, u.last_used_at, k.revoked_at "
            "FROM console_keys k LEFT JOIN console_key_usage u ON u.prefix = k.prefix WHERE k.merchant_id = ? "
            "ORDER BY k.created_at DESC, k.prefix", (merchant_id,))
        return [KeyRow(*r) for r in rows]

    def get_key(self, merchant_id: str, prefix: str) -> KeyRow | None:
        rows = self.rows(
            "SELECT k.prefix, k.env, k.label, k.service, k.created_at, u.last_used_at, k.revoked_at "
            "FROM console_keys k LEFT JOIN console_key_usage u ON u.prefix = k.prefix WHERE k.merchant_id = ? "
            "AND k.prefix = ?", (merchant_id, prefix))
        return KeyRow(*rows[0]) if rows else None

    def list_capabilities(self, merchant_id: str) -> list[CapabilityRow]:
        rows = self.rows("SELECT id, network, scheme, asset, enabled_at FROM console_capabilities "
                         "WHERE merchant_id = ? ORDER BY enabled_at, id", (merchant_id,))
        return [CapabilityRow(*r) for r in rows]

    def list_domains(self, merchant_id: str) -> list[DomainRow]:
        rows = self.rows("SELECT domain, method, added_at, verified_at, token FROM console_domains "
                         "WHERE merchant_id = ? ORDER BY domain", (merchant_id,))
        return [DomainRow(r[0], "verified" if r[3] else "pending", r[1], r[2], r[3], r[4]) for r in rows]

    def list_verified_domains(self, merchant_id: str) -> list[str]:
        """The merchant's verified domains (a proxy service's base URL must be on one of them)."""
        return [r[0] for r in self.rows("SELECT domain FROM console_domains WHERE merchant_id = ? AND "
                                        "verified_at IS NOT NULL ORDER BY domain", (merchant_id,))]

    # -- last use (not an event) ----------------------------------------------------------------------------

    def record_key_use(self, prefix: str, at: datetime) -> None:
        statement = ("INSERT INTO console_key_usage VALUES (?, ?) ON CONFLICT (prefix) DO UPDATE SET "
                     "last_used_at = excluded.last_used_at WHERE excluded.last_used_at > "
                     "console_key_usage.last_used_at")
        with self.datastore.transaction(commit=True) as c:
            c.execute(self.sql(statement), (prefix, iso(at)))


class SqliteConsoleView(ConsoleView, SQLiteTrackingRecorder):
    pass


class PostgresConsoleView(ConsoleView, PostgresTrackingRecorder):
    paramstyle = "format"


class ConsoleProjection(Projection[ConsoleView]):
    name = "console"
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
        self._write(tracking, "INSERT INTO console_merchants VALUES (?, ?, ?, ?, NULL)",
                    str(e.originator_id), e.name, iso(e.timestamp), True)

    @process_event.register
    def _(self, e: Merchant.KeyIssued, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO console_keys VALUES (?, ?, ?, ?, ?, ?, NULL)", e.prefix,
                    str(e.originator_id), e.env, e.label, e.service, iso(e.timestamp))

    @process_event.register
    def _(self, e: Merchant.KeyRevoked, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE console_keys SET revoked_at = ? WHERE prefix = ?", iso(e.timestamp), e.prefix)

    @process_event.register
    def _(self, e: Merchant.CapabilityEnabled, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO console_capabilities VALUES (?, ?, ?, ?, ?, ?)", str(e.originator_id),
                    capability_id(e.network, e.scheme, e.asset), e.network, e.scheme, e.asset, iso(e.timestamp))

    @process_event.register
    def _(self, e: Merchant.CapabilityDisabled, tracking: Tracking) -> None:
        self._write(tracking, "DELETE FROM console_capabilities WHERE merchant_id = ? AND id = ?",
                    str(e.originator_id), capability_id(e.network, e.scheme, e.asset))

    @process_event.register
    def _(self, e: Merchant.RateLimitSet, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE console_merchants SET rate_limit = ? WHERE merchant_id = ?", e.per_minute,
                    str(e.originator_id))

    @process_event.register
    def _(self, e: Merchant.DiscoveryToggled, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE console_merchants SET discovery_enabled = ? WHERE merchant_id = ?",
                    e.enabled, str(e.originator_id))

    @process_event.register
    def _(self, e: Merchant.DomainAdded, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO console_domains VALUES (?, ?, ?, NULL, ?, NULL)", str(e.originator_id),
                    e.domain, e.token, iso(e.timestamp))

    @process_event.register
    def _(self, e: Merchant.DomainVerified, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE console_domains SET method = ?, verified_at = ? WHERE merchant_id = ? AND "
                    "domain = ?", e.method, iso(e.timestamp), str(e.originator_id), e.domain)

    @process_event.register
    def _(self, e: Merchant.DomainRemoved, tracking: Tracking) -> None:
        self._write(tracking, "DELETE FROM console_domains WHERE merchant_id = ? AND domain = ?",
                    str(e.originator_id), e.domain)

    @process_event.register
    def _(self, e: OwnerLogin.Created, tracking: Tracking) -> None:
        self._write(tracking, "INSERT INTO console_logins VALUES (?, ?, ?, NULL)", str(e.originator_id), e.email,
                    str(e.merchant_id))

    @process_event.register
    def _(self, e: OwnerLogin.PasswordSet, tracking: Tracking) -> None:
        self._write(tracking, "UPDATE console_logins SET password_hash = ? WHERE login_id = ?", e.password_hash,
                    str(e.originator_id))

    def _write(self, tracking: Tracking, statement: str, *params: Any) -> None:
        with self.view.tracked(tracking) as c:
            c.execute(statement, params)
