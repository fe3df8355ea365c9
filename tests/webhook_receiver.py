"""A real HTTPS webhook receiver for the tests: a threaded server on 127.0.0.1 with a trustme certificate for
`localhost`, answering from a script (status, delay, headers) and verifying every delivery with the
`standardwebhooks` package, unchanged, against the secrets it is told."""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import standardwebhooks
import trustme

from tests.services import POLL


@dataclass
class Delivery:
    headers: dict[str, str]
    body: str
    verified_with: list[str]  # which of the known secrets verified it
    payload: Any
    at: float = 0.0  # time.monotonic() when it arrived


@dataclass
class Receiver:
    url: str
    ca_file: str
    secrets: list[str] = field(default_factory=list)
    script: list[tuple[int, float, dict[str, str]]] = field(default_factory=list)  # answers, then 200s
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, *answers: int | tuple[int, float] | tuple[int, float, dict[str, str]]) -> None:
        for a in answers:
            status, delay, headers = (a, 0.0, {}) if isinstance(a, int) else (*a, {})[:3]
            self.script.append((status, delay, headers))

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Delivery]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.deliveries) >= count:
                    return list(self.deliveries)
            time.sleep(0.02)
        raise AssertionError(f"{len(self.deliveries)} deliveries after {timeout} s, expected {count}")


def _verify(secrets: list[str], body: str, headers: dict[str, str]) -> tuple[list[str], Any]:
    verified, payload = [], None
    for secret in secrets:
        try:
            payload = standardwebhooks.Webhook(secret).verify(body, headers)
            verified.append(secret)
        except standardwebhooks.webhooks.WebhookVerificationError:
            pass
    return verified, payload


def start_receiver(tmp_path: Path) -> tuple[Receiver, ThreadingHTTPServer]:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    ca_file = tmp_path / "receiver-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(context)

    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            receiver = holder["r"]
            body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
            headers = {k.lower(): v for k, v in self.headers.items()}
            with receiver.lock:
                status, delay, extra = receiver.script.pop(0) if receiver.script else (200, 0.0, {})
                verified, payload = _verify(receiver.secrets, body, headers)
                receiver.deliveries.append(Delivery(headers, body, verified, payload, time.monotonic()))
            time.sleep(delay)
            reply = b'{"ok":true}' if status < 300 else b'{"error":"try later"}'
            try:
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
            except OSError:  # the sender gave up (timeout) and closed the connection
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    holder["r"] = Receiver(f"https://localhost:{server.server_address[1]}/hooks/paywarden", str(ca_file))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL}, name="webhook-receiver",
                     daemon=True).start()
    return holder["r"], server


@dataclass
class Trickler:
    """A receiver that reads a request, then sends `HTTP/1.1 200 OK ...` one byte every `pause` seconds (the
    whole answer would take minutes): it never makes a read wait long, and never finishes in time."""

    url: str
    pause: float
    open_now: int = 0  # connections being trickled to at this moment
    most_open: int = 0  # the most at once
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


ANSWER = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Slow-%d: %s\r\n" % (i, b"y" * 40) for i in range(20)) + \
    b"Content-Length: 2\r\n\r\nok"
SLOW_BODY = b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n", b"x" * 2000


def start_trickler(pause: float = 1.0, *, tls: ssl.SSLContext | None = None,
                   body_only: bool = False) -> tuple[Trickler, socket.socket]:
    """Plain HTTP on 127.0.0.1 (the sandbox allows it), or HTTPS with `tls` (a server context for `localhost`);
    with `body_only` the status line and headers come at once and the body trickles. Close the returned socket and
    set `stopping` to end it."""
    listener = socket.create_server(("127.0.0.1", 0))
    scheme, host = ("https", "localhost") if tls else ("http", "127.0.0.1")
    trickler = Trickler(f"{scheme}://{host}:{listener.getsockname()[1]}/hook", pause)
    at_once, trickled = SLOW_BODY if body_only else (b"", ANSWER)

    def serve(raw: socket.socket) -> None:
        with trickler.lock:
            trickler.requests += 1
            trickler.open_now += 1
            trickler.most_open = max(trickler.most_open, trickler.open_now)
        conn = raw
        try:
            raw.settimeout(5)
            conn = tls.wrap_socket(raw, server_side=True) if tls else raw
            received = b""
            while b"\r\n\r\n" not in received:
                received += conn.recv(65536) or b"\r\n\r\n"
            head, _, body = received.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length and (more := conn.recv(65536)):
                body += more
            conn.sendall(at_once)
            for byte in trickled:
                readable, _, _ = select.select([conn], [], [], pause)
                if trickler.stopping.is_set() or (readable and not conn.recv(1)):
                    break  # stopped, or the sender closed the connection (seen at once, not at the next byte)
                conn.sendall(bytes([byte]))
        except OSError:
            pass  # the sender gave up and closed the connection
        finally:
            conn.close()
            with trickler.lock:
                trickler.open_now -= 1

    def accept() -> None:
        while not trickler.stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, name="trickler", daemon=True).start()
    return trickler, listener
