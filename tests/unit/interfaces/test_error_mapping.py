"""Every domain and application error is mapped once (interfaces/http/common/errors.py): a refused rule is a 400 naming
its field, what is unknown a 404, a conflict a 409, never a 500; the console answers the same mapping."""

from __future__ import annotations

import falcon
import pytest
from falcon import testing

from application.merchants import DomainNotVerifiedError, MerchantNotFoundError
from application.proxy_services import ServiceNotFoundError, SlugTakenError
from application.webhooks import WebhookNotFoundError
from domain.codes import Code
from domain.errors import DomainError, PaymentRuleError, PaymentStateError
from domain.listing import ListingOwnershipError
from domain.merchant import MerchantConflictError, MerchantError, UnknownObjectError
from domain.proxy_service import ProxyServiceError
from domain.routes import RoutePatternError
from domain.slugs import SlugError
from domain.webhook import WebhookError
from interfaces.http.console import errors as console_errors
from interfaces.http.facilitator import errors

CASES = [
    (DomainError("a rule"), 400, "invalid_request", None),
    (MerchantError("bad name", field="name"), 400, "invalid_request", "name"),
    (MerchantConflictError("already revoked"), 409, "conflict", None),
    (DomainNotVerifiedError("verify it first", field="domain"), 409, "domain_not_verified", "domain"),
    (UnknownObjectError("no such key"), 404, "not_found", None),
    (MerchantNotFoundError("no merchant acme"), 404, "not_found", None),
    (ProxyServiceError("a port is a number", field="port"), 400, "invalid_request", "port"),
    (ProxyServiceError("no route r1", field="routeId"), 404, "not_found", None),
    (ServiceNotFoundError("no service"), 404, "not_found", None),
    (SlugTakenError("slug taken", field="slug"), 409, "conflict", "slug"),
    (RoutePatternError("bad pattern"), 400, "invalid_request", "path"),
    (SlugError("bad slug"), 400, "invalid_request", "slug"),
    (WebhookError("https_required", "use https"), 400, "https_required", "url"),
    (WebhookNotFoundError("no such endpoint"), 404, "webhook_not_found", None),
    (ListingOwnershipError("not yours"), 404, "not_found", "id"),
    (PaymentStateError("p1", "CONFIRMED", "fail"), 409, "conflict", None),
    (PaymentRuleError(Code.INVALID_PAYLOAD, "bad payload"), 400, "invalid_payload", None),
]


class Raise:
    def __init__(self) -> None:
        self.error: Exception = RuntimeError("unset")

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        raise self.error


def client_for(register, path: str) -> tuple[testing.TestClient, Raise]:
    app, resource = falcon.App(), Raise()
    app.add_route(path, resource)
    register(app)
    return testing.TestClient(app), resource


@pytest.mark.parametrize(("error", "status", "code", "field"), CASES, ids=lambda c: type(c).__name__)
def test_each_domain_and_application_error_has_its_status_on_the_api_and_the_console(error, status, code, field):
    for register, path in ((errors.register, "/thing"), (console_errors.register, "/api/v1/thing")):
        client, resource = client_for(register, path)
        resource.error = error
        answer = client.simulate_get(path)
        assert answer.status_code == status, (register, answer.json)
        assert answer.json["error"] == code and answer.json.get("field") == field


def test_an_unexpected_error_is_a_500_with_a_reference_on_the_api_and_the_console_page():
    client, resource = client_for(errors.register, "/thing")
    answer = client.simulate_get("/thing")
    assert answer.status_code == 500 and answer.json["error"] == "internal_error"
    assert "unexpected error, reference" in answer.json["message"]
    page, resource = client_for(console_errors.register, "/keys")
    answer = page.simulate_get("/keys")
    assert answer.status_code == 500 and "unexpected error, reference" in answer.text
    assert answer.headers["content-type"].startswith("text/html")
