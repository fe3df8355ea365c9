"""Redis adapters of the ports, shared by every worker and host: the per-payment lock, the terminal result cache and
the discovery query cache. Their in-process twins are in `interfaces/adapters/memory.py`.

Keys (one Redis database, no cluster hash slots needed):
- `paywarden:lock:<idempotency key>`: the lock, holding its owner's random token, with a short expiry (a lease,
  `LEASE_SECONDS`) that its holder's process renews while the work goes on;
- `paywarden:result:<operation>:<idempotency key>`: a terminal result, {"terms": digest, "outcome": {...}};
- `paywarden:result_cache:payment:<payment id>`: what the cache projection keeps of a payment until its results;
- `paywarden:result_cache:tracking:<application>`: the cache projection's position in the notification log.

The event store is the authority: a cache read that fails is a miss. A lock
that cannot be taken because Redis is down raises, so the request fails (500) rather than run unguarded.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import redis
from eventsourcing.persistence import IntegrityError, Tracking
from redis.backoff import NoBackoff
from redis.retry import Retry

from application.ports import DISCOVERY_TTL_SECONDS
from projections.results import ResultCacheView, load_entry

PREFIX = "paywarden"
RESULT_TTL_SECONDS = 24 * 3600
LEASE_SECONDS = 4.0  # a lock's expiry in Redis: how long a dead holder's lock outlives it (docs/production.md)
RENEW_SECONDS = 1.0  # how often a live holder's process extends the leases it holds
log = logging.getLogger("paywarden.redis")
cache_log = logging.getLogger("paywarden.cache")


def redis_client(url: str, *, timeout_seconds: float = 1.0) -> redis.Redis:
    """A client that fails fast (one retry, 1 s socket timeouts) and reconnects on the next command by itself."""
    return redis.Redis.from_url(
        url, socket_connect_timeout=timeout_seconds, socket_timeout=timeout_seconds,
        retry=Retry(NoBackoff(), 1), health_check_interval=30,
    )


def lock_key(key: str) -> str:
    return f"{PREFIX}:lock:{key}"


def result_key(key: str, operation: str) -> str:
    return f"{PREFIX}:result:{operation}:{key}"


class RedisLocks:
    """Implements `Locks` with leases: SET NX PX with a random token and a short expiry (`LEASE_SECONDS`), extended
    every `RENEW_SECONDS` by one thread of the holder's process for as long as the holder works (at most the
    `ttl_seconds` it asked for), released only by its owner. A holder that dies (SIGKILL, the OOM killer, a lost
    host) stops renewing: its lock is free again within `LEASE_SECONDS`, not after the whole confirmation budget.

    The lock is the early refusal (`duplicate_request`). The fencing token that stops a holder whose lease lapsed
    (a process frozen longer than the lease) is the payment's version in the event store: every save is
    conditional on it, and a broadcast is sent only after its `SettlementSubmitted` was saved, so a stale holder's
    save fails (`IntegrityError` → `duplicate_request`) before anything is sent."""

    _RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
    _RENEW = """
