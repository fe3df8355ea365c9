"""`paywarden-bench proxy`: what the transparent proxy adds over calling the backend directly.

Against a running stack (`paywarden up --demo` prints every address it needs), three series of sequential GETs:
- `direct`: the backend itself (`--backend-url`);
- `402`: the gateway URL without payment (slug lookup, route match, the 402 answer: the proxy's own routing);
- `paid`: the gateway URL with a fresh signed payment each time (verify, forward, settle on the chain, stream).
Prints the p50/p95/mean of each in milliseconds and the added latency of the 402 and paid series over direct.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from solders.hash import Hash
from solders.keypair import Keypair


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gateway-url", required=True, help="a priced GET route's gateway URL (up's demo_proxy_url)")
    p.add_argument("--backend-url", required=True, help="the same resource on the backend, unpaid")
    p.add_argument("--rpc-url", required=True, help="the chain's JSON-RPC (for blockhashes)")
    p.add_argument("--payer-keypair", required=True, help="a funded payer's Solana CLI keypair file")
    p.add_argument("--requests", type=int, default=200, help="requests per series (default 200)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON line")


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(ordered[len(ordered) // 2] * 1000, 2),
            "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 2),
            "mean": round(statistics.fmean(ordered) * 1000, 2), "n": len(ordered)}


def _timed(client: httpx.Client, url: str, expect: int, headers: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    response = client.get(url, headers=headers)
    elapsed = time.perf_counter() - started
    if response.status_code != expect:
        raise SystemExit(f"paywarden-bench proxy: {url} answered {response.status_code}, expected {expect}: "
                         f"{response.text[:200]}")
    return elapsed


def _signature(client: httpx.Client, accepted: dict[str, Any], payer: Keypair, rpc_url: str) -> str:
    from interfaces.sandbox.exact_client import build_exact_payment, to_base64

    blockhash = client.post(rpc_url, json={"jsonrpc": "2.0", "id": 1, "method": "getLatestBlockhash",
                                           "params": [{"commitment": "confirmed"}]}).json()["result"]["value"]
    tx = build_exact_payment(payer, fee_payer=accepted["extra"]["feePayer"], mint=accepted["asset"],
                             pay_to=accepted["payTo"], amount=int(accepted["amount"]),
                             blockhash=Hash.from_string(blockhash["blockhash"]),
                             compute_unit_price=1 + int(time.perf_counter_ns() % 1000))  # a distinct transaction
    payload = {"x402Version": 2, "accepted": accepted, "payload": {"transaction": to_base64(tx)}}
    return base64.b64encode(json.dumps(payload).encode()).decode()


def run(args: argparse.Namespace) -> int:
    payer = Keypair.from_bytes(bytes(json.loads(Path(args.payer_keypair).read_text())))
    with httpx.Client(timeout=60) as client:
        required = client.get(args.gateway_url)
        if required.status_code != 402:
            raise SystemExit(f"paywarden-bench proxy: {args.gateway_url} is not a priced route (it answered "
                             f"{required.status_code})")
        accepted = json.loads(base64.b64decode(required.headers["PAYMENT-REQUIRED"]))["accepts"][0]
        for _ in range(5):  # warm connections and caches
            client.get(args.backend_url)
            client.get(args.gateway_url)
        direct = [_timed(client, args.backend_url, 200) for _ in range(args.requests)]
        unpaid = [_timed(client, args.gateway_url, 402) for _ in range(args.requests)]
        paid = []
        for _ in range(args.requests):
            signature = _signature(client, accepted, payer, args.rpc_url)
            paid.append(_timed(client, args.gateway_url, 200, {"PAYMENT-SIGNATURE": signature}))
    figures = {"direct": _percentiles(direct), "402": _percentiles(unpaid), "paid": _percentiles(paid)}
    figures["added_ms"] = {name: round(figures[name]["p50"] - figures["direct"]["p50"], 2) for name in ("402", "paid")}
    if args.json:
        print(json.dumps(figures))
        return 0
    for name in ("direct", "402", "paid"):
        f = figures[name]
        print(f"{name:>6}: p50 {f['p50']:8.2f} ms  p95 {f['p95']:8.2f} ms  mean {f['mean']:8.2f} ms  (n={f['n']})")
    print(f"added over direct (p50): 402 {figures['added_ms']['402']} ms, paid {figures['added_ms']['paid']} ms")
    return 0
