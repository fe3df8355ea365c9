"""The fault injectors the outage tests rely on do what they say."""

from __future__ import annotations

import threading

import psycopg
import pytest

from tests.faults import TcpProxy


@pytest.mark.postgres
def test_a_cut_ends_a_query_waiting_for_its_answer(postgres_url):
    """A query in flight when the database is cut fails at once, as against a dead server; it does not wait forever
    for an answer on a connection the proxy only appeared to close (an outage test's worker hung so, 60 s)."""
    host_port, dbname = postgres_url.split("@", 1)[1].split("/", 1)
    host, port = host_port.split(":")
    with TcpProxy(host, int(port)) as proxy:
        conn = psycopg.connect(f"postgresql://postgres@127.0.0.1:{proxy.port}/{dbname}", autocommit=True)
        outcome: list[BaseException | None] = []

        def query() -> None:
            try:
                conn.execute("SELECT pg_sleep(1)")
                outcome.append(None)
            except psycopg.OperationalError as failed:
                outcome.append(failed)

        waiting = threading.Thread(target=query, daemon=True)
        waiting.start()
        waiting.join(0.3)  # the query is in PostgreSQL, its client waiting
        proxy.cut()
        waiting.join(10)
        assert not waiting.is_alive(), "the query was still waiting 10 s after the cut"
        assert isinstance(outcome[0], psycopg.OperationalError)
        conn.close()
