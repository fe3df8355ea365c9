"""`paywarden serve --workers 2` observed from outside: /metrics sums both gunicorn workers (Prometheus
multiprocess mode under the data directory), /readyz checks the real PostgreSQL, Redis and RPC, and everything the
processes write to stderr is JSON lines without an API key."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.production import ProductionStack, Server, production_stack
from tests.logcapture import API_KEY

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]
REQUESTS = 24


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    yield from production_stack(tmp_path_factory)


@pytest.fixture(scope="module")
def server(production: ProductionStack) -> Server:
    return production.serve("--workers", "2", PAYWARDEN_LOG_LEVEL="info", PAYWARDEN_RATE_LIMIT_PER_KEY="1000/minute")


def supported_count(server: Server) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text  # a new connection: any worker may answer
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "paywarden_http_requests_total" and sample.labels == {
                    "method": "GET", "route": "/supported", "status": "200"}:
                return sample.value
    return 0.0


def test_metrics_sum_the_requests_of_every_worker(production, server):
    headers = {"Authorization": f"Bearer {production.api_key}"}
    before = supported_count(server)
    for _ in range(REQUESTS):  # each on its own connection, so both workers serve some
        assert httpx.get(f"{server.url}/supported", headers=headers, timeout=10).status_code == 200
    # Whichever worker answers the scrape, it reports the sum over both.
    assert [supported_count(server) - before for _ in range(6)] == [REQUESTS] * 6
    metrics_dir = production.tmp / "var" / "metrics" / f"127.0.0.1_{server.port}"
    assert list(metrics_dir.glob("counter_*.db"))


def test_readyz_checks_postgres_redis_the_rpc_and_the_fee_payer(server):
    answer = httpx.get(f"{server.url}/readyz", timeout=10)
    assert answer.status_code == 200 and set(answer.json()["checks"]) >= {"event_store", "redis", "rpc:devnet"}
    assert any(name.startswith("fee_payer:devnet:") for name in answer.json()["checks"])


def test_every_line_on_stderr_is_json_with_request_ids_and_no_api_key(production, server):
    headers = {"Authorization": f"Bearer {production.api_key}", "X-Request-Id": "e2e-trace-7"}
    answer = httpx.post(f"{server.url}/verify", json={"x402Version": 2}, headers=headers, timeout=10)
    assert answer.status_code == 400 and answer.headers["X-Request-Id"] == "e2e-trace-7"
    httpx.get(f"{server.url}/healthz", timeout=10)  # the access line above is written by now
    text = server.log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # raises on any other line
    assert any(line["logger"] == "gunicorn.error" and "Booting worker" in line["message"] for line in lines)
    mine = [line for line in lines if line.get("request_id") == "e2e-trace-7"]
    assert len(mine) == 1 and mine[0]["reason"] == "invalid_payload" and mine[0]["route"] == "/verify"
    assert production.api_key not in text and not re.search(API_KEY, text)
