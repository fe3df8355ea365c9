"""Server-side console sessions: the cookie carries only a random id; the store keeps the rest.

The store is keyed by SHA-256 of the id (a leaked store holds no usable cookie). Redis when `PAYWARDEN_REDIS_URL`
is set, so every console worker and host shares the sessions and a logout ends one everywhere; otherwise a SQLite
file in the data directory, shared by the processes of one host. Sessions expire 12 hours after login.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

SESSION_SECONDS = 12 * 3600
COOKIE = "pw_console_session"


@dataclass(frozen=True)
class Session:
    id: str
    merchant_id: str
    merchant: str
    email: str
    csrf: str
    expires_at: float


class SessionStore(Protocol):
    def save(self, session: Session) -> None: ...

    def load(self, id_hash: str) -> Session | None: ...

    def delete(self, id_hash: str) -> None: ...


def id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    """Create, read and end sessions in a `SessionStore`."""

    def __init__(self, store: SessionStore, *, seconds: int = SESSION_SECONDS) -> None:
        self._store, self.seconds = store, seconds

    def create(self, merchant_id: str, merchant: str, email: str) -> Session:
        session = Session(secrets.token_urlsafe(32), merchant_id, merchant, email, secrets.token_urlsafe(32),
                          time.time() + self.seconds)
        self._store.save(session)
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id or len(session_id) > 100:
            return None
        session = self._store.load(id_hash(session_id))
        if session is None or session.expires_at <= time.time() or session.id != session_id:
            return None
        return session

    def end(self, session_id: str) -> None:
        self._store.delete(id_hash(session_id))


class RedisSessionStore:
    PREFIX = "paywarden:console:session:"

    def __init__(self, redis: Any) -> None:
        self._redis = redis

    def save(self, session: Session) -> None:
        ttl = max(1, int(session.expires_at - time.time()))
        self._redis.set(self.PREFIX + id_hash(session.id), json.dumps(asdict(session)), ex=ttl)

    def load(self, key: str) -> Session | None:
        raw = self._redis.get(self.PREFIX + key)
        return Session(**json.loads(raw)) if raw else None

    def delete(self, key: str) -> None:
        self._redis.delete(self.PREFIX + key)


class SqliteSessionStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("CREATE TABLE IF NOT EXISTS console_sessions (id_hash TEXT PRIMARY KEY, "
                             "data TEXT NOT NULL, expires_at REAL NOT NULL)")

    def save(self, session: Session) -> None:
        with self._lock:
            self._db.execute("DELETE FROM console_sessions WHERE expires_at <= ?", (time.time(),))
            self._db.execute("INSERT INTO console_sessions VALUES (?, ?, ?)",
                             (id_hash(session.id), json.dumps(asdict(session)), session.expires_at))

    def load(self, key: str) -> Session | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM console_sessions WHERE id_hash = ?", (key,)).fetchone()
        return Session(**json.loads(row[0])) if row else None

    def delete(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM console_sessions WHERE id_hash = ?", (key,))

    def close(self) -> None:
        self._db.close()
