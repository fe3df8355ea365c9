"""`paywarden-bench http-floor`: Paywarden's HTTP serving and the reference's, each serving one fixed answer, measured
under the same load (docs/performance.md, "The budget")."""

import json
import subprocess
import sys

from interfaces.bench.http_floor import ANSWER
from tests.faults import free_port


def consecutive_ports(count: int) -> int:
    """The first of `count` free ports in a row (the command puts its servers on `--port` and the ports after it)."""
    while True:
        first = free_port()
        if all(free_port() == first + i for i in range(1, count)):
            return first


def test_each_server_answers_every_request_and_its_cpu_per_request_is_printed():
    port = consecutive_ports(3)
    done = subprocess.run([sys.executable, "-m", "interfaces.bench", "http-floor", "--requests", "300",
                           "--warmup", "30", "--rounds", "2", "--concurrency", "8", "--port", str(port), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"gunicorn + gevent (Paywarden)", "uvicorn (the reference)"} <= set(summary)
    for name, figures in summary.items():
        assert len(figures["runs"]) == 2, name
        for run in figures["runs"]:
            assert run["answers"] == {"200 supported": 300}, (name, run)
            assert run["cpu_ms"] > 0, (name, run)  # the server's own processes spent CPU on the requests
        assert f"{name}: median {figures['cpu_ms_median']} ms of CPU per request" in done.stdout


def test_both_servers_answer_the_same_bytes():
    """The comparison is fair only if both send the same answer: the WSGI and the ASGI app share one body."""
    import asyncio

    from interfaces.bench.http_floor import asgi_app, wsgi_app

    started = []
    body = b"".join(wsgi_app({}, lambda status, headers: started.append((status, headers))))
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(asgi_app({"type": "http"}, None, send))
    assert body == sent[1]["body"] == ANSWER
    assert json.loads(ANSWER)["kinds"]  # the bench's client counts it as a /supported answer
    assert started[0][0] == "200 OK" and sent[0]["status"] == 200
    assert dict(started[0][1]) == {k.decode().title(): v.decode() for k, v in sent[0]["headers"]}


def test_a_server_that_cannot_start_is_named_in_one_line(monkeypatch, capsys):
    """A server that exits at start-up (a port taken, say): the command says which one and exits 2."""
    import argparse

    from interfaces.bench import http_floor as bench_http_floor

    monkeypatch.setattr(bench_http_floor, "servers", lambda port, data_dir: {
        "a server that exits": ([sys.executable, "-c", "raise SystemExit(3)"], {}, f"http://127.0.0.1:{port}")})
    args = argparse.Namespace(requests=10, warmup=0, rounds=1, concurrency=2, port=consecutive_ports(1), json=False)
    assert bench_http_floor.run(args) == 2
    assert capsys.readouterr().err == "paywarden-bench http-floor: a server that exits exited with status 3\n"
