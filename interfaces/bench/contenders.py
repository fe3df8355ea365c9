"""The contenders of `paywarden-bench production` and how each is started with the chain out of process: the one
`paywarden localnet` (the node), the official TypeScript facilitator (its npm packages installed into a scratch
folder), the x402 SDK's Python facilitator with its RPC signer, and Paywarden (`paywarden up` on its embedded store, or
on PostgreSQL + Redis with a `redis-server` of the run's own); and the CPU every process of a contender spent."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solders.keypair import Keypair

from interfaces.adapters.signers import read_keypair
from interfaces.bench.processes import TICKS, stop_child, tree_cpu, wait_answering
from interfaces.cli.bench import Api, faucet, rpc

NPM_PACKAGES = ("@x402/core@2", "@x402/svm@2")
REFERENCE_ENV = "PAYWARDEN_PRODUCTION_REFERENCE"  # "fee_payer.json,rpc_url" for the served Python reference

TS_SERVER = """\
import http from "node:http";
import { readFileSync } from "node:fs";
import { createKeyPairSignerFromBytes } from "@solana/kit";
import { x402Facilitator } from "@x402/core/facilitator";
import { toFacilitatorSvmSigner } from "@x402/svm";
import { registerExactSvmScheme } from "@x402/svm/exact/facilitator";

