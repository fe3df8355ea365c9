"""`paywarden up` waits for the API and the demo's proxied route through one poll: it returns on the expected
status, and a serving process that exits ends the wait at once with its status."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from interfaces.cli.up import _wait_answer
from interfaces.config import ConfigError
from tests.services import POLL


class _PaymentRequired(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(402)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_wait_returns_once_the_url_answers_the_expected_status():
    server = HTTPServer(("127.0.0.1", 0), _PaymentRequired)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = time.monotonic()
        _wait_answer(f"http://127.0.0.1:{server.server_port}/weather", 402, child, "the proxy")
        assert time.monotonic() - started < 5
    finally:
        child.kill()
        child.wait()
        server.shutdown()


def test_a_serving_process_that_exits_ends_the_wait_with_its_status():
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    child.wait()
    with pytest.raises(ConfigError, match="the proxy on http://127.0.0.1:9 exited at start-up with status 3"):
        _wait_answer("http://127.0.0.1:9/weather", 402, child, "the proxy on http://127.0.0.1:9")
