"""The OpenAPI document against the real API: schemathesis generates requests from GET /openapi.json (valid and
invalid ones) for verify, settle, supported, discovery and a payment's history, runs them in-process over a real
LiteSVM chain, and asserts no 5xx and no status, header, content type or body the document does not allow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from application.ports import ChainUnavailableError, Confirmation, SignatureStatus
from domain.networks import DEVNET, KeyEnv
from interfaces.runtime.workers import catch_up_all
from projections.payment_list import list_payments
from tests.conftest import USDC, Gateway, make_gateway

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection]
CONFORMANCE = [status_code_conformance, content_type_conformance, response_headers_conformance,
               response_schema_conformance]
LISTED = "https://api.weather.example.com/forecast"


class PublicDns:
    def resolve(self, hostname: str) -> list[str]:
        return ["93.184.216.34"] if hostname == "api.weather.example.com" else []


@pytest.fixture
def contract_gateway(tmp_path: Path, sandbox: Any) -> Iterator[Gateway]:
    """A gateway whose limits the fuzzer never reaches, with one listing in its catalog."""
    from tests.integration.test_discovery import owning_example_com

    gateway = owning_example_com(tmp_path, sandbox, resolver=PublicDns(), rate_limit_per_key="100000/minute",
                                 rate_limit_per_ip="100000/minute")  # its listing's URL is on example.com
    body = gateway.body()
    body["paymentPayload"]["resource"] = {"url": LISTED, "description": "Forecast", "mimeType": "application/json"}
    body["paymentPayload"]["extensions"] = {"bazaar": {"info": {
        "title": "Weather", "description": "Seven-day forecast.", "method": "GET", "tags": ["weather"],
        "provider": {"name": "Acme", "url": "https://acme.example.com"},
        "output": {"type": "application/json", "schema": {"type": "object"}}}}}
    assert gateway.post("/verify", body).status_code == 200
    catch_up_all(gateway.container)
    assert gateway.client.simulate_get("/discovery/resources").json["pagination"]["total"] == 1
    yield gateway
    gateway.container.close()


OPERATIONS = [("POST", "/verify"), ("POST", "/v1/verify"), ("POST", "/settle"), ("POST", "/v1/settle"),
              ("GET", "/supported"), ("GET", "/v1/supported"), ("GET", "/discovery/resources"),
              ("GET", "/discovery/search"), ("GET", "/v1/payments/{payment_id}")]
# Valid and invalid inputs for each; /healthz and /readyz take no input to make invalid.
RUNS = [pytest.param(method, path, mode, id=f"{method} {path} {mode.value}")
        for method, path in [*OPERATIONS, ("GET", "/healthz"), ("GET", "/readyz")]
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        if mode is GenerationMode.POSITIVE or path not in ("/healthz", "/readyz")]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method, path, mode", RUNS)
def test_the_api_answers_what_its_openapi_document_says(contract_gateway, method, path, mode):
    schema = schemathesis.openapi.from_wsgi("/openapi.json", contract_gateway.client.app)
    statuses: dict[int, int] = {}

    # Bounded: 30 examples per operation and mode, no deadline per example, no example database, no shrinking.
    @given(case=schema[path][method].as_strategy(mode))
    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def call(case: Any) -> None:
        response = case.call_and_validate(headers=contract_gateway.headers, checks=CHECKS)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    call()
    assert sum(statuses.values()) > 0 and all(status < 500 for status in statuses), statuses


def test_the_document_is_openapi_3_1_and_documents_every_status_of_the_payment_endpoints(contract_gateway):
    document = contract_gateway.client.simulate_get("/openapi.json").json
    assert document["openapi"] == "3.1.0"
    assert document["components"]["securitySchemes"]["bearerAuth"].items() >= {"type": "http",
                                                                                "scheme": "bearer"}.items()
    for path in ("/verify", "/v1/verify", "/settle", "/v1/settle"):
        responses = document["paths"][path]["post"]["responses"]
        assert set(responses) == {"200", "400", "401", "413", "415", "429", "500"}, path
        assert responses["429"]["headers"]["Retry-After"]["required"] is True
        assert {"bearerAuth": []} in document["paths"][path]["post"]["security"]
    assert set(document["paths"]) >= {"/supported", "/v1/supported", "/discovery/resources", "/discovery/search",
                                      "/healthz", "/readyz"}
    assert document["paths"]["/discovery/resources"]["get"]["security"] == []
    assert document["paths"]["/discovery/search"]["get"]["security"] == []
    parameters = {p["name"] for p in document["paths"]["/discovery/search"]["get"]["parameters"]}
    assert parameters >= {"query", "type", "tags", "network", "payTo", "scheme", "extensions", "limit", "cursor"}
    assert {p["name"] for p in document["paths"]["/discovery/resources"]["get"]["parameters"]} >= {
        "network", "payTo", "scheme", "extensions"}
    payment = document["paths"]["/v1/payments/{payment_id}"]["get"]
    assert set(payment["responses"]) == {"200", "401", "404", "429", "500"}
    assert {"bearerAuth": []} in payment["security"]
    assert "events" in document["components"]["schemas"]["Payment"]["required"]


def test_a_payments_documented_answers_conform_to_the_document(tmp_path, sandbox):
    gateway = make_gateway(tmp_path, sandbox)
    operation = schemathesis.openapi.from_wsgi("/openapi.json", gateway.client.app)["/v1/payments/{payment_id}"]["GET"]

    def answer(payment_id: str, headers: dict[str, str] | None = None) -> Any:
        case = operation.Case(path_parameters={"payment_id": payment_id})
        response = case.call(headers=gateway.headers if headers is None else headers)
        case.validate_response(response, checks=CONFORMANCE)
        return response

    settled = gateway.post("/settle", gateway.body()).json
    assert gateway.post("/verify", gateway.body(payTo=str(gateway.payer.pubkey()))).status_code == 400
    catch_up_all(gateway.container, ["payment_list"])
    rows = list_payments(gateway.container.payment_list).items
    confirmed, rejected = (next(r for r in rows if r.state == state) for state in ("CONFIRMED", "REJECTED"))
    found = answer(confirmed.payment_id)
    assert found.status_code == 200 and found.json()["transaction"] == settled["transaction"]
    assert [e["type"] for e in found.json()["events"]][-1] == "Payment.Confirmed"
    refused = answer(rejected.payment_id)
    assert refused.status_code == 200 and refused.json()["transaction"] is None and refused.json()["reason"]
    # another merchant's payment is unknown to this one; a bad key is 401
    gateway.container.merchants.register("beta")
    other, _ = gateway.container.merchants.create_key("beta", KeyEnv.TEST)
    assert answer(confirmed.payment_id, headers={"Authorization": f"Bearer {other}"}).status_code == 404
    assert answer("00000000-0000-0000-0000-000000000000").status_code == 404
    assert answer(confirmed.payment_id, headers={"Authorization": "Bearer pw_test_" + "0" * 40}).status_code == 401
    gateway.container.close()


@pytest.mark.parametrize("path", ["/verify", "/v1/settle"])
def test_every_documented_answer_of_a_payment_endpoint_conforms_to_the_document(tmp_path, sandbox, path):
    # Answers the fuzzer cannot reach with random bodies, each made for real and validated against the document.
    gateway = make_gateway(tmp_path, sandbox, confirmation_budget_seconds=0.2)
    operation = schemathesis.openapi.from_wsgi("/openapi.json", gateway.client.app)[path]["POST"]
    chain = gateway.container.chains.by_network[DEVNET.caip2].inner

    def answer(body: Any, headers: dict[str, str] | None = None, media_type: str = "application/json") -> int:
        case = operation.Case(body=body, media_type=media_type)
        response = case.call(headers=gateway.headers if headers is None else headers)
        case.validate_response(response, checks=CONFORMANCE)  # a 500 is what the outage step asks for
        return response.status_code

    paid = gateway.body()
    assert answer(paid) == 200
    # verify: the stored approval, replayed; settle: a settled payment answers duplicate_settlement
    assert answer(paid) == (200 if "verify" in path else 400)
    assert answer(gateway.body(gateway.transaction(amount=USDC // 100 - 1))) == 400
    assert answer(paid, headers={"Authorization": "Bearer pw_test_" + "0" * 40}) == 401
    assert answer({"padding": "x" * 70_000}) == 413
    assert answer("x402", media_type="text/plain") == 415
    simulate, chain.simulate = chain.simulate, lambda tx: (_ for _ in ()).throw(ChainUnavailableError("down"))
    assert answer(gateway.body()) == 500
    chain.simulate = simulate
    if "settle" in path:
        chain.signature_status = lambda signature: SignatureStatus(Confirmation.PENDING)
        assert answer(gateway.body()) == 200  # settlement_pending
    gateway.container.merchants.set_rate_limit("acme", 1)  # a new limit, counted afresh: one more, then 429
    assert [answer(gateway.body()) for _ in range(2)][-1] == 429
    gateway.container.close()
