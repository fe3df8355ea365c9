"""The localnet: the sandbox chain served as Solana JSON-RPC 2.0, so clients written for devnet work as is.

`POST /` answers the `rpc_*` methods of `_Rpc` with a validator's response shapes and error codes (-32700
parse error, -32600 invalid request, -32601 method not found, -32602 invalid params, -32002 preflight failure
carrying `data.err` and `data.logs`, -32003 signature verification failure), batches included; `GET /health`
answers "ok". `POST /faucet` with `{"address": ..., "usdc": "10", "sol": "1"}` airdrops SOL and mints test
USDC (those amounts when neither is given). A ticker advances one slot every `slot_ms`, so blockhashes expire
after 150 slots as on a cluster; with `slot_ms=None` the caller drives `sandbox.advance()`. `LocalnetServer`
serves it on one thread (`http11.py`); `up` with one API worker serves the same app from the worker's gunicorn
(`localnet_host.py`).
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import socketserver
import sys
import threading
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

import falcon
from solders.pubkey import Pubkey

from interfaces.sandbox.chain import Sandbox
from interfaces.sandbox.http11 import Http11Connection
from interfaces.sandbox.localnet_rpc import (
    DEVNET_GENESIS_HASH,
    MAX_AIRDROP_LAMPORTS,
    MAX_BODY_BYTES,
    MAX_FAUCET_USDC,
    _Rpc,
)


class RpcResource:
    """`POST /`: one JSON-RPC request or a batch; always HTTP 200, as a validator answers."""

    def __init__(self, rpc: _Rpc) -> None:
        self._rpc = rpc

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = req.bounded_stream.read(MAX_BODY_BYTES + 1)
        try:
            payload = json.loads(body) if len(body) <= MAX_BODY_BYTES else None
        except ValueError:
            answer: Any = {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}
        else:
            if isinstance(payload, list) and payload:  # a batch ([] is invalid)
                answer = [self._rpc.handle(one) for one in payload]
            else:
                answer = self._rpc.handle(payload or None)
        resp.content_type, resp.text = falcon.MEDIA_JSON, json.dumps(answer)


class HealthResource:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type, resp.text = falcon.MEDIA_TEXT, "ok"


class FaucetRequestError(ValueError):
    """A faucet request that cannot be honoured as asked."""


class FaucetResource:
    """`POST /faucet`: SOL by airdrop and test USDC minted into the address's associated token account."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            body = json.loads(req.bounded_stream.read(MAX_BODY_BYTES) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise FaucetRequestError("the body must be a JSON object")
        address = body.get("address")
        try:
            if not isinstance(address, str):
                raise TypeError(address)
            Pubkey.from_string(address)
        except (ValueError, TypeError):
            raise FaucetRequestError("address must be a base58 Solana address") from None
        if "usdc" not in body and "sol" not in body:
            body = {**body, "usdc": "10", "sol": "1"}
        decimals = self._sandbox.usdc_decimals
        usdc = _amount(body.get("usdc", 0), "usdc", decimals, MAX_FAUCET_USDC)
        sol = _amount(body.get("sol", 0), "sol", 9, Decimal(MAX_AIRDROP_LAMPORTS).scaleb(-9))
        if not usdc and not sol:
            raise FaucetRequestError("nothing to fund: usdc and sol are both zero")
        lamports, atomic = int(sol.scaleb(9)), int(usdc.scaleb(decimals))
        signatures = [self._sandbox.airdrop(address, lamports)] if lamports else []
        signatures += [self._sandbox.mint_usdc(address, atomic)] if atomic else []
        resp.media = {"address": address, "sol": format(sol.normalize(), "f"), "lamports": lamports,
                      "usdc": format(usdc.normalize(), "f"), "usdcAtomic": str(atomic),
                      "mint": self._sandbox.usdc_mint, "signatures": signatures}


def _amount(value: Any, name: str, decimals: int, cap: Decimal) -> Decimal:
    try:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise InvalidOperation
        amount = Decimal(str(value))
    except InvalidOperation:
        raise FaucetRequestError(f'{name} must be a decimal amount such as "1.5"') from None
    if not amount.is_finite() or not 0 <= amount <= cap:
        raise FaucetRequestError(f"{name} must be between 0 and {cap}")
    if amount != amount.quantize(Decimal(1).scaleb(-decimals)):
        raise FaucetRequestError(f"{name} has more than {decimals} decimal places")
    return amount


def _faucet_error(req: falcon.Request, resp: falcon.Response, exc: FaucetRequestError, params: dict) -> None:
    resp.status, resp.media = falcon.HTTP_400, {"error": "invalid_request", "message": str(exc)}


def create_localnet_app(sandbox: Sandbox, *, genesis_hash: str = DEVNET_GENESIS_HASH) -> falcon.App:
    app = falcon.App()
    app.add_route("/", RpcResource(_Rpc(sandbox, genesis_hash)))
    app.add_route("/health", HealthResource())
    app.add_route("/faucet", FaucetResource(sandbox))
    app.add_error_handler(FaucetRequestError, _faucet_error)
    return app


class ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    """wsgiref's server, a thread per connection: the sandbox's small apps (`up`'s example merchant API and demo
    backend) and tests' servers. The localnet itself is served by `LocalnetServer`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the default backlog of 5 leaves a burst of clients waiting on SYN retries


class QuietHandler(WSGIRequestHandler):
    """HTTP/1.1 with keep-alive: wsgiref answers one request per connection, and a new TCP connection for
    every call costs more than the call itself."""

    protocol_version = "HTTP/1.1"
    # wsgiref writes the status line, the headers and the body one by one, and flushes after the body: buffered,
    # an answer leaves in one send instead of three (three segments, three wake-ups of the client).
    wbufsize = 1 << 16

    def setup(self) -> None:
        super().setup()
        # Without this, Nagle's algorithm and the client's delayed ACK would hold an answer larger than the buffer,
        # sent in parts, for 40 ms on a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        while True:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.send_error(414)
                return
            if not self.raw_requestline or not self.parse_request():
                return
            # typeshed gaps: rfile is the IO[bytes] wsgiref reads; request_handler is its logging back-pointer.
            handler = ServerHandler(self.rfile, self.wfile, self.get_stderr(),  # type: ignore[arg-type]
                                    self.get_environ(), multithread=True)
            handler.request_handler = self  # type: ignore[attr-defined]
            handler.http_version = "1.1"
            app = cast(WSGIServer, self.server).get_app()
            assert app is not None, "the localnet server always has its app"
            handler.run(app)
            self.wfile.flush()  # an answer without a body is not flushed by wsgiref
            if self.close_connection:
                return

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass


class LocalnetServer:
    """The localnet bound to `host:port` (0 picks a free port); `serve_forever` blocks until `shutdown`.

    One thread serves every connection: `serve_forever` runs an asyncio loop of its own with the HTTP/1.1
    server of `http11.py` (wsgiref's server took a thread per kept-alive connection; docs/performance.md)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8899, sandbox: Sandbox | None = None, *,
                 slot_ms: int | None = 400) -> None:
        self.sandbox = sandbox or Sandbox()
        self._app = create_localnet_app(self.sandbox)
        # Bound here, so that a port in use fails the constructor.
        self._socket = socket.create_server((host, port), backlog=128)
        port = self._socket.getsockname()[1]
        self.url = f"http://{host}:{port}"
        self._environ = {"SERVER_NAME": host, "SERVER_PORT": str(port), "SCRIPT_NAME": "", "wsgi.version": (1, 0),
                         "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr, "wsgi.multithread": False,
                         "wsgi.multiprocess": False, "wsgi.run_once": False}
        self._slot_ms, self._stopped = slot_ms, threading.Event()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None  # while serving

    def serve_forever(self) -> None:
        if self._slot_ms:
            threading.Thread(target=self._tick, name="localnet-ticker", daemon=True).start()
        loop, connections = asyncio.new_event_loop(), set[Http11Connection]()
        server = loop.run_until_complete(loop.create_server(
            lambda: Http11Connection(self._app, self._environ, connections, max_body=MAX_BODY_BYTES),
            sock=self._socket))
        try:
            with self._lock:
                self._loop = None if self._stopped.is_set() else loop
            if self._loop is not None:
                loop.run_forever()  # until `shutdown` stops it (or a signal's KeyboardInterrupt)
        finally:
            with self._lock:
                self._stopped.set()
                self._loop = None
            server.close()  # the listener
            for connection in list(connections):
                connection.close()
            loop.run_until_complete(server.wait_closed())  # one more turn of the loop closes the connections
            loop.close()

    def shutdown(self) -> None:
        """Stop serving (from any thread): the listener and every connection closed."""
        with self._lock:
            self._stopped.set()
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)

    def _tick(self) -> None:
        while self._slot_ms and not self._stopped.wait(self._slot_ms / 1000):
            self.sandbox.advance()


def serve_localnet(
    host: str = "127.0.0.1", port: int = 8899, sandbox: Sandbox | None = None, *, slot_ms: int | None = 400,
    on_ready: Callable[[LocalnetServer], None] | None = None,
) -> None:
    """Serve until SIGINT (Ctrl-C) or SIGTERM, then return; `on_ready` gets the bound server, its `url` and
    `sandbox`. Both signals are handled explicitly: a process started with SIGINT ignored (a background job of a
    script: `paywarden localnet &`) would otherwise never stop on it, and SIGTERM would skip the clean stop."""
    server = LocalnetServer(host, port, sandbox, slot_ms=slot_ms)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.default_int_handler)  # raises KeyboardInterrupt in serve_forever
    try:  # a signal may land as soon as on_ready has said where the localnet listens
        if on_ready is not None:
            on_ready(server)
        server.serve_forever()
    except KeyboardInterrupt:
        pass


class LocalnetThread:
    """`with LocalnetThread() as net:` serves on 127.0.0.1 on a free port in a background thread."""

    def __init__(self, sandbox: Sandbox | None = None, *, slot_ms: int | None = 400) -> None:
        self._server = LocalnetServer("127.0.0.1", 0, sandbox, slot_ms=slot_ms)
        self.url, self.sandbox = self._server.url, self._server.sandbox
        self._thread = threading.Thread(target=self._server.serve_forever, name="localnet", daemon=True)

    def __enter__(self) -> LocalnetThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
