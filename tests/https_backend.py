"""A real HTTPS server for the outbound and proxy tests, with certificates from a `trustme` test CA.

It records every request it receives (method, path, headers, body) and answers by path:
- `/status/<code>`: that status, a JSON body;
- `/slow/<seconds>`: waits, then answers 200;
- `/redirect`: 302 to `/echo` on the same server;
- `/sse`: `text/event-stream`, chunked; sends one event, waits for `release_stream` (or 10 s), sends another;
- `/big-headers`: 200 with 64 KB of headers;
- `/cookie`: 200 with a `Set-Cookie` and a `PAYMENT-RESPONSE` of its own, echoing the request;
- `/truncated`: 200 with `Content-Length: 100000`, then 10 bytes, then the connection closed;
- a path in `failing` (path → count): 500 that many times (the count goes down), then as any other path;
- anything else: 200 echoing the request as JSON.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import trustme

from tests.services import POLL


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Backend:
    server: ThreadingHTTPServer
    ca: trustme.CA
    received: list[Received] = field(default_factory=list)
    release_stream: threading.Event = field(default_factory=threading.Event)
    failing: dict[str, int] = field(default_factory=dict)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context

    def ca_file(self, directory: Any) -> str:
        path = directory / "backend-ca.pem"
        self.ca.cert_pem.write_to_path(str(path))
        return str(path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


HOSTNAMES = ("localhost", "backend.test", "api.backend.test", "127.0.0.1")


def start_backend(ca: trustme.CA | None = None, host: str = "127.0.0.1", port: int = 0,
                  hostnames: tuple[str, ...] = HOSTNAMES) -> Backend:
    ca = ca or trustme.CA()
    certificate = ca.issue_cert(*hostnames)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(context)
    backend: Backend

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _record(self) -> Received:
            length = int(self.headers.get("Content-Length") or 0)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = self._read_chunked()
            else:
                body = self.rfile.read(length) if length else b""
            seen = Received(self.command, self.path, {k: v for k, v in self.headers.items()}, body)
            backend.received.append(seen)
            return seen

        def _read_chunked(self) -> bytes:
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()

        def _json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            seen = self._record()
            path = seen.path.split("?", 1)[0]
            if backend.failing.get(path, 0) > 0:
                backend.failing[path] -= 1
                self._json(500, {"error": "failing on purpose"})
            elif path.endswith("/truncated"):
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(b"0123456789")
                self.wfile.flush()
                self.close_connection = True
            elif "/status/" in path:
                code = int(path.rsplit("/", 1)[1])
                self._json(code, {"status": code})
            elif "/slow/" in path:
                time.sleep(float(path.rsplit("/", 1)[1]))
                self._json(200, {"slow": True})
            elif path.endswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", f"https://{self.headers.get('Host')}/echo")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path.endswith("/sse"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._chunk(b"data: first\n\n")
                backend.release_stream.wait(10)
                self._chunk(b"data: second\n\n")
                self._chunk(b"")
            elif path.endswith("/cookie"):
                self._json(200, {"headers": seen.headers}, {"Set-Cookie": "upstream_session=abc; Path=/",
                                                            "PAYMENT-RESPONSE": "forged-by-the-upstream"})
            elif path == "/big-headers":
                self.send_response(200)
                for i in range(16):
                    self.send_header(f"X-Big-{i}", "x" * 4096)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._json(200, {"method": seen.method, "path": seen.path, "headers": seen.headers,
                                 "body": seen.body.decode("utf-8", "replace")})

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    backend = Backend(server, ca)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    return backend


class MapResolver:
    """A resolver that answers from a table (the tests' DNS): unknown names do not resolve."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def resolve(self, hostname: str) -> list[str]:
        self.asked.append(hostname)
        return list(self.answers.get(hostname, []))
