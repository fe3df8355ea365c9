"""The transparent proxy end to end: the official x402 SDK client pays through it to a real HTTPS backend
(trustme certificates) on the sandbox chain (LiteSVM behind the JSON-RPC localnet).

The backend listens on port 443 of a loopback address of its own, and the tests' resolver answers the service's
verified domain with that address, as DNS would.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
import requests

from application.proxy_services import ProxyServices
from domain.networks import DEVNET
from interfaces.adapters.outbound import OutboundPolicy
from interfaces.container import build
from interfaces.http.proxy.factory import create_app as create_proxy_app
from interfaces.wiring import proxy_collaborators
from tests.conftest import USDC, Gateway, make_gateway
from tests.dnsserver import TxtServer
from tests.https_backend import Backend, MapResolver, start_backend
from tests.wsgi_thread import WsgiThread

PRICE = USDC // 100
DOMAINS = {"backend.test", "other.test"}
HOSTNAMES = ("api.backend.test", "api.other.test", "backend.test")


@dataclass
class Stack:
    gateway: Gateway
    backend: Backend
    proxies: ProxyServices
    resolver: MapResolver
    proxy_url: str
    rpc_url: str
    service_id: str
    slug: str

    def url(self, path: str, slug: str | None = None) -> str:
        return f"{self.proxy_url}/{slug or self.slug}{path}"

    def balance(self, owner: Any) -> int:
        return self.gateway.sandbox.token_balance(str(owner), DEVNET.usdc_mint)

    def route(self, path: str, method: str = "GET", **terms: Any) -> Any:
        route = self.proxies.add_route("acme", self.service_id, method=method, path=path, price=PRICE,
                                       pay_to=str(self.gateway.pay_to.pubkey()), **terms)
        return route

    def signature(self, path: str, method: str = "GET") -> str:
        """A PAYMENT-SIGNATURE for `path`, made by the official SDK client from the proxy's 402."""
        from x402 import x402ClientSync
        from x402.http import decode_payment_required_header, encode_payment_signature_header
        from x402.mechanisms.svm.exact import ExactSvmScheme
        from x402.mechanisms.svm.signers import KeypairSigner

        unpaid = requests.request(method, self.url(path), timeout=30)
        assert unpaid.status_code == 402
        client = x402ClientSync()
        client.register("solana:*", ExactSvmScheme(KeypairSigner(self.gateway.payer), rpc_url=self.rpc_url))
        payload = client.create_payment_payload(decode_payment_required_header(unpaid.headers["PAYMENT-REQUIRED"]))
        return encode_payment_signature_header(payload)

    def paying_session(self) -> requests.Session:
        from x402 import x402ClientSync
        from x402.http.clients import wrapRequestsWithPayment
        from x402.mechanisms.svm.exact import ExactSvmScheme
        from x402.mechanisms.svm.signers import KeypairSigner

        client = x402ClientSync()
        client.register("solana:*", ExactSvmScheme(KeypairSigner(self.gateway.payer), rpc_url=self.rpc_url))
        return wrapRequestsWithPayment(requests.Session(), client)

    def seen(self, since: int) -> list[Any]:
        return self.backend.received[since:]


def loopback_443(hostnames: tuple[str, ...]) -> Backend:
    """An HTTPS backend on port 443 of a random 127/8 address (the tests run as root, as CI does)."""
    for _ in range(20):
        host = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"
        try:
            return start_backend(host=host, port=443, hostnames=hostnames)
        except OSError:
            continue
    pytest.fail("could not bind port 443 on a loopback address (the proxy tests need root, as CI has)")


def verify_domains(container: Any, dns: TxtServer, merchant: str, domains: Iterable[str]) -> None:
    """The console's domain verification, for real: the TXT record published on the test's DNS server."""
    for domain in domains:
        wanted = container.merchants.add_domain(merchant, domain)
        dns.publish(wanted.dns_name, wanted.dns_value)
        assert container.merchants.verify_domain(merchant, domain) == "dns"


