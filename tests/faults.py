"""Faults on demand: a TCP proxy that can be cut and restored, and a private Redis server that can be stopped.

The shared PostgreSQL and Redis of the machine are never stopped: a test points Paywarden at a proxy in front of
PostgreSQL (or at its own `redis-server`) and breaks that instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from tests.services import POLL


class _Ports:
    """Ports for the servers a test starts, from below the kernel's ephemeral range (32768 and up here), one block
    per pytest-xdist worker, handed out in turn. A port the kernel picks (`bind(("", 0))`) is one an outgoing
    connection of the other worker can take before our server binds it, and it can come back twice in a row: `up`
    then stopped on "already in use" before writing anything (stop 34's CI)."""

    SIZE = 4000
    handed = 0


def free_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = 12000 + (int(worker) % 5 if worker.isdigit() else 0) * _Ports.SIZE  # 12000-31999: below 32768
    for _ in range(_Ports.SIZE):
        port = first + _Ports.handed % _Ports.SIZE
        _Ports.handed += 1
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as our servers bind
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in this worker's block")


def wait_until(condition, timeout: float = 10.0, interval: float = 0.05, what: str = "condition") -> None:
    """Poll `condition` until it is true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(interval)


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target`. `cut()` refuses new connections and resets the open ones, as a
    dead server or a broken network does; `restore()` serves again on the same port."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> TcpProxy:
        self.restore()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            for s in self._open:
                # shutdown first: a pump blocked in recv() on the socket holds it open through close() (Linux
                # closes a socket only when no call uses it), so a connection waiting for an answer was left
                # established and its client waited forever; shutdown wakes the pump, and close then resets.
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class PrivateRedis:
    """A `redis-server` of the test's own, without persistence: on a free port, or (`unix=True`) on a Unix socket
    only (`unix:///…?db=0`, a URL the configuration accepts as redis-py reads it)."""

    def __init__(self, directory: Path, *, unix: bool = False) -> None:
        self.port, self._dir = free_port(), directory
        # sun_path holds 108 bytes: the socket lives in a short directory of its own, not under pytest's tmp_path
        self.socket = Path(tempfile.mkdtemp(prefix="pw-redis-")) / "redis.sock" if unix else None
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}?db=0" if self.socket else f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        listen = ["--port", "0", "--unixsocket", str(self.socket)] if self.socket else [
            "--port", str(self.port), "--bind", "127.0.0.1"]
        self._process = subprocess.Popen(
            [binary, *listen, "--save", "", "--appendonly", "no", "--dir", str(self._dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._answers, what=f"redis-server at {self.url}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            self._process = None
        if self.socket is not None:
            shutil.rmtree(self.socket.parent, ignore_errors=True)

    def _answers(self) -> bool:
        try:
            with self._connect() as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def _connect(self) -> socket.socket:
        if self.socket is None:
            return socket.create_connection(("127.0.0.1", self.port), timeout=0.5)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(0.5)
        try:
            s.connect(str(self.socket))
        except OSError:
            s.close()
            raise
        return s

    def __enter__(self) -> PrivateRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RpcProxy:
    """A JSON-RPC proxy in front of a Solana RPC (the localnet) that breaks broadcasts on demand.

    - `drop[method] = n`: the next n requests of that method are lost (the connection closes with no answer, as
      when a broadcast is lost on the way);
    - `hold_broadcast()`: the next sendTransaction is forwarded, its signature noted, `broadcast` set, and its
      answer kept back until `release` is set (the transaction landed; its sender has not heard yet);
    - `delay[method] = seconds`: every answer of that method is sent that much later (forwarded at once).
    `sends` lists the signatures of the forwarded broadcasts, `seen` counts requests by method."""

    def __init__(self, target_url: str, drop: dict[str, int] | None = None) -> None:
        import http.server
        import json
        import urllib.request

        self.target, self.drop, self.seen, self.sends = target_url, dict(drop or {}), {}, []
        self.delay: dict[str, float] = {}
        self.broadcast, self.release, self._armed = threading.Event(), threading.Event(), False
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                method = json.loads(body).get("method", "")
                with proxy._lock:
                    proxy.seen[method] = proxy.seen.get(method, 0) + 1
                    lost = proxy.drop.get(method, 0) > 0
                    if lost:
                        proxy.drop[method] -= 1
                if lost:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                request = urllib.request.Request(proxy.target, body, {"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=10) as upstream:
                    answer = upstream.read()
                if pause := proxy.delay.get(method):
                    time.sleep(pause)
                if method == "sendTransaction":
                    proxy.sends.append(json.loads(answer).get("result"))
                    if proxy._armed:
                        proxy._armed = False
                        proxy.broadcast.set()
                        proxy.release.wait(30)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()

    def __enter__(self) -> RpcProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def hold_broadcast(self) -> None:
        self.broadcast.clear()
        self.release.clear()
        self._armed = True

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
