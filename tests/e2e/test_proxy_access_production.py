"""Pay once, come back on the production shape: `paywarden serve --workers 2 --proxy-bind` over PostgreSQL and
Redis, its projection worker building the paid-access read model, and requests racing one Sign-In-With-X nonce
across the proxy's two gunicorn workers."""

from __future__ import annotations

import threading
from wsgiref.simple_server import make_server

import pytest
import requests
from solders.keypair import Keypair

from interfaces.sandbox.demo_backend import demo_backend
from interfaces.sandbox.localnet import QuietHandler, ThreadingServer
from tests.e2e.production import ProductionStack, fund, production_stack
from tests.e2e.test_proxy_access_stack import PRICE, entered, granted_once_applied, raced, reason, sdk_get, signed_in
from tests.faults import free_port, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    yield from production_stack(tmp_path_factory)


def test_a_once_paid_route_on_two_proxy_workers_grants_a_racing_nonce_once(production: ProductionStack):
    backend = make_server("127.0.0.1", 0, demo_backend, ThreadingServer, QuietHandler)
    threading.Thread(target=backend.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        container, payer, pay_to = production.container, Keypair(), Keypair()
        fund(production, payer, pay_to)
        container.merchants.preverify_sandbox_domain("acme")
        service = container.proxies.create_service("acme", "Articles", "localhost", port=backend.server_port)
        container.proxies.add_route("acme", str(service.id), method="GET", path="/weather", price=PRICE,
                                    pay_to=str(pay_to.pubkey()), access="once-paid")
        proxy_port = free_port()
        production.serve("--workers", "2", "--proxy-bind", f"127.0.0.1:{proxy_port}")
        url = f"http://127.0.0.1:{proxy_port}/{service.slug}/weather"
        wait_until(lambda: _answers(url) == 402, timeout=60, interval=0.2, what="the proxy")

        paid = sdk_get(url, production.net.url, payer)
        assert paid.status_code == 200 and "PAYMENT-RESPONSE" in paid.headers
        granted_once_applied(url, payer)
        assert reason(entered(url, signed_in(url, Keypair()))).startswith("siwx_not_paid")
        for _ in range(3):
            assert raced(url, signed_in(url, payer), 8) == [200] + [402] * 7
        assert production.net.sandbox.token_balance(str(pay_to.pubkey()), _mint()) == PRICE  # one transfer
    finally:
        backend.shutdown()
        backend.server_close()


def _answers(url: str) -> int | None:
    try:
        return requests.get(url, timeout=5).status_code
    except requests.RequestException:
        return None


def _mint() -> str:
    from domain.networks import DEVNET

    return DEVNET.usdc_mint
