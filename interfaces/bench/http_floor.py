"""`paywarden-bench http-floor`: what the HTTP server alone costs per request, Paywarden's beside the reference's.

One trivial application (a fixed `GET /supported`-sized JSON answer, no framework, no store, no key) is served by
Paywarden's serving (docs/architecture.md: gunicorn with a gevent worker, `interfaces.runtime.gunicorn_conf`: its
turn after each answer, its logger) and by the reference facilitator's (uvicorn with uvloop and httptools, no access
log), and, when it is installed (it is no dependency of Paywarden's), by granian (a server whose HTTP is Rust, one
worker, the WSGI application on one Python thread). Each gets the same load (`interfaces.cli.bench.drive`: 32
keep-alive clients by default), rounds alternating, and the CPU of each server's processes per request is printed:
the part of every request's cost that no change to Paywarden's own code can remove (docs/performance.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from interfaces.bench.processes import cpu_delta, stop_child, tree_cpu, wait_answering
from interfaces.cli.bench import drive

FEE_PAYER = "F" * 44
ANSWER = json.dumps({"kinds": [{"x402Version": 2, "scheme": "exact", "network": "solana:" + "5" * 32,
                                "extra": {"feePayer": FEE_PAYER}}],
                     "extensions": [], "signers": {"solana:*": [FEE_PAYER]}}, separators=(",", ":")).encode()
HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(ANSWER)))]


def wsgi_app(environ: dict, start_response: Any) -> Iterable[bytes]:
    start_response("200 OK", HEADERS)
    return [ANSWER]


async def asgi_app(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(name.lower().encode(), value.encode()) for name, value in HEADERS]})
    await send({"type": "http.response.body", "body": ANSWER})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=20000, help="GET requests per run (default 20000)")
    p.add_argument("--warmup", type=int, default=2000, help="requests sent first to each, not counted (2000)")
    p.add_argument("--rounds", type=int, default=3, help="runs of each server, alternating (default 3)")
    p.add_argument("--concurrency", type=int, default=32, help="concurrent keep-alive clients (default 32)")
    p.add_argument("--port", type=int, default=8480, help="the first of the servers' ports (default 8480)")
    p.add_argument("--json", action="store_true", help="also print the summary as one JSON line")


def servers(port: int, data_dir: Path) -> dict[str, tuple[list[str], dict[str, str], str]]:
    """Each server's command line, environment and URL, by the name printed."""
    me = "interfaces.bench.http_floor"
    made = {
        "gunicorn + gevent (Paywarden)": (
            [sys.executable, "-m", "gunicorn", "--config", "python:interfaces.runtime.gunicorn_conf", f"{me}:wsgi_app"],
            {"PAYWARDEN_BIND": f"127.0.0.1:{port}", "PAYWARDEN_WORKERS": "1", "PAYWARDEN_CONSOLE_BIND": "",
             "PAYWARDEN_LOCALNET_BIND": "", "PAYWARDEN_DATA_DIR": str(data_dir), "PAYWARDEN_LOG_LEVEL": "warning"},
            f"http://127.0.0.1:{port}"),
        "uvicorn (the reference)": (
            [sys.executable, "-m", "uvicorn", f"{me}:asgi_app", "--host", "127.0.0.1", "--port", str(port + 1),
             "--log-level", "warning", "--no-access-log"], {}, f"http://127.0.0.1:{port + 1}"),
    }
    if importlib.util.find_spec("granian") is not None:
        made["granian (WSGI, 1 thread)"] = (
            [sys.executable, "-m", "granian", "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port + 2),
             "--workers", "1", "--blocking-threads", "1", "--no-ws", "--log-level", "warning", f"{me}:wsgi_app"], {},
            f"http://127.0.0.1:{port + 2}")
    return made


def run(args: argparse.Namespace) -> int:
    try:
        rows = _measure(args)
    except RuntimeError as failed:  # a server that did not start: one line, not a traceback
        print(f"paywarden-bench http-floor: {failed}", file=sys.stderr)
        return 2
    summary = {name: {"cpu_ms_median": round(statistics.median(r["cpu_ms"] for r in runs), 4),
                      "throughput_median": round(statistics.median(r["throughput"] for r in runs), 1), "runs": runs}
               for name, runs in rows.items()}
    for name, figures in summary.items():
        print(f"{name}: median {figures['cpu_ms_median']} ms of CPU per request, {figures['throughput_median']} /s")
    if args.json:
        print(json.dumps(summary))
    clean = all(r["answers"] == {"200 supported": args.requests} for runs in rows.values() for r in runs)
    if not clean:
        print("some answers were not 200: see the runs above", file=sys.stderr)
    return 0 if clean else 1


def _measure(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="pw-bench-http-") as tmp:
        started: dict[str, tuple[subprocess.Popen, str]] = {}
        try:
            for name, (argv, env, url) in servers(args.port, Path(tmp)).items():
                child = subprocess.Popen(argv, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
                started[name] = (child, url)
            for name, (child, url) in started.items():
                wait_answering(url + "/supported", child, name, seconds=60)
                drive([b""] * args.warmup, base_url=url, api_key="-", op="supported", concurrency=args.concurrency,
                      timeout=30, progress=False)
            print(f"GET /supported, a fixed {len(ANSWER)}-byte JSON answer, {args.concurrency} keep-alive clients, "
                  f"{args.requests} requests per run", flush=True)
            for _ in range(args.rounds):
                for name, (child, url) in started.items():
                    rows.setdefault(name, []).append(_one_run(name, child.pid, url, args))
        finally:
            for child, _url in started.values():
                stop_child(child)
    return rows


def _one_run(name: str, root: int, url: str, args: argparse.Namespace) -> dict[str, Any]:
    before = tree_cpu(root)
    report = drive([b""] * args.requests, base_url=url, api_key="-", op="supported", concurrency=args.concurrency,
                   timeout=30, progress=False)
    time.sleep(0.2)  # /proc's figures are in clock ticks: let the last answers' ticks land
    spent = sum(cpu_delta(before, tree_cpu(root)).values())
    figures = {"cpu_ms": round(1000 * spent / args.requests, 4), **report.as_dict()}
    print(f"{name:>30}: {figures['throughput']:>7} /s   CPU {figures['cpu_ms']:.3f} ms per request   "
          f"p99 {figures['p99_ms']} ms   {figures['answers']}", flush=True)
    return figures
