"""A WSGI application served on 127.0.0.1 from a background thread (one thread per request), for tests that need
a real listener in process. The raw request path reaches the app as RAW_URI, as gunicorn provides it."""

from __future__ import annotations

import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from tests.services import POLL


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def server_bind(self) -> None:
        """SERVER_NAME is the bound address (wsgiref names it after the host's FQDN), as gunicorn's socket is."""
        super().server_bind()
        self.server_name = str(self.server_address[0])
        self.setup_environ()


class _Handler(WSGIRequestHandler):
    def get_environ(self) -> dict[str, Any]:
        environ = super().get_environ()
        environ["RAW_URI"] = self.path
        return environ

    def log_message(self, *args: Any) -> None:
        pass


class WsgiThread:
    def __init__(self, app: Any) -> None:
        self._server = make_server("127.0.0.1", 0, app, server_class=_Server, handler_class=_Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True)

    def __enter__(self) -> WsgiThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
