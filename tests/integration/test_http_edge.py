"""Hostile input at the HTTP edge never reaches a 500 or the catalog: numbers JSON does not have, absurd nesting,
chunked bodies (over a real socket to `paywarden serve`, gunicorn with gevent workers), unknown HTTP methods."""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import string
import subprocess
import sys
import warnings
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4
from wsgiref.validate import WSGIWarning

import httpx
import pytest
from prometheus_client import REGISTRY

from domain.discovery import ListingDetails
from domain.listing import DiscoveryListing
from domain.networks import DEVNET
from interfaces.http.common.body import MAX_BODY_BYTES, MAX_JSON_DEPTH
from interfaces.runtime.metrics_registry import METHODS
from tests.conftest import Gateway
from tests.faults import free_port, wait_until
from tests.integration.test_discovery import INFO, Discovery, with_clock

ROOT = Path(__file__).resolve().parents[2]
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def edge(tmp_path, sandbox) -> Gateway:
    from tests.integration.test_discovery import owning_example_com

    gateway = owning_example_com(tmp_path, sandbox)  # its listings' URLs are on example.com
    yield gateway
    gateway.container.close()


def strict_loads(text: str) -> object:
    """A JSON parser as strict as JavaScript's JSON.parse: NaN and Infinity are errors."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def catalog_text(discovery: Discovery) -> str:
    """A fresh answer of GET /discovery/resources, as the bytes a client receives."""
    discovery.clock.now += 60
    result = discovery.get()
    assert result.status_code == 200, result.text
    return result.text


def raw_post(gateway: Gateway, path: str, raw: bytes, headers: dict | None = None):
    return gateway.client.simulate_post(path, body=raw, headers={**gateway.headers, **JSON, **(headers or {})})


def refused(result, path: str, status: int = 400) -> None:
    assert result.status_code == status, result.text
    if "verify" in path:
        assert result.json["isValid"] is False and result.json["invalidReason"] == "invalid_payload"
    else:
        assert result.json["success"] is False and result.json["errorReason"] == "invalid_payload"


# -- numbers JSON does not have -----------------------------------------------------------------------------------


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
@pytest.mark.parametrize("path", ["/verify", "/v1/settle"])
def test_nan_and_infinity_are_invalid_payload_in_the_endpoint_shape_and_record_nothing(edge, number, path):
    text = json.dumps(edge.body()).replace('"maxTimeoutSeconds": 60', f'"maxTimeoutSeconds": {number}')
    assert number in text
    refused(raw_post(edge, path, text.encode()), path)
    assert edge.container.payments.recorder.max_notification_id() in (None, 0)


def test_nan_bearing_bazaar_metadata_never_reaches_the_catalog_which_parses_strictly(edge):
    discovery = with_clock(edge)
    for bad in ('{"maximum": NaN}', '{"maximum": Infinity}', '{"minimum": -Infinity}', '{"maximum": 1e999}'):
        body = json.dumps(discovery.body("https://api.weather.example.com/nan", INFO))
        body = body.replace('{"type": "object", "properties": {"city"', f'{{"x": {bad}, "properties": {{"city"', 1)
        assert bad in body
        refused(raw_post(edge, "/verify", body.encode()), "/verify")
    assert discovery.pay("https://api.weather.example.com/fine").status_code == 200
    discovery.project()
    text = catalog_text(discovery)
    assert [item["resource"] for item in strict_loads(text)["items"]] == ["https://api.weather.example.com/fine"]


def test_a_listing_stored_with_nan_before_the_rules_refused_it_is_served_as_strict_json(edge):
    discovery = with_clock(edge)
    details = ListingDetails(title="Legacy", output={"type": "application/json",
                                                      "schema": {"maximum": float("nan"), "minimum": float("-inf")}},
                             pricing={"model": "per_request", "amount": "0.01", "asset": "USDC"})
    offer = {"scheme": "exact", "network": DEVNET.caip2, "asset": DEVNET.usdc_mint,
             "amount": 10000, "pay_to": "WALLET", "max_timeout_seconds": 60, "description": "", "mime_type": ""}
    edge.container.listings.save(DiscoveryListing.register(
        "https://legacy.example.com/x", "GET", "anonymous", details.as_dict(), offer, uuid4(), datetime.now(UTC)))
    discovery.project()
    page = strict_loads(catalog_text(discovery))
    assert [item["resource"] for item in page["items"]] == ["https://legacy.example.com/x"]
    assert page["items"][0]["accepts"][0]["outputSchema"]["output"]["schema"] == {"maximum": None, "minimum": None}


# -- nesting -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"[" * 100_000, b'{"a":' * 100_000, b"[" * 100_000 + b"]" * 100_000])
@pytest.mark.parametrize("path", ["/verify", "/settle"])
def test_absurdly_nested_json_is_400_invalid_payload_not_500(edge, raw, path):
    refused(raw_post(edge, path, raw[:MAX_BODY_BYTES]), path)


def test_nesting_past_the_limit_inside_a_real_payment_is_refused(edge):
    body = edge.body()
    deep: object = "bottom"
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    body["paymentPayload"]["extensions"] = {"bazaar": {"info": deep}}
    refused(edge.post("/verify", body), "/verify")
    assert edge.container.payments.recorder.max_notification_id() in (None, 0)


# -- unknown methods and the metric series ------------------------------------------------------------------------


def request_series() -> set[tuple[str, str, str]]:
    return {(s.labels["method"], s.labels["route"], s.labels["status"]) for family in REGISTRY.collect()
            if family.name == "paywarden_http_requests" for s in family.samples if s.name.endswith("_total")}


def test_unknown_http_methods_and_paths_do_not_create_metric_series(edge):
    with warnings.catch_warnings():  # the test client's WSGI validator notes each unknown method
        warnings.simplefilter("ignore", WSGIWarning)
        for target in ("/verify", "/discovery/resources", "/no/such/path"):  # the "other" series, before counting
            edge.client.simulate_request("BREW", target, headers=edge.headers)
        before = request_series()
        rng = random.Random(7)
        for _ in range(50):
            method = "".join(rng.choices(string.ascii_uppercase, k=rng.randint(3, 12)))
            path = "/" + "".join(rng.choices(string.ascii_lowercase, k=8))
            for target in ("/verify", "/discovery/resources", path):
                assert edge.client.simulate_request(method, target, headers=edge.headers).status_code < 500
    after = request_series()
    assert after == before
    assert {method for method, _, _ in after} <= METHODS | {"other"}
    assert any(method == "other" and route == "/verify" for method, route, _ in after)


# -- chunked bodies, over a real socket to gunicorn ---------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`paywarden serve --no-projections` (gunicorn, gevent worker) on the embedded default, sandbox mode."""
    data_dir = tmp_path_factory.mktemp("served")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PAYWARDEN_DATA_DIR"] = str(data_dir)
    log = (data_dir / "serve.log").open("ab")
    process = subprocess.Popen([sys.executable, "-m", "interfaces.cli.main", "serve", "--no-projections", "--bind",
                                f"127.0.0.1:{port}"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)

    def up() -> bool:
        assert process.poll() is None, (data_dir / "serve.log").read_text()[-3000:]
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout=60, interval=0.1, what="paywarden serve")
    yield port
    process.terminate()
    process.wait(timeout=30)
    log.close()


