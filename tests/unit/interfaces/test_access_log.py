"""gunicorn's access line (interfaces/runtime/access_log.py): not built under the service's logging configuration,
in which `gunicorn.access` writes nothing; built and written as gunicorn builds it once that logger logs at INFO."""

from __future__ import annotations

import logging
import logging.config
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from interfaces.runtime.access_log import AccessLogWhenEnabled
from interfaces.runtime.observability import logging_config


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def service_logging():
    access = logging.getLogger("gunicorn.access")
    saved = (access.level, list(access.handlers), access.propagate, access.disabled)
    logging.config.dictConfig(logging_config("info"))
    yield access
    access.setLevel(saved[0])
    access.handlers[:] = saved[1]
    access.propagate, access.disabled = saved[2], saved[3]


def configured(cls: type) -> Logger:
    cfg = Config()
    cfg.set("logconfig_dict", logging_config("info"))
    return cls(cfg)


def request() -> tuple:
    resp = SimpleNamespace(status="200 OK", response_length=11, sent=11, headers=[])
    req = SimpleNamespace(headers=[("USER-AGENT", "bench")], path="/verify", query="", method="POST",
                          version=(1, 1))
    environ = {"REMOTE_ADDR": "127.0.0.1", "RAW_URI": "/verify", "SERVER_PROTOCOL": "HTTP/1.1",
               "REQUEST_METHOD": "POST", "PATH_INFO": "/verify", "QUERY_STRING": ""}
    return resp, req, environ, SimpleNamespace(seconds=0, microseconds=1500)


def test_the_gunicorn_configuration_uses_it():
    """Read in a process of its own: importing the configuration sets PROMETHEUS_MULTIPROC_DIR, which would turn
    this test process's metrics into another directory's."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    code = "from interfaces.runtime import gunicorn_conf; print(gunicorn_conf.logger_class)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "interfaces.runtime.access_log.AccessLogWhenEnabled"


def test_under_the_service_logging_no_access_line_is_built(service_logging, monkeypatch):
    built = []
    monkeypatch.setattr(Logger, "atoms", lambda self, *a: built.append(a) or {})
    configured(Logger).access(*request())
    assert len(built) == 1  # gunicorn's own logger builds the line it then drops
    configured(AccessLogWhenEnabled).access(*request())
    assert len(built) == 1


def test_an_operator_who_turns_the_access_logger_on_gets_gunicorns_line(service_logging):
    captured, logger = Captured(), configured(AccessLogWhenEnabled)  # (its set-up applies the configuration)
    service_logging.setLevel(logging.INFO)
    service_logging.addHandler(captured)
    logger.access(*request())
    assert len(captured.lines) == 1 and '"POST /verify HTTP/1.1" 200 11' in captured.lines[0]
