"""`paywarden-bench reference`: Paywarden against the x402 SDK's own SVM facilitator, side by side, one command.

The reference is the x402 package's `x402Facilitator` with its `exact` SVM scheme (`ExactSvmFacilitatorScheme`) and its
`FacilitatorKeypairSigner`, served by FastAPI under uvicorn in one process, as the SDK's examples serve it. Its
chain is an in-process LiteSVM (the same `Sandbox` with the real SPL Token program that our localnet serves): the
signer's three chain calls (simulate, send, confirm) go to it instead of a JSON-RPC client, which is the fastest
chain the reference can have; everything else (parsing, the scheme's checks, co-signing) is the SDK's code.

Paywarden is started as `paywarden up --json` (the embedded default, or PostgreSQL + Redis when
PAYWARDEN_DATABASE_URL / PAYWARDEN_REDIS_URL are set) from a fresh data directory, with the sandbox merchant's
rate limit raised. Both get the same load from `interfaces.cli.bench.drive`: distinct really-signed payments, signed
before the clock starts, `--concurrency` clients on keep-alive connections. Runs alternate (reference, Paywarden,
reference, ...) so a change in the machine's load hits both; each run prints the load average beside its figures,
and the summary gives each side's best and median run and the ratio of the medians.
"""

import argparse
import base64
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from solders.hash import Hash
from solders.keypair import Keypair

from interfaces.adapters.signers import read_keypair
from interfaces.bench.processes import cpu_delta, get_json, stop_child, tree_cpu, wait_answering
from interfaces.cli.bench import Api, drive, faucet, rpc, sign_payments

REFERENCE_ENV = "PAYWARDEN_REFERENCE_KEYS"  # "fee_payer.json,payer.json,pay_to.json" for the served app


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", choices=("verify", "settle", "supported"), default="verify",
                   help="the operation compared (default verify); settle co-signs, broadcasts and confirms each "
                        "payment on each side's sandbox chain; supported is a GET /supported per request, no "
                        "payment: each side's HTTP server, framework and per-request work alone (a verify's CPU "
                        "beyond it is the verify's own)")
    p.add_argument("--concurrency", type=int, default=32, help="concurrent clients (default 32)")
    p.add_argument("--requests", type=int, default=2000, help="payments per run (default 2000)")
    p.add_argument("--warmup", type=int, default=300, help="payments sent first to each, not counted (default 300)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each, alternating (default 2)")
    p.add_argument("--stack", choices=("embedded", "postgres"), default=None,
                   help="Paywarden's stores: the embedded default, or PostgreSQL + Redis on a throwaway database "
                        "(default: postgres when PAYWARDEN_DATABASE_URL is set, else embedded)")
    p.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                   help="--stack postgres: the server on which a throwaway database is created and dropped")
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/13",
                   help="--stack postgres: an EMPTY Redis database for the run, emptied after it (default db 13)")
    p.add_argument("--workers", type=int, default=None,
                   help="Paywarden API workers (default 1 on the embedded store, 2 on PostgreSQL + Redis)")
    p.add_argument("--reference-port", type=int, default=8490, help="the reference facilitator's port (8490)")
    p.add_argument("--port", type=int, default=8492, help="Paywarden's API port (default 8492)")
    p.add_argument("--rpc-port", type=int, default=8499, help="Paywarden's localnet port (default 8499)")
    p.add_argument("--proxy-port", type=int, default=8495, help="Paywarden's proxy port (default 8495)")
    p.add_argument("--console-port", type=int, default=8494, help="Paywarden's console port (default 8494)")
    p.add_argument("--json", action="store_true", help="also print the summary as one JSON line")


# -- the reference facilitator (runs in its own process under uvicorn) -------------------------------------------


def funded_sandbox(fee_payer: str, payer: str, pay_to: str) -> Any:
    """An in-process sandbox chain on which the fee payer has SOL, the payer SOL and USDC, and `pay_to` a USDC
    account: what the reference facilitator (and `paywarden-bench floor`) verify against."""
    from interfaces.sandbox.chain import Sandbox

    sandbox = Sandbox()
    sandbox.airdrop(fee_payer, 10 * 10**9)
    sandbox.airdrop(payer, 10**9)
    sandbox.mint_usdc(payer, 10**12)
    sandbox.mint_usdc(pay_to, 0)
    return sandbox