def build_stack(tmp_path: Any, sandbox: Any, localnet: Any, *, policy: OutboundPolicy | None = None,
                answer: str | None = None, **store: str) -> Any:
    with TxtServer() as dns:
        gateway = make_gateway(tmp_path, sandbox, devnet_rpc_url=localnet.url, confirmation_budget_seconds=0.5,
                               dns_nameservers=(dns.nameserver,), **store)
        verify_domains(gateway.container, dns, "acme", sorted(DOMAINS))
    backend = loopback_443(HOSTNAMES)
    host = backend.server.server_address[0]
    resolver = MapResolver({name: [answer or host] for name in HOSTNAMES})
    container = gateway.container
    service = container.proxies.create_service("acme", "Weather", "backend.test", subdomain="api",
                                               upstream_auth=("X-Upstream-Key", "upstream-secret-123"))
    app = create_proxy_app(proxy_collaborators(
        container, resolver=resolver, ssl_context=backend.client_context(),
        policy=policy or OutboundPolicy.for_mode(sandbox=True, read_timeout=1.5, response_timeout=2.0)))
    return gateway, backend, resolver, container.proxies, app, service


@contextmanager
def running_stack(tmp_path: Any, sandbox: Any, **store: str) -> Iterator[Stack]:
    from interfaces.sandbox.localnet import LocalnetThread

    with LocalnetThread(sandbox, slot_ms=None) as localnet:
        gateway, backend, resolver, proxies, app, service = build_stack(tmp_path, sandbox, localnet, **store)
        try:
            with WsgiThread(app) as server:
                yield Stack(gateway, backend, proxies, resolver, server.url, localnet.url, str(service.id),
                            service.slug)
        finally:
            backend.close()
            gateway.container.close()


@pytest.fixture
def stack(tmp_path, sandbox):
    with running_stack(tmp_path, sandbox) as running:
        yield running


@pytest.fixture(params=["embedded", "postgres+redis"])
def stack_on(request, tmp_path, sandbox):
    """The stack on the embedded default, and on PostgreSQL with Redis."""
    store = {} if request.param == "embedded" else {"database_url": request.getfixturevalue("postgres_url"),
                                                    "redis_url": request.getfixturevalue("redis_url")}
    with running_stack(tmp_path, sandbox, **store) as running:
        yield running


def decoded(header: str) -> dict[str, Any]:
    return json.loads(base64.b64decode(header))


def test_the_sdk_client_pays_through_the_proxy_and_the_backend_sees_only_what_it_should(stack, caplog):
    stack.route("/weather/*", description="Today's weather", mime_type="application/json")
    payer_before, merchant_before = stack.balance(stack.gateway.payer.pubkey()), stack.balance(
        stack.gateway.pay_to.pubkey())

    unpaid = requests.get(stack.url("/weather/today?units=metric"), timeout=30)
    assert unpaid.status_code == 402
    assert unpaid.headers["Cache-Control"] == "no-store"
    required = decoded(unpaid.headers["PAYMENT-REQUIRED"])
    assert required["x402Version"] == 2
    assert required["resource"]["url"] == stack.url("/weather/today")
    assert required["accepts"][0]["amount"] == str(PRICE)
    assert required["accepts"][0]["extra"]["feePayer"] == stack.gateway.fee_payer
    assert stack.backend.received == []  # nothing is forwarded unpaid

    paid = stack.paying_session().get(stack.url("/weather/today?units=metric"), timeout=60,
                                      headers={"Authorization": "Bearer client-secret", "X-Client": "kept"})
    assert paid.status_code == 200
    echoed = paid.json()
    assert echoed["path"] == "/weather/today?units=metric"
    receipt = decoded(paid.headers["PAYMENT-RESPONSE"])
    assert receipt["success"] is True and receipt["network"] == DEVNET.caip2

    [seen] = stack.backend.received
    lowered = {k.lower(): v for k, v in seen.headers.items()}
    for header in ("payment-signature", "authorization", "x-payment", "sign-in-with-x", "payment-retry",
                   "payment-recovery"):
        assert header not in lowered
    assert lowered["x-upstream-key"] == "upstream-secret-123"
    assert lowered["x-client"] == "kept"
    assert lowered["host"] == "api.backend.test"
    payment_hash = lowered["x-paywarden-payment-hash"]
    assert stack.gateway.container.payments.get_payment(payment_hash).is_settled
    assert stack.balance(stack.gateway.pay_to.pubkey()) == merchant_before + PRICE
    assert stack.balance(stack.gateway.payer.pubkey()) == payer_before - PRICE

    # The same PAYMENT-SIGNATURE again: not served, not charged.
    replay = requests.get(stack.url("/weather/today?units=metric"), timeout=30,
                          headers={"PAYMENT-SIGNATURE": paid.request.headers["PAYMENT-SIGNATURE"]})
    assert replay.status_code == 402
    assert decoded(replay.headers["PAYMENT-REQUIRED"])["error"] == "duplicate_settlement"
    assert len(stack.backend.received) == 1
    assert stack.balance(stack.gateway.pay_to.pubkey()) == merchant_before + PRICE

    # Each proxy log line of the paid request names the payment hash; no line carries a credential.
    lines = [r for r in caplog.records if r.name == "paywarden.proxy"]
    assert any(getattr(r, "payment_hash", None) == payment_hash and r.status == 200 for r in lines)
    for record in caplog.records:
        text = record.getMessage() + repr(record.__dict__)
        assert "upstream-secret-123" not in text and "client-secret" not in text