const [keyPath, rpcUrl, network, port] = process.argv.slice(2);
const keypair = await createKeyPairSignerFromBytes(new Uint8Array(JSON.parse(readFileSync(keyPath, "utf8"))));
const facilitator = new x402Facilitator();
const signer = toFacilitatorSvmSigner(keypair, { defaultRpcUrl: rpcUrl });
registerExactSvmScheme(facilitator, { signer, networks: network });
const json = (res, status, body) => {
  const text = JSON.stringify(body, (_, v) => (typeof v === "bigint" ? v.toString() : v));
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
};
http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/supported") return json(res, 200, facilitator.getSupported());
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString());
      const op = req.url === "/verify" ? "verify" : req.url === "/settle" ? "settle" : null;
      if (!op) return json(res, 404, { error: "not_found" });
      json(res, 200, await facilitator[op](body.paymentPayload, body.paymentRequirements));
    } catch (e) {
      json(res, 500, { error: String(e) });
    }
  });
}).listen(Number(port), "127.0.0.1");
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def python_reference_app() -> Any:
    """The x402 SDK's facilitator with its RPC signer, served by FastAPI (uvicorn `--factory`)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from x402 import x402FacilitatorSync
    from x402.mechanisms.svm.exact import ExactSvmFacilitatorScheme
    from x402.mechanisms.svm.signers import FacilitatorKeypairSigner
    from x402.schemas import PaymentPayload, PaymentRequirements

    from domain.networks import DEVNET

    key_path, rpc_url = os.environ[REFERENCE_ENV].split(",", 1)
    facilitator = x402FacilitatorSync()
    facilitator.register([DEVNET.caip2], ExactSvmFacilitatorScheme(
        FacilitatorKeypairSigner(read_keypair(Path(key_path)), rpc_url=rpc_url)))
    from starlette.concurrency import run_in_threadpool

    app = FastAPI()

    def answer(op: str, body: dict) -> JSONResponse:
        payload = PaymentPayload.model_validate(body["paymentPayload"])
        requirements = PaymentRequirements.model_validate(body["paymentRequirements"])
        result = getattr(facilitator, op)(payload, requirements)
        return JSONResponse(result.model_dump(by_alias=True, exclude_none=True))

    async def verify(request: Request) -> JSONResponse:
        return await run_in_threadpool(answer, "verify", await request.json())

    async def settle(request: Request) -> JSONResponse:
        return await run_in_threadpool(answer, "settle", await request.json())

    def supported(request: Request) -> JSONResponse:
        return JSONResponse(facilitator.get_supported().model_dump(by_alias=True, exclude_none=True))

    # Starlette-style routes: the handler takes the request as it is (no parameters for FastAPI to read)
    app.add_route("/verify", verify, methods=["POST"])
    app.add_route("/settle", settle, methods=["POST"])
    app.add_route("/supported", supported, methods=["GET"])
    return app


@dataclass
class Contender:
    name: str
    base_url: str
    api_key: str
    fee_payer: str
    root: int
    extra_pids: Callable[[], list[tuple[str, int]]] = field(default=lambda: [])  # (name, pid): its stores
    trips: Any = None


class Run:
    """The processes, folders and throwaway stores of one invocation; `close` stops and drops them all."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.children: list[subprocess.Popen] = []
        self.cleanups: list[Callable[[], None]] = []

    def spawn(self, argv: list[str], env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.Popen:
        child = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                                 start_new_session=True, **kwargs)
        self.children.append(child)
        return child

    def close(self) -> None:
        for child in reversed(self.children):
            stop_child(child)
        for cleanup in reversed(self.cleanups):
            cleanup()

    def keypair_file(self, name: str) -> tuple[Path, Keypair]:
        keypair, path = Keypair(), self.work / f"{name}.json"
        path.write_text(json.dumps(list(bytes(keypair))))
        return path, keypair

    # -- the node ----------------------------------------------------------------------------------------------

    def localnet(self) -> tuple[str, int]:
        port = free_port()
        child = self.spawn([sys.executable, "-m", "interfaces.cli.main", "localnet", "--port", str(port)],
                           stdout=subprocess.DEVNULL, stderr=(self.work / "localnet.log").open("w"))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                rpc(url, "getLatestBlockhash")
                return url, child.pid
            except OSError:
                if child.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("paywarden localnet did not start") from None
                time.sleep(0.2)

    # -- the peers ---------------------------------------------------------------------------------------------

    def python_reference(self, rpc_url: str) -> Contender:
        key_path, fee_payer = self.keypair_file("python-fee-payer")
        faucet(rpc_url, str(fee_payer.pubkey()), sol="100")
        port = free_port()
        child = self.spawn([sys.executable, "-m", "uvicorn", "--factory",
                            "interfaces.bench.contenders:python_reference_app", "--host", "127.0.0.1", "--port",
                            str(port), "--log-level", "warning", "--no-access-log"],
                           env={REFERENCE_ENV: f"{key_path},{rpc_url}"})
        url = f"http://127.0.0.1:{port}"
        wait_answering(url + "/supported", child, "the Python reference facilitator")
        return Contender("python", url, "-", str(fee_payer.pubkey()), child.pid)

    def typescript(self, rpc_url: str, network: str) -> Contender | str:
        """The TypeScript facilitator, or the reason it is skipped."""
        node, npm = shutil.which("node"), shutil.which("npm")
        if not node or not npm:
            return "node and npm are not installed"
        folder = self.args.npm_folder or self.work / "typescript"
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "node_modules" / "@x402" / "svm").is_dir():
            (folder / "package.json").write_text('{"private": true, "type": "module"}\n')
            try:
                installed = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel", "error",
                                            *NPM_PACKAGES], cwd=folder, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                return "npm install did not finish within 300 s (is the npm registry reachable?)"
            if installed.returncode != 0:
                said = (installed.stderr.strip().splitlines() or ["no output"])[-1]
                return f"npm install {' '.join(NPM_PACKAGES)} failed (is the npm registry reachable?): {said}"
        (folder / "facilitator.mjs").write_text(TS_SERVER)
        key_path, fee_payer = self.keypair_file("typescript-fee-payer")
        faucet(rpc_url, str(fee_payer.pubkey()), sol="100")
        port = free_port()
        child = self.spawn([node, str(folder / "facilitator.mjs"), str(key_path), rpc_url, network, str(port)],
                           cwd=folder, stderr=(self.work / "typescript.log").open("w"))
        url = f"http://127.0.0.1:{port}"
        wait_answering(url + "/supported", child, "the TypeScript facilitator")
        return Contender("typescript", url, "-", str(fee_payer.pubkey()), child.pid)

    # -- Paywarden -----------------------------------------------------------------------------------------------

    def paywarden(self, name: str, rpc_url: str) -> Contender:
        env = {"PAYWARDEN_DATA_DIR": str(self.work / name), "PAYWARDEN_DEVNET_RPC_URL": rpc_url,
               "PAYWARDEN_RATE_LIMIT_PER_KEY": "100000000/minute"}
        workers: int = 1
        extra: Callable[[], list[tuple[str, int]]] = lambda: []  # noqa: E731
        trips = None
        if name == "postgres":
            database, redis_url, redis_pid = self._stores()
            # a loaded machine may take longer than the default 2 s to open the pool at start-up: each answer
            # counted is a success or a visible failure either way
            env |= {"PAYWARDEN_DATABASE_URL": _database_url(self.args.postgres_url, database),
                    "PAYWARDEN_REDIS_URL": redis_url, "PAYWARDEN_DATABASE_TIMEOUT_SECONDS": "10"}
            workers = self.args.workers
            extra = lambda: [("Redis", redis_pid), *(("PostgreSQL", pid) for pid in postgres_backends(database))]  # noqa: E731
            if self.args.store_counts:
                from interfaces.bench.reference import StoreTrips

                trips = StoreTrips(self.args.postgres_url, database, redis_url)
        else:
            for inherited in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL"):
                env[inherited] = ""
        argv = [sys.executable, "-m", "interfaces.cli.main", "up", "--json", "--workers", str(workers)]
        for option in ("--port", "--rpc-port", "--proxy-port", "--console-port"):
            argv += [option, str(free_port())]
        log = (self.work / f"{name}.log").open("w")
        child = self.spawn(argv, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        line = child.stdout.readline() if child.stdout else ""
        if not line.startswith("{"):
            said = (self.work / f"{name}.log").read_text().splitlines()[-5:]
            raise RuntimeError(f"paywarden up ({name}) did not start: " + "\n".join(said or [line]))
        up = json.loads(line)
        supported = Api(up["base_url"], up["api_key"], 10).request("GET", "/supported")[1]
        return Contender(name, up["base_url"], up["api_key"], supported["kinds"][0]["extra"]["feePayer"],
                         child.pid, extra, trips)

    def _stores(self) -> tuple[str, str, int]:
        """A throwaway PostgreSQL database and a redis-server of the run's own: (database, Redis URL, its pid)."""
        import psycopg

        server = shutil.which("redis-server")
        if not server:
            raise RuntimeError("the PostgreSQL + Redis contender needs redis-server (apt-get install redis-server)")
        port = free_port()
        redis = self.spawn([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                            "--dir", str(self.work)], stdout=subprocess.DEVNULL)
        database = f"pw_bench_{secrets.token_hex(4)}"
        with psycopg.connect(self.args.postgres_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')

        def drop() -> None:
            with psycopg.connect(self.args.postgres_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')

        self.cleanups.append(drop)
        return database, f"redis://127.0.0.1:{port}/0", redis.pid


def _database_url(server_url: str, database: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(server_url)._replace(path="/" + database))


def postgres_backends(database: str) -> list[int]:
    """The PostgreSQL server processes serving `database` now (their title names it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    title = f.read().decode(errors="replace")
            except OSError:
                continue
            if title.startswith("postgres: ") and f" {database} " in title:
                pids.append(int(entry))
    return pids


def cpu_of(contender: Contender, node: int) -> dict[int, tuple[str, float]]:
    """CPU seconds by pid of everything a contender's request costs: its processes, the node, its stores."""
    cpu = {pid: ("up (supervisor)" if name == "up (localnet)" else name, seconds)  # the chain is the node here
           for pid, (name, seconds) in tree_cpu(contender.root).items()}
    cpu.update({pid: ("the node (localnet)", s) for pid, (_, s) in tree_cpu(node).items()})
    for name, pid in contender.extra_pids():
        seconds = process_cpu(pid)
        if seconds is not None:
            cpu[pid] = (name, seconds)
    return cpu


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of one process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS
