"""A plain, unpaid demo backend: the kind of API a merchant puts behind the transparent proxy as it is.

`GET /weather` answers a forecast, `GET /stream` a short server-sent event stream; it knows nothing of payments
(`paywarden up --demo` registers it as a proxied service, so its paid address is the gateway URL).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any


def demo_backend(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "/")
    if path == "/weather":
        body = json.dumps({"forecast": "sunny", "paid_by": environ.get("HTTP_X_PAYWARDEN_PAYMENT_HASH")}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])
        return _events()
    start_response("404 Not Found", [("Content-Type", "application/json")])
    return [b'{"error": "not_found"}']


def _events() -> Iterable[bytes]:
    for n in range(3):
        yield f"data: tick {n}\n\n".encode()
        time.sleep(0.2)