@pytest.mark.parametrize("path,reason", [("/status/500", "upstream_error"), ("/slow/4", "upstream_timeout")])
def test_an_upstream_failure_is_a_502_and_nothing_is_charged(stack, path, reason):
    stack.route("/status/*")
    stack.route("/slow/*")
    before = stack.balance(stack.gateway.pay_to.pubkey()), stack.balance(stack.gateway.payer.pubkey())
    failed = stack.paying_session().get(stack.url(path), timeout=60)
    assert failed.status_code == 502
    assert failed.json()["error"] == reason
    assert (stack.balance(stack.gateway.pay_to.pubkey()), stack.balance(stack.gateway.payer.pubkey())) == before


def test_an_upstream_4xx_is_passed_on_uncharged(stack):
    stack.route("/status/*")
    before = stack.balance(stack.gateway.pay_to.pubkey())
    answer = stack.paying_session().get(stack.url("/status/404"), timeout=60)
    assert answer.status_code == 404 and answer.json() == {"status": 404}
    assert "PAYMENT-RESPONSE" not in answer.headers
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before


def test_settle_before_charges_then_forwards(stack):
    stack.route("/orders", method="POST", settle="before")
    before = stack.balance(stack.gateway.pay_to.pubkey())
    created = stack.paying_session().post(stack.url("/orders"), json={"pizza": 1}, timeout=60)
    assert created.status_code == 200
    assert json.loads(created.json()["body"]) == {"pizza": 1}
    assert decoded(created.headers["PAYMENT-RESPONSE"])["success"] is True
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before + PRICE
    assert [r.method for r in stack.backend.received] == ["POST"]


def test_an_event_stream_on_a_settle_before_route_reaches_the_client_before_the_upstream_has_finished(stack):
    """Streams are `settle: before`'s: a `settle: after` answer is charged only once it is known whole."""
    stack.route("/sse", mime_type="text/event-stream", settle="before")
    stack.backend.release_stream.clear()
    response = stack.paying_session().get(stack.url("/sse"), timeout=60, stream=True)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/event-stream"
    first = response.raw.read1(1024)  # whatever has arrived, without waiting for more
    assert first == b"data: first\n\n"
    assert not stack.backend.release_stream.is_set()  # the upstream still holds its second event
    stack.backend.release_stream.set()
    assert response.raw.read() == b"data: second\n\n"


def test_an_inactive_service_answers_503_and_forwards_nothing_until_reactivated(stack):
    stack.route("/weather/*")
    stack.proxies.set_active("acme", stack.service_id, False)
    inactive = stack.paying_session().get(stack.url("/weather/x"), timeout=30)
    assert inactive.status_code == 503 and inactive.json()["error"] == "service_inactive"
    assert stack.backend.received == []
    stack.proxies.set_active("acme", stack.service_id, True)
    served = stack.paying_session().get(stack.url("/weather/x"), timeout=60)
    assert served.status_code == 200 and served.json()["path"] == "/weather/x"


def test_a_base_url_edit_keeps_a_slug_made_from_the_name_and_forwards_to_the_new_host(stack):
    stack.route("/weather/*")
    moved = stack.proxies.change_base_url("acme", stack.service_id, "other.test", subdomain="api")
    assert moved.slug == stack.slug == "weather"  # the gateway URL handed out keeps working
    assert requests.get(stack.url("/weather/x", slug="other"), timeout=30).status_code == 404
    served = stack.paying_session().get(stack.url("/weather/x"), timeout=60)
    assert served.status_code == 200 and served.json()["headers"]["Host"] == "api.other.test"


