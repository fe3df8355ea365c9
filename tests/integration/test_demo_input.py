"""The example merchant API (interfaces/sandbox/demo.py) answers a hostile PAYMENT-SIGNATURE with 402, never 500; its
facilitator is the Paywarden API served over real HTTP (wsgiref, 127.0.0.1)."""

from __future__ import annotations

import base64
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from falcon import testing

from domain.networks import DEVNET
from interfaces.sandbox.demo import create_demo_app
from tests.conftest import make_gateway
from tests.services import POLL


class Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def demo(tmp_path, sandbox) -> testing.TestClient:
    gateway = make_gateway(tmp_path, sandbox)
    server: WSGIServer = make_server("127.0.0.1", 0, gateway.client.app, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True)
    thread.start()
    yield testing.TestClient(create_demo_app(f"http://127.0.0.1:{server.server_port}", gateway.api_key,
                                             DEVNET.caip2, DEVNET.usdc_mint, str(gateway.pay_to.pubkey())))
    server.shutdown()
    gateway.container.close()


@pytest.mark.parametrize("raw", [b'{"payload": {"transaction": NaN}}', b'{"x402Version": Infinity}',
                                 b'{"amount": 1e999}', b"[" * 100_000])
def test_a_payment_signature_that_is_not_strict_json_gets_402_not_500(demo, raw):
    result = demo.simulate_get("/weather", headers={"PAYMENT-SIGNATURE": base64.b64encode(raw).decode()})
    assert result.status_code == 402, result.text
    assert result.json["error"] == "PAYMENT-SIGNATURE is not base64 JSON"
