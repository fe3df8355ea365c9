"""`paywarden-bench production`: every facilitator in the shape merchants run it, the chain a JSON-RPC node in
another process, side by side under the same load.

One `paywarden localnet` is the RPC node for all. The contenders, each started once and kept running:
- **typescript**: the official TypeScript facilitator (`@x402/core`'s `x402Facilitator`, `@x402/svm`'s `exact` scheme
  and `toFacilitatorSvmSigner` with the localnet as its RPC) on node's `http` server, its packages installed with
  `npm install` into a scratch folder; skipped, with a line saying so, when `node`/`npm` is missing or the registry
  does not answer.
- **python**: the x402 SDK's reference facilitator (`x402FacilitatorSync`, `ExactSvmFacilitatorScheme`, its RPC signer
  `FacilitatorKeypairSigner(rpc_url=…)`) under FastAPI and uvicorn (sync handlers: uvicorn's thread pool).
- **embedded**: `paywarden up` on its embedded store, one API worker, the localnet as its external chain.
- **postgres**: `paywarden up` on PostgreSQL (a throwaway database) + Redis (a `redis-server` of the run's own, so
  that its CPU and `INFO commandstats` are the run's alone), `--workers` API workers.

Runs alternate, one per contender per round, so a change in the machine's load hits all alike; each payment is
distinct and signed just before its run. Beside each run: throughput, p50/p99, and the CPU per request of every
process (from /proc before and after): the contender's own processes, the node, and for PostgreSQL + Redis the
PostgreSQL backends serving the run's database and the Redis server.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from solders.hash import Hash
from solders.keypair import Keypair

from interfaces.bench.contenders import Contender, Run, cpu_of
from interfaces.bench.processes import cpu_delta
from interfaces.cli.bench import drive, faucet, rpc, sign_payments

CONTENDERS = ("typescript", "python", "embedded", "postgres")
LABELS = {"typescript": "TypeScript (@x402/core + @x402/svm, node http)",
          "python": "Python reference (FastAPI + uvicorn, RPC signer)",
          "embedded": "Paywarden embedded (paywarden up, 1 worker)",
          "postgres": "Paywarden PostgreSQL + Redis"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", choices=("verify", "settle", "both"), default="both",
                   help="the operations compared (default both: verify, then settle with its confirmation)")
    p.add_argument("--only", default=",".join(CONTENDERS),
                   help=f"the contenders, comma-separated (default {','.join(CONTENDERS)})")
    p.add_argument("--concurrency", type=int, default=32, help="concurrent clients (default 32)")
    p.add_argument("--requests", type=int, default=2000, help="payments per run (default 2000)")
    p.add_argument("--warmup", type=int, default=300, help="payments sent first to each, not counted (default 300)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each contender, alternating (default 2)")
    p.add_argument("--workers", type=int, default=2, help="API workers of Paywarden on PostgreSQL + Redis (default 2)")
    p.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                   help="the server on which a throwaway database is created and dropped")
    p.add_argument("--npm-folder", type=Path, default=None,
                   help="where the TypeScript facilitator's packages are installed (default: a scratch folder "
                        "in the run's temporary directory)")
    p.add_argument("--store-counts", action=argparse.BooleanOptionalAction, default=True,
                   help="PostgreSQL transactions and Redis commands per request on PostgreSQL + Redis (default on; "
                        "each count waits 11 s for PostgreSQL's statistics)")
    p.add_argument("--json", action="store_true", help="also print the summary as one JSON line")


def one_run(contender: Contender, op: str, bodies: list[bytes], args: argparse.Namespace, node: int) -> dict:
    load = os.getloadavg()[0]
    before = cpu_of(contender, node)
    stores_before = contender.trips.snapshot() if contender.trips else {}
    driving = time.process_time()
    report = drive(bodies, base_url=contender.base_url, api_key=contender.api_key, op=op,
                   concurrency=args.concurrency, timeout=60, label=f"{contender.name} {op}")
    load_ms = round(1000 * (time.process_time() - driving) / len(bodies), 3)
    time.sleep(1.0)  # the followers finish their share of the run's events
    spent = cpu_delta(before, cpu_of(contender, node))
    per_request = {name: round(1000 * seconds / len(bodies), 3) for name, seconds in sorted(spent.items())}
    figures = {"contender": contender.name, "op": op, "load_1min": round(load, 2), **report.as_dict(),
               "cpu_ms_per_request": per_request, "cpu_ms_per_request_total": round(sum(per_request.values()), 3),
               "load_generator_cpu_ms_per_request": load_ms}
    print(f"{contender.name:>10} {op:<6} {figures['throughput']:>8} /s  p50 {figures['p50_ms']:>7} ms  "
          f"p99 {figures['p99_ms']:>7} ms  load {figures['load_1min']}  {figures['answers']}", flush=True)
    print(f"{'':>17} CPU ms per {op}: {figures['cpu_ms_per_request_total']} = "
          + ", ".join(f"{name} {ms}" for name, ms in per_request.items() if ms >= 0.001)
          + f"; the load generator {load_ms}", flush=True)
    if contender.trips:
        figures["store_trips_per_request"] = contender.trips.per_request(stores_before, len(bodies))
        print(f"{'':>17} per {op}: " + ", ".join(
            f"{name} {count}" for name, count in figures["store_trips_per_request"].items()), flush=True)
    return figures


def run(args: argparse.Namespace) -> int:
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(chosen) - set(CONTENDERS)
    if unknown:
        print(f"paywarden-bench production: unknown contender(s) {', '.join(sorted(unknown))}; "
              f"choose among {', '.join(CONTENDERS)}", file=sys.stderr)
        return 2
    ops = ("verify", "settle") if args.op == "both" else (args.op,)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="pw-bench-production-") as tmp:
        bench = Run(args, Path(tmp))
        try:
            rpc_url, node = bench.localnet()
            from domain.networks import DEVNET

            contenders: list[Contender] = []
            for name in chosen:
                if name == "typescript":
                    started = bench.typescript(rpc_url, DEVNET.caip2)
                    if isinstance(started, str):
                        print(f"typescript: skipped: {started}", flush=True)
                        continue
                    contenders.append(started)
                elif name == "python":
                    contenders.append(bench.python_reference(rpc_url))
                else:
                    contenders.append(bench.paywarden(name, rpc_url))
            payer_path, payer = bench.keypair_file("payer")
            per_contender = len(ops) * (args.warmup + args.rounds * args.requests)
            faucet(rpc_url, str(payer.pubkey()), usdc_atomic=1000 * per_contender * len(contenders), sol="1")
            pay_to = str(Keypair().pubkey())
            faucet(rpc_url, pay_to, usdc_atomic=1)

            def bodies(contender: Contender, count: int) -> list[bytes]:
                blockhash = Hash.from_string(rpc(rpc_url, "getLatestBlockhash")["value"]["blockhash"])
                return sign_payments(payer, count, fee_payer=contender.fee_payer, network=DEVNET.caip2,
                                     pay_to=pay_to, amount=1000, blockhash=blockhash)

            print(f"chain out of process (one paywarden localnet), {args.concurrency} clients, {args.requests} "
                  f"distinct payments per run, {args.rounds} round(s), PostgreSQL + Redis with {args.workers} "
                  f"API worker(s); load average {os.getloadavg()[0]:.2f}", flush=True)
            for op in ops:
                for contender in contenders:
                    if args.warmup:
                        drive(bodies(contender, args.warmup), base_url=contender.base_url,
                              api_key=contender.api_key, op=op, concurrency=args.concurrency, timeout=60,
                              label=f"warm-up {contender.name} {op}")
                for _ in range(args.rounds):
                    for contender in contenders:
                        runs.append(one_run(contender, op, bodies(contender, args.requests), args, node))
        finally:
            bench.close()
    summary = summarize(runs)
    print(table(summary))
    if args.json:
        print(json.dumps({"summary": summary, "runs": runs}))
    expected = {"verify": "200 valid", "settle": "200 success"}
    clean = all(set(r["answers"]) == {expected[r["op"]]} for r in runs)
    if not clean:
        print("some answers were not a success: see the runs above", file=sys.stderr)
    return 0 if clean else 1


def summarize(runs: list[dict]) -> list[dict]:
    rows = []
    for op in dict.fromkeys(r["op"] for r in runs):
        for name in dict.fromkeys(r["contender"] for r in runs if r["op"] == op):
            mine = [r for r in runs if r["op"] == op and r["contender"] == name]
            cpu: dict[str, list[float]] = {}
            for r in mine:
                for process, ms in r["cpu_ms_per_request"].items():
                    cpu.setdefault(process, []).append(ms)
            rows.append({"op": op, "contender": name, "throughput": [r["throughput"] for r in mine],
                         "p50_ms": [r["p50_ms"] for r in mine], "p99_ms": [r["p99_ms"] for r in mine],
                         "median_throughput": statistics.median(r["throughput"] for r in mine),
                         "cpu_ms_median": {p: round(statistics.median(v), 3) for p, v in cpu.items()}})
        best_peer = max((r["median_throughput"] for r in rows if r["op"] == op
                         and r["contender"] in ("typescript", "python")), default=None)
        for row in rows:
            if row["op"] == op and best_peer:
                row["vs_best_peer"] = round(row["median_throughput"] / best_peer, 2)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["", "| op | contender | /s (runs) | p50 ms | p99 ms | × best peer | CPU ms per request (medians) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        cpu = ", ".join(f"{p} {ms}" for p, ms in row["cpu_ms_median"].items() if ms >= 0.001)
        lines.append(f"| {row['op']} | {LABELS[row['contender']]} | {', '.join(map(str, row['throughput']))} | "
                     f"{', '.join(map(str, row['p50_ms']))} | {', '.join(map(str, row['p99_ms']))} | "
                     f"{row.get('vs_best_peer', '–')} | {cpu} |")
    return "\n".join(lines)