local lost = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then redis.call('PEXPIRE', KEYS[i], ARGV[1])
  else lost[#lost + 1] = KEYS[i] end
end
return lost
"""

    def __init__(self, client: redis.Redis, *, lease_seconds: float = LEASE_SECONDS,
                 renew_seconds: float = RENEW_SECONDS) -> None:
        self._client = client
        self._release = client.register_script(self._RELEASE)
        self._renew = client.register_script(self._RENEW)
        self.lease_ms, self._renew_seconds = max(1, int(lease_seconds * 1000)), renew_seconds
        self._held: dict[str, tuple[str, float]] = {}  # lock name -> (token, renew until, monotonic)
        self._mutex = threading.Lock()
        self._renewer: tuple[int, threading.Thread] | None = None

    @contextmanager
    def hold(self, key: str, ttl_seconds: float) -> Iterator[bool]:
        """Take the lock (one round trip); keep it renewed while the context runs (at most `ttl_seconds`), then
        release it."""
        name, token = lock_key(key), secrets.token_hex(16)
        if not self._acquire(name, token):
            yield False
            return
        with self._mutex:
            self._held[name] = (token, time.monotonic() + ttl_seconds)
        self._ensure_renewer()
        try:
            yield True
        finally:
            with self._mutex:
                self._held.pop(name, None)
            self._release_quietly(name, token)

    def _acquire(self, name: str, token: str) -> bool:
        if self._client.set(name, token, nx=True, px=self.lease_ms):
            return True
        # A SET retried after a lost reply finds its own token: that is still our lock.
        return self._client.get(name) == token.encode()

    def release(self, key: str, token: str) -> bool:
        """Delete the lock if `token` still owns it; True if it did."""
        return bool(self._release(keys=[lock_key(key)], args=[token]))

    def _release_quietly(self, name: str, token: str) -> None:
        try:
            self._release(keys=[name], args=[token])
        except redis.RedisError as down:
            # The work is recorded; the lock frees itself at its expiry. Failing the request now would lie.
            log.warning("could not release %s (%s); it expires by itself", name, down)

    def _ensure_renewer(self) -> None:
        """One renewing thread per process (a greenlet under gevent), started on first use: a thread started
        before gunicorn forks its workers would not exist in them."""
        pid = os.getpid()
        if self._renewer is not None and self._renewer[0] == pid and self._renewer[1].is_alive():
            return
        with self._mutex:
            if self._renewer is None or self._renewer[0] != pid or not self._renewer[1].is_alive():
                thread = threading.Thread(target=self._renew_forever, name="redis-lock-leases", daemon=True)
                self._renewer = (pid, thread)
                thread.start()

    def _renew_forever(self) -> None:
        while True:
            time.sleep(self._renew_seconds)
            try:
                self.renew_held()
            except redis.RedisError as down:
                log.warning("could not renew the held locks (%s); retrying", down)

    def renew_held(self) -> list[str]:
        """Extend every lease this process holds, in one round trip; the names of those found lost (expired, or
        taken by another holder after a lapse): they are no longer renewed."""
        now = time.monotonic()
        with self._mutex:
            held = [(name, token) for name, (token, until) in self._held.items() if until > now]
        if not held:
            return []
        lost = [raw.decode() for raw in self._renew(keys=[name for name, _ in held],
                                                    args=[self.lease_ms, *(token for _, token in held)])]
        if lost:
            log.warning("%d lock leases were lost while held (a stale holder's saves are refused by the event "
                        "store)", len(lost))
            with self._mutex:
                for name in lost:
                    if name in self._held:
                        self._held[name] = (self._held[name][0], 0.0)
        return lost


class RedisResultCache:
    """Implements `ResultCache` over Redis, read-only (`ResultCacheProjection` fills it, through
    `RedisResultCacheView`). A read that fails is a miss, never a failure: the event store answers."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def get(self, key: str, operation: str) -> dict[str, Any] | None:
        try:
            raw = self._client.get(result_key(key, operation))
        except redis.RedisError as down:
            log.debug("result cache unavailable (%s): answering from the event store", down)
            return None
        return load_entry(raw)


class RedisResultCacheView(ResultCacheView):
    """The result cache as the view of `ResultCacheProjection`: writes and their tracking position are applied by
    one Lua script, so an event is applied once even with several runners.

    The runner applies a batch of notifications at a time (`batch`, as `SqlView.batch`): the batch's writes are kept
    in memory, a payment's facts read there first, and one script writes them all at its end, refusing the whole
    batch if the recorded position is not before its first notification (another runner applied some of it:
    IntegrityError, the runner reads again). A verify's Received and Approved, nearly always in one batch, are one
    write of the payment's facts instead of two scripts and a read (docs/performance.md)."""

    _RECORD = """
local position = tonumber(redis.call('GET', KEYS[1]) or '0')
if position >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
for i = 2, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 2], 'EX', ARGV[3]) end
return 1
"""

    def __init__(self, client: redis.Redis, *, ttl_seconds: int = RESULT_TTL_SECONDS) -> None:
        self._client, self._ttl = client, ttl_seconds
        self._record = client.register_script(self._RECORD)
        self._local = threading.local()

    def max_tracking_id(self, application_name: str) -> int | None:
        raw = self._client.get(self._tracking_key(application_name))
        return int(raw) if raw is not None else None

    def insert_tracking(self, tracking: Tracking) -> None:
        self.record(tracking)

    def payment(self, payment_id: str) -> dict[str, Any] | None:
        open_batch: _Pending | None = getattr(self._local, "batch", None)
        if open_batch is not None and payment_id in open_batch.payments:
            return open_batch.payments[payment_id]
        return load_entry(self._client.get(self._payment_key(payment_id)))

    def record(self, tracking: Tracking, *, payment_id: str | None = None, payment: dict[str, Any] | None = None,
               results: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        open_batch: _Pending | None = getattr(self._local, "batch", None)
        pending = open_batch if open_batch is not None else _Pending()
        pending.add(tracking, payment_id, payment, results)
        if open_batch is None:
            self._write(pending)

    @contextmanager
    def batch(self, first: Tracking | None = None, last: Tracking | None = None) -> Iterator[_Pending]:
        """Every `record` of this thread until the block ends is written by one script at its end; an exception
        in the block writes nothing. The positions are those recorded (the runner's `first` and `last` bound
        them; a batch stopped early records up to the last event it applied)."""
        if getattr(self._local, "batch", None) is not None:  # already in a batch: part of it
            yield self._local.batch
            return
        pending = self._local.batch = _Pending()
        try:
            yield pending
        finally:
            self._local.batch = None
        if pending.first is not None:
            self._write(pending)

    def _write(self, pending: _Pending) -> None:
        assert pending.first is not None and pending.last is not None
        keys, values = [self._tracking_key(pending.first.application_name)], []
        for payment_id, facts in pending.payments.items():
            keys.append(self._payment_key(payment_id))
            values.append(json.dumps(facts, separators=(",", ":")))
        for (key, operation), result in pending.results.items():
            keys.append(result_key(key, operation))
            values.append(json.dumps(result, separators=(",", ":")))
        if not self._record(keys=keys, args=[pending.first.notification_id, pending.last.notification_id,
                                             self._ttl, *values]):
            raise IntegrityError(f"{pending.first.application_name} notification {pending.first.notification_id} "
                                 "was applied")

    @staticmethod
    def _tracking_key(application_name: str) -> str:
        return f"{PREFIX}:result_cache:tracking:{application_name}"

    @staticmethod
    def _payment_key(payment_id: str) -> str:
        return f"{PREFIX}:result_cache:payment:{payment_id}"


class RedisQueryCache:
    """Shared by every worker and host: one JSON value per query, expired by Redis."""

    def __init__(self, client: redis.Redis, ttl: int = DISCOVERY_TTL_SECONDS, *,
                 prefix: str = "paywarden:discovery:") -> None:
        self._redis, self._ttl, self._prefix = client, ttl, prefix

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            raw = self._redis.get(self._prefix + key)
        except redis.RedisError as down:
            cache_log.warning("discovery cache unavailable: %s", down)
            return None
        return json.loads(raw) if raw is not None else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self._redis.set(self._prefix + key, json.dumps(value, separators=(",", ":")), ex=self._ttl)
        except redis.RedisError as down:
            cache_log.warning("discovery cache unavailable: %s", down)


class _Pending:
    """What a `RedisResultCacheView` batch (or one event) writes: the payments' facts and results by key, last
    write winning, and the first and last positions recorded."""

    def __init__(self) -> None:
        self.first: Tracking | None = None
        self.last: Tracking | None = None
        self.payments: dict[str, dict[str, Any]] = {}
        self.results: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, tracking: Tracking, payment_id: str | None, payment: dict[str, Any] | None,
            results: Mapping[tuple[str, str], dict[str, Any]] | None) -> None:
        if self.first is None:
            self.first = tracking
        self.last = tracking
        if payment_id is not None and payment is not None:
            self.payments[payment_id] = payment
        self.results.update(results or {})

    def stop_after(self, tracking: Tracking) -> None:
        """The runner ends the batch early: the events after `tracking` were never recorded here."""
