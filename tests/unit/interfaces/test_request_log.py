"""The access line under the service's own logging configuration (written straight to its JSON handler's stream)
is the line `logging` writes through that handler for the same request, and any other configuration gets records."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import falcon
import pytest
from falcon import testing

from interfaces.http.common import requestlog
from interfaces.http.common.requestlog import RequestLogMiddleware
from interfaces.runtime.observability import JsonFormatter


class Verify:
    operation = "verify"

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        valid = req.get_param("valid") == "1"
        resp.status = falcon.HTTP_200 if valid else falcon.HTTP_400
        resp.media = ({"isValid": True, "payer": "P"} if valid else
                      {"isValid": False, "invalidReason": "invalid_payload", "invalidMessage": "m"})


class Boom:
    def on_get(self, req: falcon.Request, resp: falcon.Response, key: str) -> None:
        resp.status, resp.media = falcon.HTTP_503, {"error": "unavailable", "message": "x"}


@pytest.fixture
def client() -> testing.TestClient:
    app = falcon.App(middleware=[RequestLogMiddleware()])
    app.add_route("/verify", Verify())
    app.add_route("/boom/{key}", Boom())
    return testing.TestClient(app)


@contextmanager
def root_handlers(*handlers: logging.Handler) -> Iterator[None]:
    """The root logger with exactly these handlers (the test run's own leak detector set aside meanwhile)."""
    root, access = logging.getLogger(), logging.getLogger("paywarden.access")
    saved, level, access_level = root.handlers[:], root.level, access.level
    root.handlers[:] = handlers
    root.setLevel(logging.INFO)
    access.setLevel(logging.NOTSET)
    try:
        yield
    finally:
        root.handlers[:] = saved
        root.setLevel(level)
        access.setLevel(access_level)


def service_handler() -> tuple[logging.StreamHandler, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    return handler, stream


def requests(client: testing.TestClient) -> None:
    client.simulate_post("/verify", params={"valid": "1"}, headers={"X-Request-Id": "r1"})
    client.simulate_post("/verify", headers={"X-Request-Id": "pw_live_" + "A" * 40})  # a key-shaped id is masked
    client.simulate_get("/boom/Bearer%20abc", headers={"X-Request-Id": "r3"})


def comparable(stream: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    for line in lines:
        assert line.pop("ts").endswith("Z") and isinstance(line.pop("duration_ms"), float)
    return lines


def test_the_direct_line_is_the_line_logging_writes(client, monkeypatch):
    direct_handler, direct = service_handler()
    with root_handlers(direct_handler):
        monkeypatch.setattr(requestlog.log, "handle", lambda record: pytest.fail("a record was made"))
        requests(client)
        monkeypatch.undo()
    recorded_handler, recorded = service_handler()
    recorded_handler.addFilter(lambda record: True)  # any filter: not the service's handler any more
    with root_handlers(recorded_handler):
        requests(client)
    assert comparable(direct) == comparable(recorded)
    raw = direct.getvalue().splitlines()
    assert [json.loads(line)["level"] for line in raw] == ["info", "info", "warning"]
    assert list(json.loads(raw[0])) == ["ts", "level", "logger", "message", "method", "route", "path", "status",
                                        "duration_ms", "request_id", "client"]
    assert json.loads(raw[1])["request_id"] == "pw_live_<redacted>" and "AAAA" not in direct.getvalue()
    assert json.loads(raw[2])["path"] == "/boom/Bearer <redacted>" and json.loads(raw[2])["reason"] == "unavailable"


@pytest.mark.parametrize("setup", ["second handler", "filter on the logger", "unmasked formatter", "other class"])
def test_any_other_configuration_gets_records(client, setup):
    handler, stream = service_handler()
    records: list[logging.LogRecord] = []
    collector = logging.Handler()
    collector.emit = records.append  # type: ignore[method-assign]
    handlers: list[logging.Handler] = [handler]
    access = logging.getLogger("paywarden.access")
    if setup == "second handler":
        logging.getLogger("paywarden").addHandler(collector)
    elif setup == "filter on the logger":
        access.addFilter(lambda record: records.append(record) or True)
    elif setup == "unmasked formatter":
        handler.setFormatter(JsonFormatter(redact=False))
        handler.emit = records.append  # type: ignore[method-assign]
    else:
        handlers = [logging.FileHandler("/dev/null")]
        handlers[0].setFormatter(JsonFormatter())
        handlers[0].emit = records.append  # type: ignore[method-assign]
    try:
        with root_handlers(*handlers):
            client.simulate_post("/verify", params={"valid": "1"})
    finally:
        logging.getLogger("paywarden").removeHandler(collector)
        access.filters.clear()
    assert len(records) == 1 and records[0].getMessage() == "POST /verify 200" and records[0].route == "/verify"


def test_a_level_the_loggers_refuse_writes_nothing(client):
    handler, stream = service_handler()
    with root_handlers(handler):
        logging.getLogger("paywarden.access").setLevel(logging.WARNING)
        client.simulate_post("/verify", params={"valid": "1"})
        client.simulate_get("/boom/x")
    assert [json.loads(line)["status"] for line in stream.getvalue().splitlines()] == [503]


def test_a_made_request_id_is_a_uuid4_in_hex():
    made = {requestlog.random_id() for _ in range(1000)}
    assert len(made) == 1000
    for value in made:
        parsed = uuid.UUID(hex=value)
        assert parsed.hex == value and parsed.version == 4 and parsed.variant == uuid.RFC_4122
