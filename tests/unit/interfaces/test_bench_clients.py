"""The benchmarks' one way to run their clients: `concurrency` threads at once, the wall time of all of them in the
report; `paywarden-bench history`'s discovery queries go through it and count every answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from interfaces.bench.history import _queries
from interfaces.cli.bench import Report, drive, run_clients
from tests.services import POLL


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A local HTTP server answering with `handler`, on a thread, for the block: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def test_the_clients_run_at_once_and_the_report_holds_their_wall_time():
    report, running, most = Report("test", 4, 4, 0.0), [0], [0]
    lock = threading.Lock()

    def client() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1

    assert run_clients(client, 4, report) is report
    assert most[0] == 4  # all four at once, not one after the other
    assert 0.2 <= report.seconds < 0.8


class _Catalog(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        status = 200 if self.path.startswith("/discovery/") else 404
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def test_the_discovery_queries_count_every_answer_by_status():
    paths = ["/discovery/resources?limit=1"] * 7 + ["/elsewhere"] * 3
    with serving(_Catalog) as base_url:
        report = _queries({"base_url": base_url}, paths, 3)
    assert dict(report.answers) == {"200": 7, "404": 3}
    assert len(report.latencies_ms) == 10 and report.seconds > 0


class _Verifier(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b'{"isValid": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_drive_counts_the_answers_each_client_got():
    """What shows a server passing connections over: the spread of answers per client, beside the percentiles."""
    with serving(_Verifier) as base_url:
        report = drive([b"{}"] * 30, base_url=base_url, api_key="k", op="verify", concurrency=3, timeout=5,
                       progress=False)
    assert report.answers == {"200 valid": 30}
    assert len(report.per_client) == 3 and sum(report.per_client) == 30
    figures = report.as_dict()
    assert figures["per_client_min"] == min(report.per_client) and figures["per_client_max"] == max(report.per_client)
    assert f"per client  {figures['per_client_min']} to {figures['per_client_max']} answers" in report.text()


class _Supported(_Verifier):
    """Answers `GET /supported` with its kinds; any other request with a 404."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = b'{"kinds": [], "extensions": [], "signers": {}}' if self.path == "/supported" else b'{"error": "no"}'
        self.send_response(200 if self.path == "/supported" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_drive_with_op_supported_sends_a_get_of_supported_for_each_body():
    """`paywarden-bench reference --op supported`: the server's cost per request without a payment; no body
    is posted."""
    with serving(_Supported) as base_url:
        report = drive([b""] * 12, base_url=base_url, api_key="k", op="supported", concurrency=3, timeout=5,
                       progress=False)
    assert report.answers == {"200 supported": 12}  # a POST would have been answered isValid, a wrong path 404
