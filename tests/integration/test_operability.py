"""Operability on a real LiteSVM chain: /readyz through real outages of Redis, PostgreSQL and the RPC node (a TCP
forwarder cut and restored in front of each), /metrics after a known sequence of requests, and JSON request logs."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from application.ports import ChainUnavailableError
from domain.merchant import key_hash
from domain.networks import DEVNET
from interfaces.runtime.observability import JsonFormatter
from interfaces.runtime.workers import catch_up_all
from tests.conftest import USDC, Gateway, make_gateway
from tests.faults import TcpProxy, wait_until
from tests.logcapture import DETECTOR

SOL = 10**9


@pytest.fixture
def opened(tmp_path: Path, sandbox: Any) -> Iterator[Callable[..., Gateway]]:
    """make_gateway(**config), closed at the end."""
    made: list[Gateway] = []

    def make(**config: Any) -> Gateway:
        made.append(make_gateway(tmp_path / str(len(made)), sandbox, **config))
        return made[-1]

    yield make
    for gateway in made:
        gateway.container.close()


def readyz(gateway: Gateway) -> tuple[int, dict[str, Any]]:
    result = gateway.client.simulate_get("/readyz")
    return result.status_code, result.json


def ready_again(gateway: Gateway) -> None:
    """A recovered dependency is reconnected to on its next use: poll /readyz until it answers 200."""
    wait_until(lambda: readyz(gateway)[0] == 200, timeout=10, interval=0.1, what="/readyz 200")
    assert readyz(gateway)[1]["status"] == "ok"


def failing(body: dict[str, Any]) -> dict[str, str]:
    return {name: answer for name, answer in body["checks"].items() if answer != "ok"}


def test_healthz_answers_and_readyz_names_every_check(opened):
    gateway = opened()
    assert gateway.client.simulate_get("/healthz").json == {"status": "ok"}
    status, body = readyz(gateway)
    assert (status, body["status"]) == (200, "ok")
    assert set(body["checks"]) == {"event_store", "rpc:devnet", f"fee_payer:devnet:{gateway.fee_payer}"}


def test_readyz_is_503_naming_redis_while_it_is_down_and_200_when_it_is_back(opened, redis_url):
    host_port, _, db = redis_url.removeprefix("redis://").partition("/")
    host, _, port = host_port.partition(":")
    with TcpProxy(host, int(port or 6379)) as proxy:
        gateway = opened(redis_url=f"redis://127.0.0.1:{proxy.port}/{db or 0}")
        assert readyz(gateway)[1]["checks"]["redis"] == "ok"
        proxy.cut()  # Redis goes away
        status, body = readyz(gateway)
        assert (status, body["status"]) == (503, "unavailable")
        assert list(failing(body)) == ["redis"] and body["checks"]["redis"].startswith("down: ")
        proxy.restore()  # and comes back
        ready_again(gateway)


def test_readyz_is_503_naming_the_event_store_while_postgres_is_down_and_200_when_it_is_back(opened, postgres_url):
    scheme_user, _, rest = postgres_url.partition("@")
    host_port, _, dbname = rest.partition("/")
    host, _, port = host_port.partition(":")
    with TcpProxy(host, int(port or 5432)) as proxy:
        gateway = opened(database_url=f"{scheme_user}@127.0.0.1:{proxy.port}/{dbname}")
        ready_again(gateway)
        proxy.cut()  # the database goes away, live connections reset
        status, body = readyz(gateway)
        assert status == 503 and list(failing(body)) == ["event_store"], body
        assert body["checks"]["event_store"].startswith("down: ")
        proxy.restore()
        ready_again(gateway)


def test_readyz_is_503_naming_the_rpc_and_the_fee_payer_while_the_node_is_down(opened, sandbox):
    from interfaces.sandbox.localnet import LocalnetThread

    with LocalnetThread(sandbox, slot_ms=None) as localnet:
        with TcpProxy("127.0.0.1", int(localnet.url.rsplit(":", 1)[1])) as proxy:
            gateway = opened(devnet_rpc_url=f"http://127.0.0.1:{proxy.port}")
            ready_again(gateway)
            proxy.cut()  # the RPC node is unreachable
            status, body = readyz(gateway)
            assert status == 503 and set(failing(body)) == {"rpc:devnet", f"fee_payer:devnet:{gateway.fee_payer}"}
            assert "ChainUnavailableError" in body["checks"]["rpc:devnet"]
            proxy.restore()
            ready_again(gateway)


def test_readyz_is_503_naming_a_fee_payer_under_its_floor_until_it_is_funded(opened, sandbox):
    gateway = opened(fee_payer_min_lamports=20 * SOL)  # the sandbox funds its fee payer with 10 SOL
    status, body = readyz(gateway)
    name = f"fee_payer:devnet:{gateway.fee_payer}"
    assert status == 503 and list(failing(body)) == [name]
    assert body["checks"][name].startswith("low: ") and str(20 * SOL) in body["checks"][name]
    sandbox.airdrop(gateway.fee_payer, 15 * SOL)
    assert readyz(gateway)[0] == 200


def test_a_hanging_dependency_costs_readyz_its_deadline_not_more(opened):
    gateway = opened()
    chain = gateway.container.chains.by_network[DEVNET.caip2]
    chain.inner.health = lambda: time.sleep(5)
    started = time.monotonic()
    status, body = readyz(gateway)
    assert status == 503 and body["checks"]["rpc:devnet"].startswith("down: no answer within")
    assert time.monotonic() - started < 4


# -- metrics ----------------------------------------------------------------------------------------------------


def scrape(gateway: Gateway) -> dict[tuple[str, frozenset], float]:
    result = gateway.client.simulate_get("/metrics")
    assert result.status_code == 200 and result.headers["content-type"].startswith("text/plain")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(result.text) for s in family.samples}


def delta(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_metrics_count_a_known_sequence_of_requests(opened, sandbox):
    gateway = opened(rate_limit_per_key="5/minute")
    chain = gateway.container.chains.by_network[DEVNET.caip2]
    before = scrape(gateway)
    # Five requests the key's limit allows: a valid verify, a verify for the wrong amount, a settle, supported,
    # and a verify while the chain is down; then a sixth, refused; and one with an unknown key.
    assert gateway.post("/verify", gateway.body()).status_code == 200
    assert gateway.post("/verify", gateway.body(gateway.transaction(amount=USDC // 100 - 1))).status_code == 400
    assert gateway.post("/settle", gateway.body()).status_code == 200
    assert gateway.client.simulate_get("/supported", headers=gateway.headers).status_code == 200
    simulate = chain.inner.simulate
    chain.inner.simulate = lambda tx, **flags: (_ for _ in ()).throw(ChainUnavailableError("connection refused"))
    assert gateway.post("/verify", gateway.body()).status_code == 500
    chain.inner.simulate = simulate
    assert gateway.post("/verify", gateway.body()).status_code == 429
    unknown = {"Authorization": "Bearer pw_test_" + "0" * 40}
    assert gateway.post("/verify", gateway.body(), headers=unknown).status_code == 401
    assert gateway.client.simulate_get("/discovery/resources").status_code == 200
    after = scrape(gateway)

    requests = "paywarden_http_requests_total"
    for method, route, status, count in [("POST", "/verify", "200", 1), ("POST", "/verify", "400", 1),
                                         ("POST", "/settle", "200", 1), ("GET", "/supported", "200", 1),
                                         ("POST", "/verify", "500", 1), ("POST", "/verify", "429", 1),
                                         ("POST", "/verify", "401", 1), ("GET", "/discovery/resources", "200", 1),
                                         ("GET", "/metrics", "200", 1)]:
        assert delta(before, after, requests, method=method, route=route, status=status) == count, (route, status)
    outcomes = "paywarden_payment_outcomes_total"
    assert delta(before, after, outcomes, operation="verify", outcome="valid", reason="none", replayed="false") == 1
    assert delta(before, after, outcomes, operation="verify", outcome="invalid", replayed="false",
                 reason="invalid_exact_svm_payload_authorization_value") == 1
    assert delta(before, after, outcomes, operation="verify", outcome="invalid", replayed="false",
                 reason="unexpected_verify_error") == 1
    assert delta(before, after, outcomes, operation="settle", outcome="success", reason="none", replayed="false") == 1
    latency = "paywarden_payment_duration_seconds_count"
    assert delta(before, after, latency, operation="verify") == 5
    assert delta(before, after, latency, operation="settle") == 1
    assert delta(before, after, "paywarden_rate_limit_rejections_total", scope="key", route="/verify") == 1
    rpc = "paywarden_chain_rpc_duration_seconds_count"
    assert delta(before, after, rpc, network="devnet", method="simulate") == 3  # verify, settle, the outage
    assert delta(before, after, rpc, network="devnet", method="send") == 1
    assert delta(before, after, "paywarden_chain_rpc_errors_total", network="devnet", method="simulate",
                 error="unavailable") == 1
    # Gauges read at scrape time: the fee payer's balance as the chain has it, and the projections' lag.
    balance = ("paywarden_fee_payer_balance_lamports", frozenset({"network": "devnet",
                                                                  "address": gateway.fee_payer}.items()))
    assert after[balance] == sandbox.sol_balance(gateway.fee_payer) < 10 * SOL  # the settle paid a fee
    lag = "paywarden_projection_lag_events"
    assert after[(lag, frozenset({"projection": "listings"}.items()))] > 0  # two approved payments to follow
    assert after[(lag, frozenset({"projection": "accounts"}.items()))] == 0
    catch_up_all(gateway.container)
    assert scrape(gateway)[(lag, frozenset({"projection": "listings"}.items()))] == 0


# -- logs -------------------------------------------------------------------------------------------------------


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """What the service writes to stderr, JSON lines, from the paywarden loggers."""
    stream, handler = io.StringIO(), logging.StreamHandler()
    handler.setStream(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("paywarden")
    logger.addHandler(handler)
    yield stream
    logger.removeHandler(handler)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_each_request_is_one_json_line_with_its_request_id_echoed(opened, json_log):
    gateway = opened()
    paid = gateway.post("/verify", gateway.body(), headers={**gateway.headers, "X-Request-Id": "trace-42.a_b"})
    wrong = gateway.post("/verify", gateway.body(gateway.transaction(amount=1)), headers={
        **gateway.headers, "X-Request-Id": "x" * 65})
    anonymous = gateway.client.simulate_get("/healthz", headers={"X-Request-Id": "spaces are not sane"})
    assert paid.headers["X-Request-Id"] == "trace-42.a_b"
    generated = wrong.headers["X-Request-Id"]
    assert len(generated) == 32 and generated != "x" * 65 and anonymous.headers["X-Request-Id"] != "spaces are not sane"
    access = [line for line in lines(json_log) if line["logger"] == "paywarden.access"]
    assert [line["request_id"] for line in access] == ["trace-42.a_b", generated, anonymous.headers["X-Request-Id"]]
    merchant_id = gateway.container.accounts.get_key(key_hash(gateway.api_key)).merchant_id
    first, second, third = access
    assert first.items() >= {"method": "POST", "route": "/verify", "status": 200, "level": "info",
                             "client": merchant_id}.items()
    assert isinstance(first["duration_ms"], float) and "reason" not in first
    assert second["reason"] == "invalid_exact_svm_payload_authorization_value" and second["status"] == 400
    assert third["client"] == "anonymous" and third["route"] == "/healthz"


def test_an_unexpected_error_is_logged_with_the_request_id_and_its_traceback(opened, json_log):
    gateway = opened()
    chain = gateway.container.chains.by_network[DEVNET.caip2]
    chain.inner.simulate = lambda tx, **flags: 1 / 0
    result = gateway.post("/settle", gateway.body(), headers={**gateway.headers, "X-Request-Id": "boom-1"})
    assert result.status_code == 500 and result.json == {
        "success": False, "errorReason": "unexpected_settle_error",
        "errorMessage": "unexpected server error (request boom-1); retry"}
    errors = [line for line in lines(json_log) if line["logger"] == "paywarden.http"]
    assert len(errors) == 1 and errors[0]["request_id"] == "boom-1" and "ZeroDivisionError" in errors[0]["exc"]


def test_no_api_key_and_no_transaction_reaches_a_log_line(opened, json_log):
    gateway = opened()
    body = gateway.body()
    gateway.post("/settle", body)
    gateway.post("/verify", body, headers={"Authorization": f"Bearer {gateway.api_key[:-1]}Z"})  # unknown key
    output = json_log.getvalue()
    assert output and gateway.api_key not in output and gateway.api_key[:-1] not in output
    assert body["paymentPayload"]["payload"]["transaction"] not in output


def test_the_formatter_masks_secrets_a_careless_line_would_carry():
    record = logging.LogRecord("paywarden.x", logging.ERROR, __file__, 1, "key %s tx %s", (
        "pw_live_" + "A" * 40, "Q" * 300), None)
    record.authorization = "Bearer pw_test_" + "b" * 40
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "key pw_live_<redacted> tx <redacted base64>"
    assert line["authorization"] == "Bearer <redacted>"


def test_the_run_wide_leak_detector_sees_a_key_in_any_record_field():
    # The check every test gets (tests/logcapture.py): shown here to catch what it must, in message and extras.
    key = "pw_test_" + "k" * 40
    with DETECTOR.expecting_leaks() as caught:
        logging.getLogger("paywarden.test").info("leaked %s", key)
        logging.getLogger("somelib").warning("headers", extra={"headers": {"Authorization": f"Bearer {key}"}})
    assert len(caught) == 2
