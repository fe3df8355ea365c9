"""Redis or PostgreSQL unreachable in the middle of a run: verify gives the right verdict or a 5xx, never approves
an invalid payment, loses no event, and the same process serves again once the store is back."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from solders.keypair import Keypair

from domain.codes import Code
from domain.networks import DEVNET
from tests.conftest import Gateway, make_gateway
from tests.faults import PrivateRedis, TcpProxy, wait_until
from tests.integration.test_facilitator_http import key_of

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def answers(g: Gateway, valid: dict, invalid: dict, approved: dict) -> dict[str, tuple[int, dict]]:
    return {name: (r.status_code, r.json) for name, r in (
        ("valid", g.post("/verify", valid)), ("invalid", g.post("/verify", invalid)),
        ("replay", g.post("/verify", approved)))}


def assert_never_wrong(seen: dict[str, tuple[int, dict]]) -> None:
    """Each answer is its right verdict or a 500 with `unexpected_verify_error`."""
    for name, (status, body) in seen.items():
        if status == 500:
            assert body.keys() == {"isValid", "invalidReason", "invalidMessage"}, name
            assert (body["isValid"], body["invalidReason"]) == (False, Code.UNEXPECTED_VERIFY_ERROR), name
        elif name == "invalid":
            assert (status, body["isValid"], body["invalidReason"]) == (400, False, Code.RECIPIENT_MISMATCH)
        else:
            assert (status, body["isValid"]) == (200, True), name


def test_redis_stopped_mid_run_gives_right_verdicts_or_500_and_service_resumes(tmp_path: Path, sandbox,
                                                                                postgres_url):
    with PrivateRedis(tmp_path) as redis_server:
        g = make_gateway(tmp_path, sandbox, database_url=postgres_url, redis_url=redis_server.url)
        try:
            approved = g.body()
            assert g.post("/verify", approved).status_code == 200
            invalid = lambda: g.body(g.transaction(pay_to=Keypair().pubkey()))  # noqa: E731

            redis_server.stop()
            down = answers(g, g.body(), invalid(), approved)
            assert_never_wrong(down)
            # Without Redis there is no lock and no rate limit: nothing runs unguarded.
            assert {status for status, _ in down.values()} == {500}

            redis_server.start()  # same port, empty: the client reconnects by itself
            back = answers(g, g.body(), invalid(), approved)
            assert_never_wrong(back)
            assert {status for status, _ in back.values()} == {200, 400}
            assert g.post("/verify", approved).headers.get("Idempotent-Replayed") == "true"
        finally:
            g.container.close()


def test_postgres_cut_mid_run_gives_right_verdicts_or_500_loses_nothing_and_service_resumes(
        tmp_path: Path, sandbox, postgres_url, redis_url):
    host_port, dbname = postgres_url.split("@", 1)[1].split("/", 1)
    host, port = host_port.split(":")
    with TcpProxy(host, int(port)) as proxy:
        g = make_gateway(tmp_path, sandbox, database_url=f"postgresql://postgres@127.0.0.1:{proxy.port}/{dbname}",
                         redis_url=redis_url, database_timeout_seconds=1)
        try:
            approved = g.body()
            assert g.post("/verify", approved).status_code == 200
            invalid = lambda: g.body(g.transaction(pay_to=Keypair().pubkey()))  # noqa: E731

            proxy.cut()
            down = answers(g, g.body(), invalid(), approved)
            assert_never_wrong(down)
            assert down["valid"][0] == 500 and down["invalid"][0] == 500  # no key lookup, no verdict
            assert down["replay"] == (200, {"isValid": True, "payer": str(g.payer.pubkey())}) or \
                down["replay"][0] == 500  # a cached terminal result may still be served

            proxy.restore()
            back = answers(g, g.body(), invalid(), approved)
            assert_never_wrong(back)
            assert back["valid"][0] == 200 and back["invalid"][0] == 400 and back["replay"][0] == 200

            # The database drops while a verify is between its simulation and its save: the store's retries ride
            # out a short outage, and the verdict is recorded once.
            chain = g.container.chains.by_network[DEVNET.caip2]
            simulate, body = chain.simulate, g.body()

            def cut_during(transaction: bytes, **flags: bool):
                proxy.cut()
                threading.Timer(0.5, proxy.restore).start()
                return simulate(transaction, **flags)

            chain.simulate = cut_during
            assert g.post("/verify", body).status_code == 200
            chain.simulate = simulate
            events = list(g.container.payments.repository.event_store.get(
                g.container.payments.get_payment(key_of(g, body)).id))
            assert [type(e).__name__ for e in events] == ["Received", "Approved"]
        finally:
            g.container.close()


def test_the_pool_reconnects_within_seconds_after_a_long_outage(tmp_path: Path, sandbox, postgres_url, redis_url):
    """A request waits for the database about PAYWARDEN_DATABASE_TIMEOUT_SECONDS (1 here): the retries ride out an
    outage of two timeouts (one that short is survived, as the test above shows) and then stop: the first request
    fails after about three timeouts, each later one after one. The store's retries used to wait the timeout ten
    times: 11 s per request."""
    host_port, dbname = postgres_url.split("@", 1)[1].split("/", 1)
    host, port = host_port.split(":")
    with TcpProxy(host, int(port)) as proxy:
        g = make_gateway(tmp_path, sandbox, database_url=f"postgresql://postgres@127.0.0.1:{proxy.port}/{dbname}",
                         redis_url=redis_url, database_timeout_seconds=1)
        try:
            assert g.post("/verify", g.body()).status_code == 200  # the key is known: requests reach the store's write
            proxy.cut()
            waited = []
            for _ in range(3):  # requests during the outage push the pool's reconnection back-off up
                started = time.monotonic()
                assert g.post("/verify", g.body()).status_code == 500
                waited.append(time.monotonic() - started)
            assert waited[0] < 5 and all(w < 3 for w in waited[1:]), waited
            proxy.restore()
            statuses: list[int] = []
            wait_until(lambda: statuses.append(g.post("/verify", g.body()).status_code) or statuses[-1] == 200,
                       timeout=8, interval=0, what="service after the database's return")
        finally:
            g.container.close()