def chunked(port: int, path: str, pieces: list[bytes], *, end: bool = True) -> tuple[int, dict]:
    """POST with Transfer-Encoding: chunked and no Content-Length; without `end`, the last chunk is never sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        for piece in pieces:
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        if end:
            conn.sendall(b"0\r\n\r\n")
        answer = http.client.HTTPResponse(conn)
        answer.begin()
        return answer.status, json.loads(answer.read())


def test_a_chunked_body_is_read(served):
    body = json.dumps({"x402Version": 2, "paymentPayload": {"x402Version": 1}}).encode()
    status, answer = chunked(served, "/verify", [body[:10], body[10:25], body[25:]])
    # Read, the body's version is wrong; unread, it would have been an empty body (invalid_payload).
    assert (status, answer["isValid"], answer["invalidReason"]) == (400, False, "invalid_x402_version")


def test_a_chunked_body_over_64_kb_is_413_before_its_end_is_sent(served):
    pieces = [b"[" + b" " * 8191] + [b" " * 8192] * 8  # 72 KB, and the terminating chunk never comes
    status, answer = chunked(served, "/settle", pieces, end=False)
    assert (status, answer["success"], answer["errorReason"]) == (413, False, "invalid_payload")


def test_a_chunked_body_with_nan_or_absurd_nesting_is_400(served):
    assert chunked(served, "/verify", [b'{"x402Version": NaN}'])[0] == 400
    status, answer = chunked(served, "/verify", [b"[" * 32_000, b"[" * 32_000])
    assert (status, answer["invalidReason"]) == (400, "invalid_payload")


# -- text that is not Unicode, numbers that are not ASCII -----------------------------------------------------------


def string_paths(value: object, prefix: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [p for key, child in value.items() for p in string_paths(child, (*prefix, key))]
    return [prefix] if isinstance(value, str) else []


def with_value(body: dict, path: tuple, value: object) -> dict:
    body = json.loads(json.dumps(body))
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return body


@pytest.mark.parametrize("value", ["\ud800", "x\udfffy", "²", "٣", "１"])
def test_lone_surrogates_and_non_ascii_digits_in_any_string_are_400_never_500(edge, value):
    """JSON's "\\ud800" is a lone surrogate (no UTF-8 form: it can be neither stored nor answered), refused as
    invalid_payload before anything is recorded; "²".isdigit() is true but int("²") fails: an amount of it is
    refused as a malformed amount, and in any other string it is text like any other (a rule may refuse the payment)."""
    base = edge.body()
    base["paymentRequirements"]["extra"]["memo"] = "order-1"
    base["paymentPayload"]["resource"] = {"url": "https://api.example.com/x", "description": "d", "mimeType": "t"}
    surrogate = not value.isdigit()
    for path in string_paths(base):
        for endpoint in ("/verify", "/settle"):
            result = raw_post(edge, endpoint, json.dumps(with_value(base, path, value)).encode())
            assert result.status_code == 400, (path, endpoint, result.status_code, result.text)
            answer = result.json
            assert answer.get("isValid", answer.get("success")) is False, (path, answer)
            reason = answer.get("invalidReason", answer.get("errorReason"))
            if surrogate:
                assert reason == "invalid_payload", (path, answer)
            elif path[-1] == "amount":  # the field's own refusal, as for any other malformed amount
                message = answer.get("invalidMessage", answer.get("errorMessage"))
                assert reason in ("invalid_payload", "invalid_payment_requirements") and "amount" in message
    if surrogate:
        assert edge.container.payments.recorder.max_notification_id() in (None, 0)
