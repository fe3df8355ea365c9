"""The OpenAPI document against the real API: schemathesis generates requests from GET /openapi.json (valid and
invalid ones) for verify, settle, supported and discovery, runs them in-process over a real LiteSVM chain, and
asserts no 5xx and no status, header, content type or body the document does not allow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from interfaces.workers import catch_up_all
from tests.conftest import Gateway, make_gateway

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection]
LISTED = "https://api.weather.example.com/forecast"


class PublicDns:
    def resolve(self, hostname: str) -> list[str]:
        return ["93.184.216.34"] if hostname == "api.weather.example.com" else []


@pytest.fixture
def contract_gateway(tmp_path: Path, sandbox: Any) -> Iterator[Gateway]:
    """A gateway whose limits the fuzzer never reaches, with one listing in its catalog."""
    gateway = make_gateway(tmp_path, sandbox, resolver=PublicDns(), rate_limit_per_key="100000/minute",
                           rate_limit_per_ip="100000/minute")
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


@pytest.fixture
def api_schema(contract_gateway: Gateway) -> Any:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", contract_gateway.client.app)
    schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
    return schema


api = schemathesis.pytest.from_fixture("api_schema").include(
    path_regex=r"^/(v1/)?(verify|settle|supported)$|^/discovery/resources$|^/(healthz|readyz)$")


@pytest.mark.timeout(300)
@api.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
def test_the_api_answers_what_its_openapi_document_says(case: Any, contract_gateway: Gateway) -> None:
    case.call_and_validate(headers=contract_gateway.headers, checks=CHECKS)


def test_the_document_is_openapi_3_1_and_documents_every_status_of_the_payment_endpoints(contract_gateway):
    document = contract_gateway.client.simulate_get("/openapi.json").json
    assert document["openapi"] == "3.1.0"
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": document["components"]["securitySchemes"][
            "bearerAuth"]["description"]}
    for path in ("/verify", "/v1/verify", "/settle", "/v1/settle"):
        responses = document["paths"][path]["post"]["responses"]
        expected = {"200", "400", "401", "413", "415", "429", "500"} | ({"202"} if "settle" in path else set())
        assert set(responses) == expected, path
        assert responses["429"]["headers"]["Retry-After"]["required"] is True
        assert {"bearerAuth": []} in document["paths"][path]["post"]["security"]
    assert set(document["paths"]) >= {"/supported", "/v1/supported", "/discovery/resources", "/healthz", "/readyz"}
    assert document["paths"]["/discovery/resources"]["get"]["security"] == []
