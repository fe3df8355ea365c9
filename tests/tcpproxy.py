"""A TCP forwarder a test can cut and restore, so a real service (PostgreSQL, Redis, an RPC node) goes down and
comes back on the same address without touching the service itself."""

from __future__ import annotations

import socket
import threading


class TcpProxy:
    """127.0.0.1:`port` → `target`. `stop()` refuses new connections and cuts live ones; `start()` serves again."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._lock, self._sockets = threading.Lock(), set()
        self._listener: socket.socket | None = None
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()

    def url(self, scheme: str, path: str = "", userinfo: str = "") -> str:
        return f"{scheme}://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}{path}"

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        with self._lock:
            doomed, self._sockets = [*self._sockets, self._listener], set()
            self._listener = None
        for sock in doomed:
            if sock is not None:
                _close(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:  # stopped meanwhile
                    _close(client), _close(upstream)
                    return
                self._sockets |= {client, upstream}
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(src, dst), daemon=True).start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
