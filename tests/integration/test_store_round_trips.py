"""What one verify and one settle ask of PostgreSQL and Redis, counted exactly: every statement the API's process
sends to PostgreSQL and every Redis round trip (a command, a script, or a pipeline of them), per request, on the
API's path (docs/performance.md, "PostgreSQL + Redis: round trips per request"). The counts do not depend on the
machine's load, so they are pinned: a change that adds a round trip to the common path shows here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
import redis
from redis.client import Pipeline

from tests.conftest import Gateway, make_gateway

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

PAYMENTS = 5


class RoundTrips:
    """Counts statements sent by psycopg cursors and Redis round trips made by redis-py clients, with the text of
    each (for the failure message)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counts: Counter[str] = Counter()
        self.seen: list[str] = []
        execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
        command, pipeline = redis.Redis.execute_command, Pipeline.execute

        def counted_execute(cursor, query, params=None, **kwargs):
            self._count("PostgreSQL", query)
            return execute(cursor, query, params, **kwargs)

        def counted_executemany(cursor, query, params_seq, **kwargs):
            self._count("PostgreSQL", query)
            return executemany(cursor, query, params_seq, **kwargs)

        def counted_command(client, *args, **kwargs):
            self._count("Redis", " ".join(map(str, args[:2])))
            return command(client, *args, **kwargs)

        def counted_pipeline(pipe, *args, **kwargs):
            self._count("Redis", f"pipeline of {len(pipe.command_stack)}")
            return pipeline(pipe, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
        monkeypatch.setattr(psycopg.Cursor, "executemany", counted_executemany)
        monkeypatch.setattr(redis.Redis, "execute_command", counted_command)
        monkeypatch.setattr(Pipeline, "execute", counted_pipeline)

    def _count(self, store: str, what: object) -> None:
        self.counts[store] += 1
        text = what.as_string(None) if hasattr(what, "as_string") else str(what)
        self.seen.append(f"{store}: {text[:120]}")

    def per_request(self, requests: int) -> dict[str, float]:
        return {store: count / requests for store, count in sorted(self.counts.items())}

    def clear(self) -> None:
        self.counts.clear()
        self.seen.clear()


@pytest.fixture
def trips(monkeypatch) -> RoundTrips:
    return RoundTrips(monkeypatch)


@pytest.fixture
def stack(tmp_path, sandbox, postgres_url, redis_url) -> Iterator[Gateway]:
    gateway = make_gateway(tmp_path, sandbox, database_url=postgres_url, redis_url=redis_url)
    for _ in range(3):  # warm: the key's first use, the pools' first connections, statements prepared
        assert gateway.post("/verify", gateway.body()).status_code == 200
    yield gateway
    gateway.container.close()


def measured(gateway: Gateway, trips: RoundTrips, op: str, verified_first: bool = False) -> dict[str, float]:
    bodies = [gateway.body() for _ in range(PAYMENTS)]
    if verified_first:
        for body in bodies:
            assert gateway.post("/verify", body).status_code == 200
    trips.clear()
    for body in bodies:
        answer = gateway.post(f"/{op}", body)
        assert answer.status_code == 200 and (answer.json.get("isValid") or answer.json.get("success")), answer.json
    return trips.per_request(PAYMENTS)


def test_a_verify_makes_one_postgresql_and_one_redis_round_trip(stack, trips):
    """The rate limit (one Redis script) and the events' insert (one statement, its own transaction): a verify
    takes no lock and reads nothing from the event store (the store's uniqueness refuses a duplicate)."""
    assert measured(stack, trips, "verify") == {"PostgreSQL": 1.0, "Redis": 1.0}, trips.seen


def test_a_settle_after_its_verify_reads_twice_writes_twice_and_holds_the_lock(stack, trips):
    """PostgreSQL: the payment and the transaction's claim read (two statements), the broadcast recorded before it
    is sent and the confirmation after (two inserts); Redis: the rate limit, the payment's lock taken and released."""
    assert measured(stack, trips, "settle", verified_first=True) == {"PostgreSQL": 4.0, "Redis": 3.0}, trips.seen


def test_a_settle_without_a_verify_costs_what_a_settle_after_one_costs(stack, trips):
    assert measured(stack, trips, "settle") == {"PostgreSQL": 4.0, "Redis": 3.0}, trips.seen
