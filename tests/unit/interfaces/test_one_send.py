"""gunicorn's answer, headers and body, in one send (interfaces/runtime/one_send.py), on gunicorn's own Response."""

from __future__ import annotations

from types import SimpleNamespace

from gunicorn.config import Config
from gunicorn.http.wsgi import Response

from interfaces.runtime.one_send import hold_headers_for_the_body


class Socket:
    def __init__(self) -> None:
        self.sends: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sends.append(data)


def response(method: str = "POST") -> tuple[Response, Socket]:
    hold_headers_for_the_body()
    sock = Socket()
    req = SimpleNamespace(version=(1, 1), method=method, should_close=lambda: False, headers=[])
    return Response(req, sock, Config()), sock


def test_headers_and_a_body_go_in_one_send():
    resp, sock = response()
    write = resp.start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "11")])
    write(b'{"ok": true}'[:11])
    resp.close()
    assert len(sock.sends) == 1
    head, _, body = sock.sends[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"Content-Length: 11" in head and body == b'{"ok": true'


def test_an_answer_without_a_body_still_gets_its_headers():
    resp, sock = response("HEAD")
    resp.start_response("204 No Content", [])
    resp.close()
    assert len(sock.sends) == 1 and sock.sends[0].startswith(b"HTTP/1.1 204 No Content")
