"""Two merchant APIs written only with the official x402 Python SDK's server side, as its README shows them, with
Paywarden as their facilitator: `flask` (payment_middleware + x402ResourceServerSync + HTTPFacilitatorClientSync,
served by werkzeug) and `fastapi` (payment_middleware + x402ResourceServer + HTTPFacilitatorClient, served by
uvicorn). Each runs in its own process (the SDK exits the process when its start-up check against the facilitator
fails), on 127.0.0.1:PORT:

    python -m tests.e2e.x402_merchants flask|fastapi PORT FACILITATOR_URL API_KEY NETWORK PAY_TO

GET /weather costs $0.01 (the SDK picks the network's USDC); GET /health is free.
"""

from __future__ import annotations

import sys

PRICE = "$0.01"
FORECAST = {"city": "Lisbon", "forecast": "sunny"}


def routes(network: str, pay_to: str) -> dict:
    from x402.http import PaymentOption
    from x402.http.types import RouteConfig

    return {"GET /weather": RouteConfig(accepts=PaymentOption(scheme="exact", pay_to=pay_to, price=PRICE,
                                                              network=network),
                                        description="Today's weather", mime_type="application/json")}


def paywarden_headers(api_key: str):
    """The SDK's `create_headers` hook: the API key on every facilitator call."""

    def create_headers() -> dict[str, dict[str, str]]:
        auth = {"Authorization": f"Bearer {api_key}"}
        return {"verify": auth, "settle": auth, "supported": auth}

    return create_headers


def serve_flask(port: int, facilitator_url: str, api_key: str, network: str, pay_to: str) -> None:
    from flask import Flask, jsonify
    from x402 import x402ResourceServerSync
    from x402.http import HTTPFacilitatorClientSync
    from x402.http.middleware.flask import payment_middleware
    from x402.mechanisms.svm.exact import ExactSvmServerScheme

    app = Flask("flask-merchant")

    @app.get("/weather")
    def weather():
        return jsonify(FORECAST)

    @app.get("/health")
    def health():
        return jsonify({"ok": True})

    facilitator = HTTPFacilitatorClientSync({"url": facilitator_url, "create_headers": paywarden_headers(api_key)})
    server = x402ResourceServerSync(facilitator)
    server.register("solana:*", ExactSvmServerScheme())
    payment_middleware(app, routes(network, pay_to), server)
    app.run(host="127.0.0.1", port=port, threaded=True)


def serve_fastapi(port: int, facilitator_url: str, api_key: str, network: str, pay_to: str) -> None:
    import uvicorn
    from fastapi import FastAPI
    from x402 import x402ResourceServer
    from x402.http import HTTPFacilitatorClient
    from x402.http.middleware.fastapi import payment_middleware
    from x402.mechanisms.svm.exact import ExactSvmServerScheme

    app = FastAPI()

    @app.get("/weather")
    async def weather() -> dict:
        return FORECAST

    @app.get("/health")
    async def health() -> dict:
        return {"ok": True}

    facilitator = HTTPFacilitatorClient({"url": facilitator_url, "create_headers": paywarden_headers(api_key)})
    server = x402ResourceServer(facilitator)
    server.register("solana:*", ExactSvmServerScheme())
    x402 = payment_middleware(routes(network, pay_to), server)

    @app.middleware("http")
    async def pay(request, call_next):
        return await x402(request, call_next)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    framework, port, *rest = sys.argv[1:]
    {"flask": serve_flask, "fastapi": serve_fastapi}[framework](int(port), *rest)
