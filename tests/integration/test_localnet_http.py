"""The localnet's own HTTP/1.1 server (interfaces/sandbox/http11.py) over raw sockets: what wsgiref's server did for
its clients, on one thread, and what it refuses."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from solders.keypair import Keypair

from interfaces.sandbox.http11 import MAX_HEAD
from interfaces.sandbox.localnet import LocalnetServer, LocalnetThread
from interfaces.sandbox.localnet_rpc import MAX_BODY_BYTES


@pytest.fixture
def net() -> Iterator[LocalnetThread]:
    with LocalnetThread(slot_ms=None) as net:
        yield net


def connect(net: LocalnetThread) -> socket.socket:
    host, port = net.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def post(body: bytes, *headers: str, path: str = "/") -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: localnet", "Content-Type: application/json", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def call(n: int, method: str = "getSlot") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": method}).encode()


def read_answer(sock: socket.socket, buffered: bytearray) -> tuple[str, dict[str, str], bytes]:
    """One answer off the connection (status line, headers by lower-case name, body); the rest stays buffered."""
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        assert chunk, f"closed before an answer: {bytes(buffered)!r}"
        buffered += chunk
    head, _, _ = bytes(buffered).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    start, length = len(head) + 4, int(headers.get("content-length", "0"))
    while len(buffered) < start + length:
        buffered += sock.recv(65536)
    body = bytes(buffered[start:start + length])
    del buffered[:start + length]
    return lines[0], headers, body


def closed(sock: socket.socket) -> bool:
    return sock.recv(1) == b""


def test_pipelined_calls_on_one_connection_are_answered_in_order(net):
    with connect(net) as sock:
        sock.sendall(b"".join(post(call(n)) for n in range(5)))  # five requests in one segment
        buffered = bytearray()
        answers = [read_answer(sock, buffered) for _ in range(5)]
    assert [status for status, _, _ in answers] == ["HTTP/1.1 200 OK"] * 5
    assert [json.loads(body)["id"] for _, _, body in answers] == [0, 1, 2, 3, 4]
    assert all(headers["content-type"] == "application/json" and "date" in headers for _, headers, _ in answers)


def test_after_an_answer_that_closes_the_connection_nothing_pipelined_is_run(net):
    wallet = str(Keypair().pubkey())
    airdrop = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "requestAirdrop", "params": [wallet, 10**9]})
    with connect(net) as sock:
        sock.sendall(post(call(1), "Connection: close") + post(airdrop.encode()))
        buffered = bytearray()
        status, headers, body = read_answer(sock, buffered)
        assert json.loads(body)["id"] == 1 and headers["connection"] == "close"
        assert closed(sock) and not buffered
    assert net.sandbox.sol_balance(wallet) == 0  # the airdrop after it never ran


def test_a_request_arriving_in_pieces_is_answered_once_complete(net):
    request = post(call(7))
    with connect(net) as sock:
        for piece in (request[:10], request[10:40], request[40:-5], request[-5:]):
            sock.sendall(piece)
            time.sleep(0.02)  # each piece its own segment
        status, _, body = read_answer(sock, bytearray())
    assert status == "HTTP/1.1 200 OK" and json.loads(body)["id"] == 7


def test_expect_100_continue_gets_its_interim_answer_before_the_body_is_sent(net):
    body = call(3, "getHealth")
    with connect(net) as sock:
        sock.sendall(post(body, "Expect: 100-continue")[:-len(body)])
        buffered = bytearray()
        assert read_answer(sock, buffered)[0] == "HTTP/1.1 100 Continue"
        sock.sendall(body)
        status, _, answer = read_answer(sock, buffered)
    assert status == "HTTP/1.1 200 OK" and json.loads(answer) == {"jsonrpc": "2.0", "result": "ok", "id": 3}


@pytest.mark.parametrize(("request_bytes", "status"), [
    (post(b"", f"Content-Length: {MAX_BODY_BYTES + 1}"), "413 Request Entity Too Large"),
    (post(b"%x\r\n%s\r\n0\r\n\r\n" % (MAX_BODY_BYTES + 1, b" " * (MAX_BODY_BYTES + 1)),
          "Transfer-Encoding: chunked"), "413 Request Entity Too Large"),
    (post(b"{}", "Content-Length: two"), "400 Bad Request"),
    (b"GARBAGE\r\n\r\n", "400 Bad Request"),
    (b"GET / HTTP/1.1\r\nX-Long: " + b"a" * MAX_HEAD, "431 Request Header Fields Too Large"),
], ids=["too-large", "too-large-chunked", "bad-length", "bad-request-line", "head-too-large"])
def test_what_the_server_does_not_take_is_answered_and_the_connection_closed(net, request_bytes, status):
    with connect(net) as sock:
        sock.sendall(request_bytes)
        answer, headers, _ = read_answer(sock, bytearray())
        assert answer == f"HTTP/1.1 {status}" and headers["connection"] == "close"
        assert closed(sock)
    with connect(net) as sock:  # and the server serves on
        sock.sendall(post(call(1)))
        assert read_answer(sock, bytearray())[0] == "HTTP/1.1 200 OK"


def test_a_chunked_body_is_read_and_answered(net):
    body = call(4, "getHealth")
    with connect(net) as sock:
        sock.sendall(post(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body), "Transfer-Encoding: chunked"))
        status, _, answer = read_answer(sock, bytearray())
    assert status == "HTTP/1.1 200 OK" and json.loads(answer) == {"jsonrpc": "2.0", "result": "ok", "id": 4}


def test_a_body_of_the_rpc_limit_is_read_and_answered_in_json_rpc(net):
    body = b" " * (MAX_BODY_BYTES - len(call(9))) + call(9)
    with connect(net) as sock:
        sock.sendall(post(body))
        status, _, answer = read_answer(sock, bytearray())
    assert status == "HTTP/1.1 200 OK" and json.loads(answer)["result"] == 0


@pytest.mark.parametrize(("version", "connection", "closes"), [
    ("HTTP/1.1", None, False), ("HTTP/1.1", "close", True), ("HTTP/1.0", None, True),
    ("HTTP/1.0", "keep-alive", True)])  # h11 keeps no HTTP/1.0 connection alive
def test_the_connection_is_kept_or_closed_as_the_client_asks(net, version, connection, closes):
    head = f"GET /health {version}\r\nHost: localnet\r\n" + (f"Connection: {connection}\r\n" if connection else "")
    with connect(net) as sock:
        sock.sendall(head.encode() + b"\r\n")
        status, headers, body = read_answer(sock, bytearray())
        assert status == "HTTP/1.1 200 OK" and body == b"ok"
        assert (headers.get("connection") == "close") is closes
        if closes:
            assert closed(sock)
        else:
            sock.sendall(head.encode() + b"\r\n")
            assert read_answer(sock, bytearray())[2] == b"ok"


def test_shutdown_from_another_thread_closes_the_listener_and_every_kept_alive_connection():
    server = LocalnetServer("127.0.0.1", 0, slot_ms=None)
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.sendall(post(call(1)))
    assert read_answer(sock, bytearray())[0] == "HTTP/1.1 200 OK"

    server.shutdown()
    serving.join(timeout=2)

    assert not serving.is_alive()
    assert closed(sock)
    sock.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=1)
