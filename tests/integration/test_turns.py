"""Every keep-alive connection takes its turn in a gevent worker (interfaces/runtime/turns.py), over a real socket
to `paywarden serve` (gunicorn, gevent worker): a connection whose next requests are already waiting does not keep
the worker while another connection's request waits."""

from __future__ import annotations

import socket

from tests.integration.test_http_edge import served  # noqa: F401  (the fixture: `paywarden serve` on a free port)

PIPELINED = 400


def answers_in(data: bytes) -> int:
    return data.count(b"HTTP/1.1 200 ")


def test_a_request_is_answered_while_another_connection_has_many_waiting(served):  # noqa: F811
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{served}\r\n\r\n".encode()
    """/healthz: no key, no rate limit, the same answer every time."""
    with socket.create_connection(("127.0.0.1", served), timeout=30) as busy, \
            socket.create_connection(("127.0.0.1", served), timeout=30) as other:
        other.sendall(request)
        assert answers_in(other.recv(65536)) == 1  # both connections are open and served
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)  # its answers never block the worker's send

        busy.sendall(request * PIPELINED)  # all of them waiting at once: the worker never waits to read the next
        received = busy.recv(1 << 21)  # the busy connection is being served
        other.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            answer += other.recv(65536)
        busy.setblocking(False)
        try:
            while chunk := busy.recv(1 << 21):
                received += chunk
        except BlockingIOError:
            pass
        # Answered in its turn: the busy connection had had a few of its answers, not all of them.
        assert answers_in(answer) == 1
        assert answers_in(received) < PIPELINED // 2