def reference_facilitator(sandbox: Any, fee_payer: Keypair) -> Any:
    """The x402 SDK's `x402Facilitator` with its `exact` SVM scheme and its keypair signer, the signer's chain calls
    going to `sandbox` instead of a JSON-RPC client."""
    from solders.transaction import VersionedTransaction
    from x402 import x402Facilitator
    from x402.mechanisms.svm.exact import ExactSvmFacilitatorScheme
    from x402.mechanisms.svm.signers import FacilitatorKeypairSigner

    from domain.networks import DEVNET

    class LiteSvmSigner(FacilitatorKeypairSigner):
        """The SDK's keypair signer (its co-signing unchanged) over an in-process LiteSVM instead of RPC."""

        def simulate_transaction(self, tx_base64: str, network: str) -> None:
            outcome = sandbox.simulate(VersionedTransaction.from_bytes(base64.b64decode(tx_base64)))
            if not outcome.ok:
                raise RuntimeError(f"Simulation failed: {outcome.err}")

        def send_transaction(self, tx_base64: str, network: str) -> str:
            tx = VersionedTransaction.from_bytes(base64.b64decode(tx_base64))
            outcome = sandbox.send(tx, preflight=False)
            if not outcome.ok:
                raise RuntimeError(f"Transaction failed: {outcome.err}")
            return str(tx.signatures[0])

        def confirm_transaction(self, signature: str, network: str, timeout_seconds: int = 30) -> None:
            if sandbox.transaction(signature) is None:
                raise RuntimeError("Transaction confirmation timeout")

    facilitator = x402Facilitator()  # register() answers the SDK's base class, which declares no verify/settle
    facilitator.register([DEVNET.caip2], ExactSvmFacilitatorScheme(LiteSvmSigner(fee_payer)))
    return facilitator