def test_unknown_slugs_and_unrouted_paths_are_404(stack):
    stack.route("/weather/*")
    assert requests.get(stack.url("/weather/x", slug="nobody"), timeout=30).json()["error"] == "unknown_service"
    unrouted = requests.get(stack.url("/admin"), timeout=30)
    assert unrouted.status_code == 404 and unrouted.json()["error"] == "no_route"
    stack.proxies.add_route("acme", stack.service_id, method="GET", path="/only-get", price=PRICE,
                            pay_to=str(stack.gateway.pay_to.pubkey()))
    assert requests.post(stack.url("/only-get"), timeout=30).status_code == 404


def test_an_encoded_path_cannot_reach_a_priced_route_for_free_or_elsewhere(stack):
    stack.route("/premium/*")
    stack.route("/cheap/*")
    # An escaped letter is still the priced route.
    assert requests.get(stack.url("/%70remium/report"), timeout=30).status_code == 402
    # Escaped separators and dot segments that an upstream could resolve into another route are refused.
    for sneaky in ("/cheap/..%2Fpremium/report", "/cheap/%2e%2e/premium/report", "/cheap%2F..%2Fpremium"):
        answer = requests.get(stack.url(sneaky), timeout=30)
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_path", sneaky
    assert stack.backend.received == []
    # Paid through an escaped path, the backend gets the canonical path that was priced.
    served = stack.paying_session().get(stack.url("/%70remium/report"), timeout=60)
    assert served.status_code == 200 and served.json()["path"] == "/premium/report"


def test_request_bodies_over_the_service_limit_are_413_before_any_payment(stack):
    stack.route("/upload", method="POST")
    too_big = requests.post(stack.url("/upload"), data=b"x" * (64 * 1024 + 1), timeout=30)
    assert too_big.status_code == 413 and too_big.json()["error"] == "body_too_large"
    stack.proxies.set_body_limit("acme", stack.service_id, 128 * 1024)
    assert requests.post(stack.url("/upload"), data=b"x" * (64 * 1024 + 1), timeout=30).status_code == 402


def test_a_redirect_from_the_upstream_is_passed_on_not_followed(stack):
    stack.route("/redirect")
    answer = stack.paying_session().get(stack.url("/redirect"), timeout=60, allow_redirects=False)
    assert answer.status_code == 302
    assert answer.headers["Location"].endswith("/echo")
    assert [r.path for r in stack.backend.received] == ["/redirect"]


@pytest.mark.parametrize("answer", ["127.0.0.1", "169.254.169.254"])
def test_in_production_a_domain_resolving_to_an_internal_address_is_refused_at_request_time(
        tmp_path, sandbox, answer):
    from interfaces.sandbox.localnet import LocalnetThread

    with LocalnetThread(sandbox, slot_ms=None) as localnet:
        gateway, backend, _, proxies, app, service = build_stack(
            tmp_path, sandbox, localnet, policy=OutboundPolicy(), answer=answer)
        try:
            with WsgiThread(app) as server:
                stack = Stack(gateway, backend, proxies, MapResolver({}), server.url, localnet.url, str(service.id),
                              service.slug)
                stack.route("/weather/*")
                before = stack.balance(gateway.pay_to.pubkey())
                refused = stack.paying_session().get(stack.url("/weather/x"), timeout=60)
                assert refused.status_code == 502
                assert refused.json()["error"] == "forbidden_address"
                assert stack.balance(gateway.pay_to.pubkey()) == before
                assert backend.received == []
        finally:
            backend.close()
            gateway.container.close()


def test_bazaar_metadata_of_a_route_is_offered_and_listed_with_the_gateway_url(stack):
    stack.route("/weather/*", bazaar={"title": "Weather", "description": "Forecasts", "tags": ["weather"]})
    unpaid = requests.get(stack.url("/weather/today"), timeout=30)
    assert decoded(unpaid.headers["PAYMENT-REQUIRED"])["extensions"]["bazaar"]["info"]["title"] == "Weather"
    served = stack.paying_session().get(stack.url("/weather/today"), timeout=60)
    assert served.status_code == 200
    from interfaces.runtime.workers import catch_up_all

    container = stack.gateway.container
    catch_up_all(container)
    # One listing per route: the route's template, declared by the route's own settings (docs/discovery.md).
    assert container.listings.get_listing(stack.url("/weather/today"), "GET") is None
    listing = container.listings.get_listing(stack.url("/weather/:var1"), "GET")
    assert listing is not None and listing.owner.startswith("merchant:")
    assert listing.declared["title"] == "Weather" and listing.declared["path_params"] == ["var1"]
    [item] = [i for i in container.catalog.list_owned(listing.owner) if i[1]["resource"] == listing.resource]
    assert item[1]["metadata"]["title"] == "Weather" and item[2] is None  # shown, nothing left to confirm



