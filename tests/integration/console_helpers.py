"""A console over a real gateway (sandbox chain, embedded store), and a logged-in JSON client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from falcon import testing

from interfaces.http.console.app import create_app
from interfaces.http.console.sessions import COOKIE
from interfaces.wiring import console_collaborators
from tests.conftest import make_gateway

PASSWORD = "correct horse battery staple"
ORIGIN = "http://falconframework.org"  # the falcon test client's own origin


@dataclass
class ApiClient:
    client: testing.TestClient
    session: str | None = None
    csrf: str | None = None

    def request(self, method: str, path: str, *, json: Any = None, csrf: bool = True,
                headers: dict[str, str] | None = None) -> testing.Result:
        sent = {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"} if method != "GET" else {}
        if csrf and self.csrf and method != "GET":
            sent["X-CSRF-Token"] = self.csrf
        sent.update(headers or {})
        cookies = {COOKIE: self.session} if self.session else None
        return self.client.simulate_request(method, "/api/v1" + path, json=json, headers=sent, cookies=cookies)

    def login(self, email: str, password: str = PASSWORD, **kw: Any) -> testing.Result:
        result = self.request("POST", "/session", json={"email": email, "password": password}, **kw)
        if result.status_code == 200:
            self.session, self.csrf = result.cookies[COOKIE].value, result.json["csrfToken"]
        return result


def console_client(container: Any) -> testing.TestClient:
    return testing.TestClient(create_app(console_collaborators(container)))


def add_owner(container: Any, merchant: str, email: str) -> None:
    if container.accounts.get_merchant_by_name(merchant) is None:
        try:
            container.merchants.register(merchant)
        except Exception:
            pass
    container.merchants.add_login(merchant, email, password=PASSWORD)


def two_merchants(tmp_path: Any, sandbox: Any, **options: Any) -> Iterator[Any]:
    """A gateway (`make_gateway` with `options`) whose merchants acme and beta each have a console owner
    (owner@acme.test, owner@beta.test), closed when the fixture that yields from this ends."""
    gateway = make_gateway(tmp_path, sandbox, **options)
    add_owner(gateway.container, "acme", "owner@acme.test")
    add_owner(gateway.container, "beta", "owner@beta.test")
    yield gateway
    gateway.container.close()