def reference_app() -> Any:  # no `from __future__ import annotations` here: FastAPI reads the handlers' types
    """The FastAPI app uvicorn serves (`--factory interfaces.bench.reference:reference_app`)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from x402.schemas import PaymentPayload, PaymentRequirements

    fee_payer_path, payer_path, pay_to_path = os.environ[REFERENCE_ENV].split(",")
    fee_payer, payer, pay_to = (read_keypair(Path(p)) for p in (fee_payer_path, payer_path, pay_to_path))
    sandbox = funded_sandbox(str(fee_payer.pubkey()), str(payer.pubkey()), str(pay_to.pubkey()))
    facilitator = reference_facilitator(sandbox, fee_payer)
    app = FastAPI()

    async def parsed(request: Request) -> tuple[Any, Any]:
        body = await request.json()
        return (PaymentPayload.model_validate(body["paymentPayload"]),
                PaymentRequirements.model_validate(body["paymentRequirements"]))

    @app.post("/verify")
    async def verify(request: Request) -> JSONResponse:
        payload, requirements = await parsed(request)
        answer = await facilitator.verify(payload, requirements)
        return JSONResponse(answer.model_dump(by_alias=True, exclude_none=True))

    @app.post("/settle")
    async def settle(request: Request) -> JSONResponse:
        payload, requirements = await parsed(request)
        answer = await facilitator.settle(payload, requirements)
        return JSONResponse(answer.model_dump(by_alias=True, exclude_none=True))

    @app.get("/supported")
    async def supported() -> JSONResponse:
        return JSONResponse(facilitator.get_supported().model_dump(by_alias=True, exclude_none=True))

    @app.get("/blockhash")  # set-up only: the bench signs against the in-process chain's blockhash
    async def blockhash() -> JSONResponse:
        return JSONResponse({"blockhash": sandbox.latest_blockhash()[0]})

    return app


# -- the runner ------------------------------------------------------------------------------------------------------


def _start_reference(args: argparse.Namespace, work: Path, children: list) -> tuple[str, Keypair, str]:
    keys = []
    for name in ("ref-fee-payer", "ref-payer", "ref-pay-to"):
        path = work / f"{name}.json"
        path.write_text(json.dumps(list(bytes(Keypair()))))
        keys.append(path)
    env = {**os.environ, REFERENCE_ENV: ",".join(map(str, keys))}
    argv = [sys.executable, "-m", "uvicorn", "--factory", "interfaces.bench.reference:reference_app",
            "--host", "127.0.0.1", "--port", str(args.reference_port), "--log-level", "warning",
            "--no-access-log"]
    child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    children.append(child)
    url = f"http://127.0.0.1:{args.reference_port}"
    wait_answering(url + "/supported", child, "the reference facilitator")
    return url, read_keypair(keys[1]), str(read_keypair(keys[2]).pubkey())


@contextmanager
def _stack(args: argparse.Namespace) -> Iterator[dict[str, str]]:
    """The environment of Paywarden's stores. `--stack postgres`: a database created for the run on
    `--postgres-url`'s server and dropped after it, and `--redis-url`'s database, which must be empty (the
    result-cache projection's position lives there) and is emptied after the run."""
    if args.stack != "postgres":
        yield {}
        return
    import psycopg
    import redis

    server = urlsplit(args.postgres_url)
    database = f"pw_bench_{secrets.token_hex(4)}"
    cache = redis.Redis.from_url(args.redis_url)
    if cache.dbsize():
        raise SystemExit(f"paywarden-bench reference: {args.redis_url} is not empty; name an empty Redis database "
                         "with --redis-url")
    with psycopg.connect(args.postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    try:
        args.database = database
        yield {"PAYWARDEN_DATABASE_URL": urlunsplit(server._replace(path="/" + database)),
               "PAYWARDEN_REDIS_URL": args.redis_url}
    finally:
        cache.flushdb()
        with psycopg.connect(args.postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _start_paywarden(args: argparse.Namespace, work: Path, children: list, stores: dict[str, str]) -> dict[str, Any]:
    # The sandbox merchant's keys may send the whole run (no override is set for it, so the default applies).
    env = {**os.environ, **stores, "PAYWARDEN_DATA_DIR": str(work / "paywarden"),
           "PAYWARDEN_RATE_LIMIT_PER_KEY": "100000000/minute"}
    argv = [sys.executable, "-m", "interfaces.cli.main", "up", "--json", "--workers", str(args.workers),
            "--port", str(args.port), "--rpc-port", str(args.rpc_port), "--proxy-port", str(args.proxy_port),
            "--console-port", str(args.console_port)]
    log = (work / "paywarden.log").open("w")  # its JSON access log: kept off the terminal
    child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                             text=True, start_new_session=True)
    children.append(child)
    line = child.stdout.readline() if child.stdout else ""
    if not line.startswith("{"):
        log.close()
        said = [t for t in (work / "paywarden.log").read_text().splitlines() if not t.startswith("{")]
        raise SystemExit(f"paywarden-bench reference: paywarden up did not start (status {child.wait(10)}): "
                         + ("\n".join(said[-5:]) or line or "no output"))
    up = json.loads(line)
    return up


class StoreTrips:
    """What a run asked of PostgreSQL and Redis, per request: the transactions committed or rolled back on the
    run's own database (`pg_stat_database`: every process of the stack, the followers' reads included), the Redis
    scripts run (each one round trip) and the Redis commands by name (`INFO commandstats`: the whole server's, so
    exact only when nothing else uses it, e.g. a `redis-server` of the run's own; Redis counts the commands a script
    runs among them, so only the scripts and the commands no script runs are round trips).

    PostgreSQL publishes a backend's counts when it goes idle, at most once a second and otherwise ten seconds
    later: a snapshot waits `settle_seconds` so the run's last transactions are in it."""

    def __init__(self, postgres_url: str, database: str, redis_url: str, settle_seconds: float = 11.0) -> None:
        self.postgres_url, self.database, self.redis_url = postgres_url, database, redis_url
        self.settle_seconds = settle_seconds

    def snapshot(self) -> dict[str, int]:
        import psycopg
        import redis

        time.sleep(self.settle_seconds)
        with psycopg.connect(self.postgres_url, autocommit=True) as conn:
            row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
                               (self.database,)).fetchone()
        counts = {"PostgreSQL transactions": int(row[0]) if row else 0}
        stats = redis.Redis.from_url(self.redis_url).info("commandstats")
        for name, figures in stats.items():
            command = name.removeprefix("cmdstat_")
            if command not in ("info", "config|get"):  # the snapshot's own
                counts[f"Redis {command}"] = int(figures["calls"])
        return counts

    def per_request(self, before: dict[str, int], requests: int) -> dict[str, float]:
        after = self.snapshot()
        spent = {name: (count - before.get(name, 0)) / requests for name, count in after.items()}
        scripts = sum(rate for name, rate in spent.items() if name in ("Redis eval", "Redis evalsha", "Redis fcall"))
        ordered = sorted(spent.items(), key=lambda kv: -kv[1])
        return {"Redis scripts": round(scripts, 2),
                **{name: round(rate, 2) for name, rate in ordered if rate >= 0.01}}


def _one_run(label: str, bodies: list[bytes], base_url: str, api_key: str, args: argparse.Namespace,
             root: int, trips: StoreTrips | None = None) -> dict:
    load = os.getloadavg()[0]
    cpu_before = tree_cpu(root)
    stores_before = trips.snapshot() if trips else {}
    driving = time.process_time()  # this process is the load: its CPU shares the machine with the side measured
    report = drive(bodies, base_url=base_url, api_key=api_key, op=args.op, concurrency=args.concurrency,
                   timeout=60, label=label)
    load_ms = round(1000 * (time.process_time() - driving) / len(bodies), 3)
    time.sleep(1.0)  # the followers (projections, audit log, webhooks) finish their share of this run's events
    spent = cpu_delta(cpu_before, tree_cpu(root))
    per_request = {name: round(1000 * seconds / len(bodies), 3) for name, seconds in sorted(spent.items())}
    figures = {"side": label, "load_1min_before": round(load, 2), "load_1min_after": round(os.getloadavg()[0], 2),
               **report.as_dict(), "cpu_ms_per_request": per_request,
               "cpu_ms_per_request_total": round(sum(per_request.values()), 3), "load_cpu_ms_per_request": load_ms}
    if trips:
        figures["store_trips_per_request"] = trips.per_request(stores_before, len(bodies))
    print(f"{label:>10}: {figures['throughput']:>7} /s   p50 {figures['p50_ms']} ms   p99 {figures['p99_ms']} ms"
          f"   {figures['per_client_min']}-{figures['per_client_max']} per client"
          f"   load {figures['load_1min_before']} → {figures['load_1min_after']}   {figures['answers']}",
          flush=True)
    print(f"{'':>10}  CPU per {args.op}: {figures['cpu_ms_per_request_total']} ms = "
          + ", ".join(f"{name} {ms}" for name, ms in per_request.items() if ms >= 0.005)
          + f"; the load generator (this process) {load_ms}", flush=True)
    if trips:
        print(f"{'':>10}  per {args.op}: " + ", ".join(
            f"{name} {count}" for name, count in figures["store_trips_per_request"].items()), flush=True)
    return figures


def run(args: argparse.Namespace) -> int:
    if args.stack is None:
        args.stack = "postgres" if os.environ.get("PAYWARDEN_DATABASE_URL", "").startswith("postgres") else "embedded"
    if args.workers is None:
        args.workers = 2 if args.stack == "postgres" else 1
    per_side = args.warmup + args.rounds * args.requests
    with tempfile.TemporaryDirectory(prefix="pw-bench-ref-") as tmp, _stack(args) as stores:
        work = Path(tmp)
        children: list[subprocess.Popen] = []
        try:
            ref_url, ref_payer, ref_pay_to = _start_reference(args, work, children)
            up = _start_paywarden(args, work, children, stores)
            base_url, api_key, rpc_url = up["base_url"], up["api_key"], up["rpc_url"]

            kind = get_json(ref_url + "/supported")["kinds"][0]
            ref_fee_payer, ref_network = kind["extra"]["feePayer"], kind["network"]
            status, supported = Api(base_url, api_key, 10).request("GET", "/supported")
            if status != 200:
                raise RuntimeError(f"Paywarden GET /supported answered {status} {supported}")
            kind = supported["kinds"][0]
            pw_payer = read_keypair(Path(up["payer_keypair_path"]))
            pay_to = str(Keypair().pubkey())
            faucet(rpc_url, pay_to, usdc_atomic=1)
            faucet(rpc_url, str(pw_payer.pubkey()), usdc_atomic=1000 * per_side, sol="1")

            def reference_bodies(count: int) -> list[bytes]:  # signed just before use: blockhashes expire
                if args.op == "supported":
                    return [b""] * count
                blockhash = Hash.from_string(get_json(ref_url + "/blockhash")["blockhash"])
                return sign_payments(ref_payer, count, fee_payer=ref_fee_payer, network=ref_network,
                                     pay_to=ref_pay_to, amount=1000, blockhash=blockhash)

            def paywarden_bodies(count: int) -> list[bytes]:
                if args.op == "supported":
                    return [b""] * count
                blockhash = Hash.from_string(rpc(rpc_url, "getLatestBlockhash")["value"]["blockhash"])
                return sign_payments(pw_payer, count, fee_payer=kind["extra"]["feePayer"], network=kind["network"],
                                     pay_to=pay_to, amount=1000, blockhash=blockhash)

            trips = (StoreTrips(args.postgres_url, args.database, args.redis_url) if args.stack == "postgres"
                     else None)
            store = "PostgreSQL + Redis" if args.stack == "postgres" else "the embedded store"
            what = ("GET /supported requests per run" if args.op == "supported" else
                    "payments per run (each signed before its run)")
            print(f"{args.op}, {args.concurrency} clients, {args.requests} {what}, Paywarden with {args.workers} "
                  f"worker(s) on {store}", flush=True)
            if args.warmup:
                drive(reference_bodies(args.warmup), base_url=ref_url, api_key="-", op=args.op,
                      concurrency=args.concurrency, timeout=60, label="warm-up reference")
                drive(paywarden_bodies(args.warmup), base_url=base_url, api_key=api_key, op=args.op,
                      concurrency=args.concurrency, timeout=60, label="warm-up paywarden")
            runs: list[dict] = []
            for _ in range(args.rounds):
                runs.append(_one_run("reference", reference_bodies(args.requests), ref_url, "-", args,
                                     children[0].pid))
                runs.append(_one_run("paywarden", paywarden_bodies(args.requests), base_url, api_key, args,
                                     children[1].pid, trips))
        finally:
            for child in reversed(children):
                stop_child(child)
    summary = _summary(runs, args)
    print(f"reference: median {summary['reference']['median']} /s (best {summary['reference']['best']}), "
          f"p99 median {summary['reference']['p99_median_ms']} ms, CPU {summary['reference']['cpu_ms_median']} ms "
          f"per {args.op}")
    print(f"paywarden: median {summary['paywarden']['median']} /s (best {summary['paywarden']['best']}), "
          f"p99 median {summary['paywarden']['p99_median_ms']} ms, CPU {summary['paywarden']['cpu_ms_median']} ms "
          f"per {args.op}")
    print(f"ratio paywarden / reference (medians): {summary['ratio']}")
    if args.json:
        print(json.dumps(summary))
    expected = {"verify": "200 valid", "settle": "200 success", "supported": "200 supported"}[args.op]
    clean = all(set(r["answers"]) == {expected} for r in runs)
    if not clean:
        print(f"some answers were not {expected}: see the runs above", file=sys.stderr)
    return 0 if clean else 1


def _summary(runs: list[dict], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"op": args.op, "concurrency": args.concurrency, "requests": args.requests,
                           "stack": args.stack, "workers": args.workers, "runs": runs}
    for side in ("reference", "paywarden"):
        mine = [r for r in runs if r["side"] == side]
        out[side] = {"median": round(statistics.median(r["throughput"] for r in mine), 1),
                     "best": max(r["throughput"] for r in mine),
                     "p99_median_ms": round(statistics.median(r["p99_ms"] for r in mine), 2),
                     "cpu_ms_median": round(statistics.median(r["cpu_ms_per_request_total"] for r in mine), 3)}
    out["ratio"] = round(out["paywarden"]["median"] / out["reference"]["median"], 2)
    return out


if __name__ == "__main__":  # `python -m interfaces.bench.reference`, the same as `paywarden-bench reference`
    parser = argparse.ArgumentParser(prog="paywarden-bench reference", description=__doc__.split("\n")[0])
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