class HeldConfirmations:
    """The chain as it is, except that while `held` no signature has reached `confirmed` yet."""

    def __init__(self, chain: Any) -> None:
        self._chain, self.held = chain, True

    def signature_status(self, signature: str) -> Any:
        from application.ports import Confirmation, SignatureStatus

        return SignatureStatus(Confirmation.PENDING) if self.held else self._chain.signature_status(signature)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chain, name)


def test_a_pending_settlement_is_202_and_the_same_signature_is_served_once_it_confirms(stack):
    stack.route("/weather/*")
    chains = stack.gateway.container.chains.by_network
    chain = chains[DEVNET.caip2] = HeldConfirmations(chains[DEVNET.caip2])
    before = stack.balance(stack.gateway.pay_to.pubkey())

    pending = stack.paying_session().get(stack.url("/weather/x"), timeout=60)
    assert pending.status_code == 202  # never a fresh 402: that would invite a second payment
    assert pending.headers["Retry-After"] == "2"
    assert decoded(pending.headers["PAYMENT-RESPONSE"])["errorReason"] == "settlement_pending"
    signature = {"PAYMENT-SIGNATURE": pending.request.headers["PAYMENT-SIGNATURE"]}
    still = requests.get(stack.url("/weather/x"), headers=signature, timeout=30)
    assert still.status_code == 202
    assert len(stack.backend.received) == 1  # the first attempt reached the backend; the answer was held back

    chain.held = False
    served = requests.get(stack.url("/weather/x"), headers=signature, timeout=30)
    assert served.status_code == 200 and served.json()["path"] == "/weather/x"
    assert decoded(served.headers["PAYMENT-RESPONSE"])["success"] is True
    again = requests.get(stack.url("/weather/x"), headers=signature, timeout=30)
    assert again.status_code == 402  # served once
    assert len(stack.backend.received) == 2
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before + PRICE  # charged once


def test_supported_with_a_service_and_path_answers_the_kinds_of_that_route(stack):
    stack.route("/weather/*")
    kinds = stack.gateway.client.simulate_get("/supported", params={"service": stack.slug, "path": "/weather/x"},
                                              headers=stack.gateway.headers)
    assert kinds.status_code == 200
    assert [(k["network"], k["extra"]["feePayer"]) for k in kinds.json["kinds"]] == [
        (DEVNET.caip2, stack.gateway.fee_payer)]
    for params in ({"service": stack.slug, "path": "/admin"}, {"service": "nobody"}):
        refused = stack.gateway.client.simulate_get("/supported", params=params, headers=stack.gateway.headers)
        assert refused.status_code == 400 and refused.json["error"] == "unknown_service"


def test_the_proxy_counts_served_requests_and_upstream_failures_in_its_metrics(stack):
    stack.route("/weather/*")
    stack.route("/status/*")

    def count(outcome: str) -> float:
        text = requests.get(f"{stack.proxy_url}/.well-known/paywarden/metrics", timeout=30).text
        line = next((x for x in text.splitlines() if x.startswith("paywarden_proxy_requests_total{")
                     and f'outcome="{outcome}"' in x and f'service="{stack.slug}"' in x), None)
        return float(line.rsplit(" ", 1)[1]) if line else 0.0

    served, failed = count("served"), count("upstream_failed")
    assert stack.paying_session().get(stack.url("/weather/x"), timeout=60).status_code == 200
    assert stack.paying_session().get(stack.url("/status/503"), timeout=60).status_code == 502
    assert count("served") == served + 1 and count("upstream_failed") == failed + 1
    assert requests.get(f"{stack.proxy_url}/.well-known/paywarden/healthz", timeout=30).json() == {"status": "ok"}


