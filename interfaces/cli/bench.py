"""`paywarden bench`: drive a running Paywarden with N distinct, really signed payments from C concurrent clients.

Set-up: the fee payer and network come from `GET /supported` (`extra.feePayer`), the blockhash from the RPC
endpoint, and `payTo` is a fresh wallet whose USDC account the localnet faucet creates (or `--pay-to`, an address
whose USDC account exists). The payer is funded by the faucet too unless `--no-faucet`. Every payment is signed
before the clock starts, so the figures measure the server, not the client's signing. Each client keeps one
HTTP/1.1 connection open. The report gives throughput, p50/p95/p99 latency and the count of each answer
(`200 valid`, `400 simulation_failed`, `429 rate_limited`, `error ConnectionResetError`, ...): nothing is hidden,
and the exit status is 1 when any answer was not the expected success.

With `--up FILE` and no `--api-key`, the payments are made by a merchant of the benchmark's own, `bench` (made on
first use in the sandbox's store, devnet enabled, a limit of 1,000,000 requests a minute, its test key kept in the
data directory as `bench-api-key`), and the command says so: the load never lands in the sandbox merchant's books.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from solders.hash import Hash
from solders.keypair import Keypair

from domain.networks import NETWORKS
from interfaces.adapters.signers import read_keypair
from interfaces.cli.bench_merchant import BENCH_MERCHANT, bench_merchant_key
from interfaces.sandbox.exact_client import build_exact_payment, to_base64


def _at_least(minimum: int):
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {raw!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--up", type=Path, metavar="FILE",
                   help="the JSON line `paywarden up --json` printed, saved in FILE: gives --base-url, --rpc-url "
                        "and --payer-keypair (each option still overrides it), and pays as the merchant "
                        f"`{BENCH_MERCHANT}`, made on first use, unless --api-key is given")
    p.add_argument("--base-url", help="the Paywarden API, e.g. http://127.0.0.1:8402")
    p.add_argument("--api-key", help="a merchant key (raise its limit first: paywarden merchant set-rate-limit)")
    p.add_argument("--rpc-url", help="the chain's JSON-RPC endpoint (the localnet, for its faucet)")
    p.add_argument("--payer-keypair", type=Path, help="Solana CLI keypair file of the paying wallet")
    p.add_argument("--op", choices=("verify", "settle"), default="verify", help="the call to measure (default verify)")
    p.add_argument("--concurrency", type=_at_least(1), default=32, help="concurrent clients (default 32)")
    p.add_argument("--requests", type=_at_least(1), default=1000, help="payments to send (default 1000)")
    p.add_argument("--warmup", type=_at_least(0), default=0, help="payments sent first and not counted (default 0)")
    p.add_argument("--amount", type=_at_least(1), default=1000, help="atomic USDC units per payment (default 1000)")
    p.add_argument("--pay-to", help="recipient address whose USDC account exists (default: a fresh funded wallet)")
    p.add_argument("--no-faucet", action="store_true", help="the payer is funded already; do not call /faucet")
    p.add_argument("--timeout", type=float, default=30.0, help="per-request timeout in seconds")
    p.add_argument("--json", action="store_true", help="also print the report as one JSON line")


@dataclass
class Report:
    op: str
    requests: int
    concurrency: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    answers: Counter = field(default_factory=Counter)
    # answers each client got: a server that passes some connections over shows a wide spread long before its p50
    per_client: list[int] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]  # nearest rank

    @property
    def expected(self) -> str:
        return "200 valid" if self.op == "verify" else "200 success"

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "requests": self.requests, "concurrency": self.concurrency,
                "seconds": round(self.seconds, 3), "throughput": round(self.throughput, 1),
                "p50_ms": round(self.percentile(50), 2), "p95_ms": round(self.percentile(95), 2),
                "p99_ms": round(self.percentile(99), 2), "max_ms": round(max(self.latencies_ms, default=0), 2),
                "per_client_min": min(self.per_client, default=0), "per_client_max": max(self.per_client, default=0),
                "answers": dict(self.answers.most_common())}

    def text(self) -> str:
        d = self.as_dict()
        lines = [
            f"{d['op']}: {d['requests']} requests, {d['concurrency']} clients, {d['seconds']} s",
            f"throughput  {d['throughput']} requests/s",
            f"latency     p50 {d['p50_ms']} ms   p95 {d['p95_ms']} ms   p99 {d['p99_ms']} ms   max {d['max_ms']} ms",
            f"per client  {d['per_client_min']} to {d['per_client_max']} answers",
            "answers",
        ]
        for answer, count in d["answers"].items():
            mark = "" if answer == self.expected else "   <- unexpected"
            lines.append(f"  {count:>8}  {answer}{mark}")
        return "\n".join(lines)


class Api:
    """One keep-alive HTTP/1.1 connection to the Paywarden API."""

    def __init__(self, base_url: str, api_key: str, timeout: float) -> None:
        parts = urlsplit(base_url)
        self._host, self._port, self._prefix = parts.hostname or "", parts.port, parts.path.rstrip("/")
        self._https, self._timeout = parts.scheme == "https", timeout
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        for attempt in (1, 2):
            conn = self._conn or self._connect()
            try:
                conn.request(method, self._prefix + path, body=body, headers=self._headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt == 2 or method != "GET":
                    raise
                continue
            if resp.getheader("Connection", "").lower() == "close":
                self.close()
            try:
                return resp.status, json.loads(raw)
            except ValueError:
                return resp.status, raw.decode(errors="replace")
        raise AssertionError("unreachable")

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        self._conn = cls(self._host, self._port, timeout=self._timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def answer_of(status: int, body: Any) -> str:
    """`200 valid`, `400 simulation_failed`, `202 settlement_pending`, `429 rate_limited`, ..."""
    if isinstance(body, dict):
        if body.get("isValid") is True:
            return f"{status} valid"
        if body.get("success") is True:
            return f"{status} success"
        if isinstance(body.get("kinds"), list):
            return f"{status} supported"
        code = body.get("invalidReason") or body.get("errorReason") or body.get("error")
        if code:
            return f"{status} {code}"
    return f"{status} {str(body)[:60]!r}"


def rpc(url: str, method: str, params: list | None = None) -> Any:
    payload = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    request = urllib.request.Request(url, payload, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        answer = json.loads(resp.read())
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


def faucet(rpc_url: str, address: str, *, usdc_atomic: int = 0, sol: str = "0") -> None:
    usdc = format(Decimal(usdc_atomic).scaleb(-6).normalize(), "f")
    body = json.dumps({"address": address, "usdc": usdc, "sol": sol}).encode()
    request = urllib.request.Request(rpc_url.rstrip("/") + "/faucet", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        resp.read()


def sign_payments(payer: Keypair, count: int, *, fee_payer: str, network: str, pay_to: str, amount: int,
                  blockhash: Hash) -> list[bytes]:
    """`count` distinct payments (each its own random memo), as request bodies."""
    requirements = {"scheme": "exact", "network": network, "amount": str(amount),
                    "asset": NETWORKS[network].usdc_mint, "payTo": pay_to, "maxTimeoutSeconds": 60,
                    "extra": {"feePayer": fee_payer}}
    bodies = []
    for _ in range(count):
        tx = build_exact_payment(payer, fee_payer=fee_payer, mint=NETWORKS[network].usdc_mint, pay_to=pay_to,
                                 amount=amount, blockhash=blockhash)
        bodies.append(json.dumps({
            "x402Version": 2,
            "paymentPayload": {"x402Version": 2, "accepted": requirements, "payload": {"transaction": to_base64(tx)}},
            "paymentRequirements": requirements,
        }).encode())
    return bodies


class Progress:
    """A one-line progress bar on stderr, redrawn a few times a second."""

    def __init__(self, total: int, label: str, stream: Any = sys.stderr) -> None:
        self.total, self.label, self.done, self._stream = total, label, 0, stream
        self._stop, self._start = threading.Event(), time.monotonic()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._draw()
        self._stream.write("\n")
        self._stream.flush()

    def _run(self) -> None:
        live = getattr(self._stream, "isatty", lambda: False)()  # a log file gets the final line only
        while not self._stop.wait(0.25 if live else 3600):
            self._draw()

    def _draw(self) -> None:
        done, width = self.done, 30
        filled = width * done // max(self.total, 1)
        rate = done / max(time.monotonic() - self._start, 1e-9)
        self._stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
                           f"{rate:,.0f}/s ")
        self._stream.flush()


def drive(bodies: Sequence[bytes], *, base_url: str, api_key: str, op: str, concurrency: int, timeout: float,
          label: str = "", progress: bool = True) -> Report:
    """Send every body once, `concurrency` at a time; return the measurements. `op="supported"` sends a
    `GET /supported` for each body instead (the body unused)."""
    report = Report(op, len(bodies), concurrency, 0.0)
    lock, cursor = threading.Lock(), iter(range(len(bodies)))
    bar = Progress(len(bodies), label or op, sys.stderr if progress else _Null())

    def client() -> None:
        api = Api(base_url, api_key, timeout)
        latencies: list[float] = []
        answers: Counter[str] = Counter()
        finished = False
        while True:
            with lock:
                bar.done += finished
                index, finished = next(cursor, None), True
            if index is None:
                break
            started = time.perf_counter()
            try:
                status, body = (api.request("GET", "/supported") if op == "supported" else
                                api.request("POST", f"/{op}", bodies[index]))
                answer = answer_of(status, body)
            except (OSError, http.client.HTTPException) as failed:
                api.close()
                answer = f"error {type(failed).__name__}"
            latencies.append((time.perf_counter() - started) * 1000)
            answers[answer] += 1
        api.close()
        with lock:
            report.latencies_ms.extend(latencies)
            report.answers.update(answers)
            report.per_client.append(len(latencies))

    with bar:
        return run_clients(client, concurrency, report)


def run_clients(client: Callable[[], None], concurrency: int, report: Report) -> Report:
    """Run `client` in `concurrency` threads at once; the report's seconds are the wall time until all have ended."""
    threads = [threading.Thread(target=client, name=f"bench-{i}") for i in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report.seconds = time.perf_counter() - started
    return report


class _Null:
    def write(self, _: str) -> None:
        pass

    def flush(self) -> None:
        pass


class BenchError(Exception):
    """The benchmark cannot start: one line saying why (an unreachable URL, a missing option)."""


def _from_up(args: argparse.Namespace) -> None:
    """Fill the options `--up FILE` gives (options given explicitly win)."""
    if args.up is not None:
        try:
            info = json.loads(args.up.read_text())
        except (OSError, ValueError) as bad:
            raise BenchError(f"--up {args.up}: not the JSON line of `paywarden up --json` ({bad})") from None
        args.base_url = args.base_url or info.get("base_url")
        if not args.api_key:
            args.api_key = bench_merchant_key(info)
            print(f"paywarden bench: paying as the merchant `{BENCH_MERCHANT}` (its own books and rate limit; the "
                  f"sandbox merchant's books are untouched; --api-key to pay as another)", file=sys.stderr)
        args.rpc_url = args.rpc_url or info.get("rpc_url")
        if args.payer_keypair is None and info.get("payer_keypair_path"):
            args.payer_keypair = Path(info["payer_keypair_path"])
    missing = [option for option, value in (("--base-url", args.base_url), ("--api-key", args.api_key),
                                            ("--rpc-url", args.rpc_url), ("--payer-keypair", args.payer_keypair))
               if not value]
    if missing:
        raise BenchError(f"missing {', '.join(missing)} (or --up FILE, the output of `paywarden up --json`)")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except BenchError as refused:
        print(f"paywarden bench: {refused}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    _from_up(args)
    payer = read_keypair(args.payer_keypair)
    try:
        status, supported = Api(args.base_url, args.api_key, args.timeout).request("GET", "/supported")
    except (OSError, http.client.HTTPException, ValueError) as down:
        raise BenchError(f"cannot reach the Paywarden API at --base-url {args.base_url}: {_reason(down)}") from None
    if status != 200 or not isinstance(supported, dict) or not supported.get("kinds"):
        raise BenchError(f"GET {args.base_url}/supported answered {status} {str(supported)[:200]}")
    kind = supported["kinds"][0]
    network, fee_payer = kind["network"], kind["extra"]["feePayer"]
    total = args.requests + args.warmup
    pay_to = args.pay_to
    try:
        if pay_to is None:
            pay_to = str(Keypair().pubkey())
            faucet(args.rpc_url, pay_to, usdc_atomic=1)  # creates payTo's USDC account
        if not args.no_faucet:
            faucet(args.rpc_url, str(payer.pubkey()), usdc_atomic=args.amount * total, sol="1")
        blockhash = Hash.from_string(rpc(args.rpc_url, "getLatestBlockhash")["value"]["blockhash"])
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as down:
        raise BenchError(f"cannot use the chain at --rpc-url {args.rpc_url}: {_reason(down)}") from None
    started = time.perf_counter()
    bodies = sign_payments(payer, total, fee_payer=fee_payer, network=network, pay_to=pay_to,
                           amount=args.amount, blockhash=blockhash)
    print(f"signed {total} payments in {time.perf_counter() - started:.1f} s (fee payer {fee_payer}, "
          f"payTo {pay_to}, {network})", file=sys.stderr)
    common = dict(base_url=args.base_url, api_key=args.api_key, op=args.op, concurrency=args.concurrency,
                  timeout=args.timeout)
    if args.warmup:
        drive(bodies[: args.warmup], label="warm-up", **common)
    report = drive(bodies[args.warmup:], **common)
    print(report.text())
    if args.json:
        print(json.dumps(report.as_dict()))
    if any(answer.startswith("429") for answer in report.answers):
        print("hint: raise the key's limit: paywarden merchant set-rate-limit NAME --per-minute N", file=sys.stderr)
    return 0 if set(report.answers) == {report.expected} else 1


def _reason(failure: BaseException) -> str:
    reason = getattr(failure, "reason", None)  # urllib's URLError wraps the socket error
    text = " ".join(str(reason if reason is not None else failure).split())[:200]
    return f"{type(failure).__name__}: {text}" if text else type(failure).__name__
