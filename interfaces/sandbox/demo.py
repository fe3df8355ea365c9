"""An example merchant API that charges per request with x402, using Paywarden as its facilitator.

It follows the four steps of a merchant's API (docs/architecture.md#what-it-is): answer 402 with
`PAYMENT-REQUIRED`, parse `PAYMENT-SIGNATURE`, call the facilitator's /settle, deliver with `PAYMENT-RESPONSE`.
About sixty lines a merchant could write in any language.

Its 402 carries `extensions.bazaar` (what the resource is, for the discovery catalog): the x402 client copies it
into its payment, so once a payment settles the weather API is listed in `GET /discovery/resources`. Only
payments carrying `extensions.bazaar` are listed (docs/discovery.md).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import falcon
import httpx

PRICE = "10000"  # 0.01 USDC in atomic units
BAZAAR = {"info": {
    "type": "http", "method": "GET", "title": "Weather (Paywarden demo)", "description": "Today's weather",
    "tags": ["demo", "weather"],
    "output": {"type": "application/json", "schema": {"type": "object", "properties": {
        "city": {"type": "string"}, "forecast": {"type": "string"}, "temperature_c": {"type": "number"}}}},
}}


def _b64(data: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(data).encode()).decode()


class WeatherResource:
    """GET /weather: 0.01 USDC per call."""

    def __init__(self, facilitator_url: str, api_key: str, network: str, asset: str, pay_to: str) -> None:
        self._facilitator, self._headers = facilitator_url.rstrip("/"), {"Authorization": f"Bearer {api_key}"}
        self._terms = {"scheme": "exact", "network": network, "amount": PRICE, "asset": asset, "payTo": pay_to,
                       "maxTimeoutSeconds": 60}

    def requirements(self) -> dict[str, Any]:
        supported = httpx.get(f"{self._facilitator}/supported", headers=self._headers, timeout=10).json()
        kind = next(k for k in supported["kinds"] if k["network"] == self._terms["network"])
        return {**self._terms, "extra": {"feePayer": kind["extra"]["feePayer"]}}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        requirements = self.requirements()
        signature = req.get_header("PAYMENT-SIGNATURE")
        if signature is None:
            return self._require(req, resp, requirements, "payment required")
        try:
            payload = json.loads(base64.b64decode(signature, validate=True))
            json.dumps(payload, allow_nan=False)  # strict JSON only: no NaN or Infinity, no absurd nesting
        except (ValueError, RecursionError):
            return self._require(req, resp, requirements, "PAYMENT-SIGNATURE is not base64 JSON")
        settled = httpx.post(f"{self._facilitator}/settle", headers=self._headers, timeout=60, json={
            "x402Version": 2, "paymentPayload": payload, "paymentRequirements": requirements})
        result = settled.json()
        if not result.get("success"):
            return self._require(req, resp, requirements, result.get("errorReason", "payment failed"))
        resp.set_header("PAYMENT-RESPONSE", _b64(result))
        resp.media = {"city": "Lisbon", "forecast": "sunny", "temperature_c": 21}

    def _require(self, req: falcon.Request, resp: falcon.Response, requirements: dict, error: str) -> None:
        required = {"x402Version": 2, "error": error,
                    "resource": {"url": req.url, "description": "Today's weather", "mimeType": "application/json"},
                    "accepts": [requirements], "extensions": {"bazaar": BAZAAR}}
        resp.status = falcon.HTTP_402
        resp.set_header("PAYMENT-REQUIRED", _b64(required))
        resp.media = required


def create_demo_app(facilitator_url: str, api_key: str, network: str, asset: str, pay_to: str) -> falcon.App:
    app = falcon.App()
    app.add_route("/weather", WeatherResource(facilitator_url, api_key, network, asset, pay_to))
    return app