@pytest.mark.postgres
@pytest.mark.redis
def test_on_postgresql_and_redis_a_paid_request_is_served_once_and_charged_once(tmp_path, sandbox, postgres_url,
                                                                                redis_url):
    from interfaces.sandbox.localnet import LocalnetThread

    with LocalnetThread(sandbox, slot_ms=None) as localnet:
        gateway, backend, _, proxies, app, service = build_stack(
            tmp_path, sandbox, localnet, database_url=postgres_url, redis_url=redis_url)
        try:
            with WsgiThread(app) as server:
                stack = Stack(gateway, backend, proxies, MapResolver({}), server.url, localnet.url, str(service.id),
                              service.slug)
                stack.route("/weather/*")
                before = stack.balance(gateway.pay_to.pubkey())
                paid = stack.paying_session().get(stack.url("/weather/x"), timeout=60)
                assert paid.status_code == 200 and paid.json()["path"] == "/weather/x"
                replay = requests.get(stack.url("/weather/x"), timeout=30,
                                      headers={"PAYMENT-SIGNATURE": paid.request.headers["PAYMENT-SIGNATURE"]})
                assert replay.status_code == 402
                assert len(backend.received) == 1
                assert stack.balance(gateway.pay_to.pubkey()) == before + PRICE
        finally:
            backend.close()
            gateway.container.close()


# -- the service's domain, re-checked on every request --------------------------------------------------------


def proxy_of(stack: Stack, **config: Any) -> Any:
    """The proxy of another process of the same deployment, started with a changed configuration."""
    container = build(replace(stack.gateway.container.config, **config), sandbox=stack.gateway.sandbox)
    return container, create_proxy_app(proxy_collaborators(container, resolver=stack.resolver,
                                                         ssl_context=stack.backend.client_context()))


def test_a_domain_the_operator_blocks_after_verification_is_503_and_nothing_is_forwarded_or_charged(stack_on):
    stack = stack_on
    stack.route("/orders", method="POST", settle="before")  # would charge before forwarding
    signature = stack.signature("/orders", "POST")
    before = stack.balance(stack.gateway.pay_to.pubkey()), stack.balance(stack.gateway.payer.pubkey())

    # The operator adds the domain to PAYWARDEN_BLOCKED_DOMAINS and restarts: the verification stands, but
    # the service is no longer proxied.
    container, app = proxy_of(stack, blocked_domains=("backend.test",))
    try:
        with WsgiThread(app) as blocked:
            for headers in ({}, {"PAYMENT-SIGNATURE": signature}):
                refused = requests.post(f"{blocked.url}/{stack.slug}/orders", json={"pizza": 1}, headers=headers,
                                        timeout=30)
                assert refused.status_code == 503
                assert refused.json()["error"] == "domain_blocked"
                assert "blocked by the operator" in refused.json()["message"]
                assert "PAYMENT-REQUIRED" not in refused.headers
    finally:
        container.close()
    assert stack.backend.received == []
    assert (stack.balance(stack.gateway.pay_to.pubkey()), stack.balance(stack.gateway.payer.pubkey())) == before

    # The running proxy (started without the block) still serves the same signature, charged once.
    served = requests.post(stack.url("/orders"), json={"pizza": 1}, headers={"PAYMENT-SIGNATURE": signature},
                           timeout=60)
    assert served.status_code == 200 and len(stack.backend.received) == 1
    assert stack.balance(stack.gateway.pay_to.pubkey()) == before[0] + PRICE


def test_a_domain_no_longer_verified_is_503_and_nothing_is_forwarded_or_charged(stack_on):
    stack = stack_on
    stack.route("/weather/*")
    merchants = stack.gateway.container.merchants
    # The console refuses to remove a domain a service uses; a removal racing the service's creation is how a
    # service can outlive its domain's verification, as done here underneath that check.
    merchant = merchants.get_merchant("acme")
    merchant.remove_domain("backend.test")
    merchants.save(merchant)
    before = stack.balance(stack.gateway.pay_to.pubkey()), stack.balance(stack.gateway.payer.pubkey())

    refused = stack.paying_session().get(stack.url("/weather/x"), timeout=30)
    assert refused.status_code == 503
    assert refused.json() == {"error": "domain_unverified",
                              "message": "backend.test is no longer a verified domain of this service's merchant"}
    assert stack.backend.received == []
    assert (stack.balance(stack.gateway.pay_to.pubkey()), stack.balance(stack.gateway.payer.pubkey())) == before
