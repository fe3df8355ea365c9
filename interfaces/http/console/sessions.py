"""Server-side console sessions: the cookie carries only a random id; the store keeps nothing replayable.

The store is keyed by SHA-256 of the id and holds only who is logged in and until when: never the id, never the
CSRF token. The token is derived from the id with the server's key (HMAC-SHA256), so it can be given again
(`GET /me`, every page) without being stored. A leaked store therefore builds neither a cookie nor a token.

Redis when `PAYWARDEN_REDIS_URL` is set, so every console worker and host shares the sessions and a logout ends one
everywhere; otherwise a SQLite file in the data directory (mode 0600, created so), shared by the processes of one
host. Sessions expire 12 hours after login. Each login's sessions are indexed (by SHA-256 of its email) so that
"log out everywhere" and a new password end all of them; a session also remembers a fingerprint of the password it
was opened with and is refused once the login's password is another (whichever process changed it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

SESSION_SECONDS = 12 * 3600
COOKIE = "pw_console_session"
SECURE_COOKIE = "__Host-" + COOKIE  # production: Secure, Path=/, no Domain, so no subdomain can set or shadow it


def cookie_name(secure: bool) -> str:
    return SECURE_COOKIE if secure else COOKIE


@dataclass(frozen=True)
class Session:
    id: str  # from the cookie; never stored
    merchant_id: str
    merchant: str
    email: str
    csrf: str  # derived from the id; never stored
    expires_at: float


class SessionStore(Protocol):
    def save(self, key: str, login: str, record: dict[str, Any], expires_at: float) -> None: ...

    def load(self, key: str) -> dict[str, Any] | None: ...

    def delete(self, key: str) -> None: ...

    def delete_login(self, login: str) -> int: ...


def id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def login_hash(email: str) -> str:
    return hashlib.sha256(email.strip().lower().encode()).hexdigest()


def password_mark(password_hash: str | None) -> str:
    """What a session remembers of its login's password: enough to notice a change, nothing to attack."""
    return hashlib.sha256((password_hash or "").encode()).hexdigest()[:32]


RECORD_FIELDS = frozenset({"merchant_id", "merchant", "email", "created_at", "expires_at", "password"})


class Sessions:
    """Create, read and end sessions in a `SessionStore`.

    `key`: the server's secret for CSRF tokens; `password_hash_of(email)`: the login's current password hash
    (the accounts read model), checked on every request."""

    def __init__(self, store: SessionStore, key: bytes, *, seconds: int = SESSION_SECONDS,
                 password_hash_of: Callable[[str], str | None] | None = None) -> None:
        self._store, self._key, self.seconds = store, key, seconds
        self._password_hash_of = password_hash_of

    def csrf(self, session_id: str) -> str:
        return hmac.new(self._key, b"paywarden console csrf\0" + session_id.encode(), hashlib.sha256).hexdigest()

    def create(self, merchant_id: str, merchant: str, email: str, password_hash: str | None = None) -> Session:
        session_id, now = secrets.token_urlsafe(32), time.time()
        record = {"merchant_id": merchant_id, "merchant": merchant, "email": email, "created_at": now,
                  "expires_at": now + self.seconds, "password": password_mark(password_hash)}
        self._store.save(id_hash(session_id), login_hash(email), record, now + self.seconds)
        return self._session(session_id, record)

    def get(self, session_id: str | None) -> Session | None:
        if not session_id or len(session_id) > 100:
            return None
        key = id_hash(session_id)
        record = self._store.load(key)
        if record is None or set(record) != RECORD_FIELDS:  # an older format (which held the id): gone
            if record is not None:
                self._store.delete(key)
            return None
        if record["expires_at"] <= time.time():
            return None
        if self._password_hash_of is not None and \
                password_mark(self._password_hash_of(record["email"])) != record["password"]:
            self._store.delete(key)  # the password changed since this session was opened
            return None
        return self._session(session_id, record)

    def end(self, session_id: str) -> None:
        self._store.delete(id_hash(session_id))

    def end_all(self, email: str) -> int:
        """End every session of a login (log out everywhere, a new password); returns how many there were."""
        return self._store.delete_login(login_hash(email))

    def _session(self, session_id: str, record: dict[str, Any]) -> Session:
        return Session(session_id, record["merchant_id"], record["merchant"], record["email"],
                       self.csrf(session_id), record["expires_at"])


class RedisSessionStore:
    PREFIX = "paywarden:console:session:"
    LOGIN_PREFIX = "paywarden:console:login-sessions:"

    def __init__(self, redis: Any) -> None:
        self._redis = redis

    def save(self, key: str, login: str, record: dict[str, Any], expires_at: float) -> None:
        ttl = max(1, int(expires_at - time.time()))
        index = self.LOGIN_PREFIX + login
        pipe = self._redis.pipeline()
        pipe.set(self.PREFIX + key, json.dumps(record), ex=ttl)
        pipe.zremrangebyscore(index, "-inf", time.time())
        pipe.zadd(index, {key: expires_at})
        pipe.expire(index, ttl)
        pipe.execute()

    def load(self, key: str) -> dict[str, Any] | None:
        raw = self._redis.get(self.PREFIX + key)
        return json.loads(raw) if raw else None

    def delete(self, key: str) -> None:
        self._redis.delete(self.PREFIX + key)

    def delete_login(self, login: str) -> int:
        index = self.LOGIN_PREFIX + login
        keys = [k.decode() if isinstance(k, bytes) else k for k in self._redis.zrange(index, 0, -1)]
        pipe = self._redis.pipeline()
        for key in keys:
            pipe.delete(self.PREFIX + key)
        pipe.delete(index)
        results = pipe.execute()
        return sum(int(r) for r in results[:len(keys)])


def create_private_file(path: Path) -> None:
    """Create `path` with mode 0600 if it is missing (never readable by others, not even for a moment); tighten
    an existing one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)


class SqliteSessionStore:
    def __init__(self, path: Path) -> None:
        create_private_file(path)
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            # Until 2026-11-26 the table `console_sessions` held each session's id and CSRF token: dropped.
            self._db.execute("DROP TABLE IF EXISTS console_sessions")
            self._db.execute("CREATE TABLE IF NOT EXISTS console_sessions_v2 (id_hash TEXT PRIMARY KEY, "
                             "login_hash TEXT NOT NULL, data TEXT NOT NULL, expires_at REAL NOT NULL)")
            self._db.execute("CREATE INDEX IF NOT EXISTS console_sessions_v2_login "
                             "ON console_sessions_v2 (login_hash)")

    def save(self, key: str, login: str, record: dict[str, Any], expires_at: float) -> None:
        with self._lock:
            self._db.execute("DELETE FROM console_sessions_v2 WHERE expires_at <= ?", (time.time(),))
            self._db.execute("INSERT INTO console_sessions_v2 VALUES (?, ?, ?, ?)",
                             (key, login, json.dumps(record), expires_at))

    def load(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM console_sessions_v2 WHERE id_hash = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def delete(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM console_sessions_v2 WHERE id_hash = ?", (key,))

    def delete_login(self, login: str) -> int:
        with self._lock:
            return self._db.execute("DELETE FROM console_sessions_v2 WHERE login_hash = ?", (login,)).rowcount

    def close(self) -> None:
        self._db.close()
