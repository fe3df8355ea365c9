"""`paywarden-bench history`: does a request cost more on a store with a long history? The same load, side by side.

Each `--store LABEL=URL` gets its own `paywarden up` stack (one worker unless `--workers`), all started first and
left running, on ports of their own. A URL is `sqlite:///DIR` or `postgresql://…/db` (fill one first with
`paywarden-bench load`, or leave it empty), or `copy:DIR`, a fresh copy of the stopped SQLite store in DIR, or
`new`, a new empty one: both made in the run's temporary directory and deleted after it, so a run never changes the
store it measures and every run starts from the same history. Then, for each round, store after store so a change
in the machine's load hits every store alike:

- verify: `--requests` distinct, really signed payments from `--concurrency` clients (`interfaces.cli.bench.drive`);
- discovery: `GET /discovery/resources` queries of each kind (no filter, a type, a common tag, a rare tag, two
  tags, a type and a tag), every request a distinct query (its own offset, below 200), so none is answered from
  the 60-second cache: the catalog is read every time; a few requests for the last page (`deep`); and
  `GET /discovery/search` queries of each kind in `SEARCHES` (one or two words, common or rare), each distinct too.

Each line prints p50 and p99 (ms) and the 1-minute load average; the summary gives each store's medians over the
rounds. Exit status 1 if any verify was not `200 valid` or any query not `200`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from solders.hash import Hash
from solders.keypair import Keypair

from domain.networks import DEVNET
from interfaces.adapters.signers import read_keypair
from interfaces.bench.load import TAGS
from interfaces.bench.processes import cpu_delta, stop_child, tree_cpu
from interfaces.cli.bench import Report, drive, faucet, rpc, run_clients, sign_payments

QUERIES = {
    "all": {},
    "type": {"type": "grpc"},
    "tag": {"tags": TAGS[0]},
    "rare tag": {"tags": TAGS[120]},
    "two tags": {"tags": f"{TAGS[1]},{TAGS[3]}"},
    "type+tag": {"type": "http", "tags": TAGS[2]},
}
# `--direct` also times the filters and the search (docs/discovery.md). `{n}` is each query's own number, so a
# rare word differs from query to query; `{pay_to}` a wallet of the store's (its first in the catalog's terms).
FILTERED: dict[str, dict[str, Any]] = {
    "network": {"terms": ("network:{devnet}",)},
    "payTo": {"terms": ("payTo:{pay_to}",)},
    "network+payTo": {"terms": ("network:{devnet}", "payTo:{pay_to}")},
    "network+tag": {"terms": ("network:{devnet}",), "tags": TAGS[2]},
}
SEARCHES = {
    "1 word": "benchmark",  # in every listing's description: 100,000 matches
    "1 rare word": "{n}",  # a listing's number: in its title, description and path
    "1 word tag": TAGS[1],  # a tag: the exact-match tier
    "2 words": "synthetic benchmark",
    "2 words rare": "resource {n}",
    "2 words+net": "large store",  # with the network filter
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", action="append", required=True, metavar="LABEL=URL",
                   help="a store to measure: sqlite:///DIR or postgresql://…/db, or copy:DIR (a fresh copy of a "
                        "stopped SQLite store, deleted after the run) or new (an empty one); repeat, the order is "
                        "kept")
    p.add_argument("--rounds", type=int, default=2, help="rounds over every store (default 2)")
    p.add_argument("--requests", type=int, default=1500, help="verifies per run (default 1500)")
    p.add_argument("--warmup", type=int, default=200, help="verifies before the first round, not counted")
    p.add_argument("--concurrency", type=int, default=8, help="verify clients (default 8)")
    p.add_argument("--queries", type=int, default=60,
                   help="discovery requests per kind per run (default 60; 0: verify only, no discovery)")
    p.add_argument("--query-concurrency", type=int, default=4, help="discovery clients (default 4)")
    p.add_argument("--workers", type=int, default=1, help="API workers of each stack (default 1)")
    p.add_argument("--base-port", type=int, default=18400, help="stack i listens on base-port + 4·i to + 4·i + 3")
    p.add_argument("--direct", action="store_true",
                   help="discovery only, in this process: time the catalog query itself (`list_resources` on each "
                        "store's catalog view, no HTTP, no cache); no stack is started")
    p.add_argument("--json", action="store_true", help="also print every run as one JSON line")


def _start(label: str, url: str, index: int, args: argparse.Namespace, work: Path, children: list) -> dict[str, Any]:
    data_dir = Path(url.removeprefix("sqlite://")) if url.startswith("sqlite://") else work / f"data-{index}"
    env = {**os.environ, "PAYWARDEN_DATA_DIR": str(data_dir), "PAYWARDEN_DATABASE_URL": url,
           "PAYWARDEN_RATE_LIMIT_PER_IP": "100000000/minute"}
    port = args.base_port + 4 * index  # the API, the localnet, the console, the proxy (no --demo: no demo ports)
    argv = [sys.executable, "-m", "interfaces.cli.main", "up", "--json", "--workers", str(args.workers),
            "--port", str(port), "--rpc-port", str(port + 1), "--console-port", str(port + 2),
            "--proxy-port", str(port + 3)]
    log = (work / f"{index}.log").open("w")
    child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True,
                             start_new_session=True)
    children.append(child)
    line, skipped = "", list[str]()
    while child.stdout and not line.startswith('{"base_url"'):  # a worker's own line may come first
        line = child.stdout.readline()
        if not line:
            raise RuntimeError(f"{label}: paywarden up did not start (status {child.poll()}, printed {skipped}, "
                               f"see {work}/{index}.log)")
        skipped.append(line.strip())
    up = json.loads(line)
    subprocess.run([sys.executable, "-m", "interfaces.cli.main", "merchant", "set-rate-limit", up["merchant"],
                    "--per-minute", "100000000"], env=env, check=True, stdout=subprocess.DEVNULL)
    status, supported = _get(up["base_url"], "/supported", up["api_key"])
    kind = supported["kinds"][0]
    payer = read_keypair(Path(up["payer_keypair_path"]))
    pay_to = str(Keypair().pubkey())
    faucet(up["rpc_url"], pay_to, usdc_atomic=1)
    faucet(up["rpc_url"], str(payer.pubkey()), usdc_atomic=10**12, sol="1")
    return {**up, "label": label, "pid": child.pid, "payer": payer, "pay_to": pay_to,
            "fee_payer": kind["extra"]["feePayer"], "network": kind["network"]}


def _get(base_url: str, path: str, api_key: str | None = None) -> tuple[int, Any]:
    host, _, port = base_url.removeprefix("http://").partition(":")
    conn = http.client.HTTPConnection(host, int(port.split("/")[0]), timeout=60)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def _bodies(stack: dict[str, Any], count: int) -> list[bytes]:
    blockhash = Hash.from_string(rpc(stack["rpc_url"], "getLatestBlockhash")["value"]["blockhash"])
    return sign_payments(stack["payer"], count, fee_payer=stack["fee_payer"], network=stack["network"],
                         pay_to=stack["pay_to"], amount=1000, blockhash=blockhash)


def _queries(stack: dict[str, Any], paths: list[str], concurrency: int) -> Report:
    """GET each path once, `concurrency` at a time, on keep-alive connections."""
    report = Report("discovery", len(paths), concurrency, 0.0)
    lock, cursor = threading.Lock(), iter(paths)
    host, _, port = stack["base_url"].removeprefix("http://").partition(":")

    def client() -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        while True:
            with lock:
                path = next(cursor, None)
            if path is None:
                break
            started = time.perf_counter()
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                answer = str(resp.status)
            except (OSError, http.client.HTTPException) as failed:
                conn.close()
                answer = f"error {type(failed).__name__}"
            with lock:
                report.latencies_ms.append((time.perf_counter() - started) * 1000)
                report.answers[answer] += 1
        conn.close()

    return run_clients(client, concurrency, report)


def _cpu_line(spent: dict[str, float], requests: int) -> dict[str, float]:
    """CPU per verify of each process of the stack (ms), over the run and the second after it: what the loaded
    store costs more, whatever the machine's other load does to the latencies."""
    per = {name: round(1000 * seconds / requests, 3) for name, seconds in sorted(spent.items())}
    print(f"{'':>12} CPU per verify: {round(sum(per.values()), 3)} ms = "
          + ", ".join(f"{name} {ms}" for name, ms in per.items() if ms >= 0.005), flush=True)
    return per


def _line(stack: dict[str, Any], what: str, report: Report, load: float) -> dict[str, Any]:
    d = report.as_dict()
    print(f"{stack['label']:>12} {what:>9}: p50 {d['p50_ms']:>8} ms  p99 {d['p99_ms']:>8} ms  "
          f"{d['throughput']:>7} /s  load {load:.1f} → {os.getloadavg()[0]:.1f}  {d['answers']}", flush=True)
    return {"store": stack["label"], "what": what, "load_1min_before": round(load, 2),
            "load_1min_after": round(os.getloadavg()[0], 2), **d}


def run(args: argparse.Namespace) -> int:
    stores = [s.partition("=") for s in args.store]
    if any(not label or not url for label, _, url in stores):
        print("paywarden-bench history: --store LABEL=URL (sqlite:///DIR, postgresql://…, copy:DIR or new)",
              file=sys.stderr)
        return 2
    if args.direct:
        with tempfile.TemporaryDirectory(prefix="pw-bench-history-") as tmp:
            return _direct([(label, sep, store_url(url, i, Path(tmp)))
                            for i, (label, sep, url) in enumerate(stores)], args)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pw-bench-history-") as tmp:
        work, children = Path(tmp), list[subprocess.Popen[str]]()
        try:
            urls = [store_url(url, i, work) for i, (_, _, url) in enumerate(stores)]
            os.sync()  # the copies on the disk before the clock starts, not written back during the first round
            stacks = [_start(label, url, i, args, work, children)
                      for i, ((label, _, _), url) in enumerate(zip(stores, urls, strict=True))]
            for stack in stacks:
                if args.warmup:
                    drive(_bodies(stack, args.warmup), base_url=stack["base_url"], api_key=stack["api_key"],
                          op="verify", concurrency=args.concurrency, timeout=60, label=f"warm-up {stack['label']}")
                status, page = _get(stack["base_url"], "/discovery/resources?limit=1")
                stack["listings"] = page["pagination"]["total"] if status == 200 else 0
                print(f"{stack['label']}: {stack['listings']} listings in the catalog", flush=True)
            for round_ in range(args.rounds):
                for stack in stacks:
                    bodies = _bodies(stack, args.requests)
                    load, cpu = os.getloadavg()[0], tree_cpu(stack["pid"])
                    report = drive(bodies, base_url=stack["base_url"], api_key=stack["api_key"], op="verify",
                                   concurrency=args.concurrency, timeout=60, label=f"{stack['label']} verify",
                                   progress=False)
                    runs.append(_line(stack, "verify", report, load))
                    time.sleep(1.0)  # the followers finish their share of this run's events
                    runs[-1]["cpu_ms_per_verify"] = _cpu_line(cpu_delta(cpu, tree_cpu(stack["pid"])), args.requests)
                    if not args.queries:
                        continue
                    for kind, params in QUERIES.items():
                        offsets = range(round_ * 200 // args.rounds,
                                        round_ * 200 // args.rounds + args.queries)
                        paths = [f"/discovery/resources?{urlencode({**params, 'offset': o % 200, 'limit': 20})}"
                                 for o in offsets]
                        load = os.getloadavg()[0]
                        runs.append(_line(stack, kind, _queries(stack, paths, args.query_concurrency), load))
                    for kind, words in SEARCHES.items():
                        net = {"network": DEVNET.caip2} if kind.endswith("+net") else {}
                        queries = [{"query": search_words(words, round_, n, args), **net} for n in range(args.queries)]
                        paths = [f"/discovery/search?{urlencode(q)}" for q in queries]
                        load = os.getloadavg()[0]
                        runs.append(_line(stack, f"search {kind}", _queries(stack, paths, args.query_concurrency),
                                          load))
                    deep = [f"/discovery/resources?{urlencode({'offset': max(stack['listings'] - 20 - n, 0)})}"
                            for n in range(round_ * 10, round_ * 10 + 10)]
                    load = os.getloadavg()[0]
                    runs.append(_line(stack, "deep", _queries(stack, deep, 1), load))
        finally:
            for child in reversed(children):
                stop_child(child)
    _summary(runs)
    if args.json:
        print(json.dumps(runs))
    clean = all(set(r["answers"]) == ({"200 valid"} if r["what"] == "verify" else {"200"}) for r in runs)
    return 0 if clean else 1


def store_url(url: str, index: int, work: Path) -> str:
    """The store a `--store` names: `copy:DIR` a fresh copy of DIR and `new` a new empty directory, both in `work`
    (the run's temporary directory); any other URL as it is."""
    if url != "new" and not url.startswith("copy:"):
        return url
    directory = work / f"store-{index}"
    if url == "new":
        directory.mkdir()
        return f"sqlite://{directory}"
    source = Path(url.removeprefix("copy:"))
    if not (source / "payments.db").is_file():
        raise SystemExit(f"paywarden-bench history: {url}: no SQLite store there (payments.db); "
                         "fill one with `paywarden-bench load`")
    shutil.copytree(source, directory, symlinks=True)
    return f"sqlite://{directory}"


def _direct(stores: list[tuple[str, str, str]], args: argparse.Namespace) -> int:
    """Each kind of query `--queries` times per round on each store's catalog view, rounds alternating stores."""
    from interfaces.config import Config
    from interfaces.container import build_view
    from projections.catalog import SqliteCatalogView, list_resources

    views = []
    for label, _, url in stores:
        data_dir = Path(url.removeprefix("sqlite://")) if url.startswith("sqlite://") else Path(tempfile.gettempdir())
        view = build_view(Config(database_url=url, data_dir=data_dir), "catalog", SqliteCatalogView)
        total = list_resources(view, limit=1).total
        print(f"{label}: {total} listings in the catalog", flush=True)
        views.append((label, view, total))
    runs: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        for label, view, total in views:
            kinds: dict[str, dict[str, Any]] = {**QUERIES, "deep": {"offset": max(total - 20, 0)}}
            for kind, params in kinds.items():
                report = Report("discovery", args.queries, 1, 0.0)
                load, started = os.getloadavg()[0], time.perf_counter()
                for n in range(args.queries):
                    tags = tuple(t for t in params.get("tags", "").split(",") if t)
                    offset = params.get("offset", (round_ * args.queries + n) % 200)
                    began = time.perf_counter()
                    list_resources(view, kind=params.get("type"), tags=tags, limit=20, offset=offset)
                    report.latencies_ms.append((time.perf_counter() - began) * 1000)
                    report.answers["ok"] += 1
                report.seconds = time.perf_counter() - started
                runs.append(_line({"label": label}, kind, report, load))
            runs += _direct_search(label, view, round_, args)
    for _, view, _ in views:
        view.datastore.close()
    _summary(runs)
    if args.json:
        print(json.dumps(runs))
    return 0


def search_words(words: str, round_: int, n: int, args: argparse.Namespace) -> str:
    """Query `n` of a round: `{n}` a number of its own, and as many `!` before and `.` after as make it a query of
    its own (the search ignores them; the 60-second cache's key does not), so none is answered from the cache."""
    number = round_ * args.queries + n
    return f"{'!' * (number % 50)}{words.format(n=number * 7919 % 100_000)}{'.' * (number // 50 % 100)}"


def _direct_search(label: str, view: Any, round_: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The filtered list pages and the searches, each `--queries` times."""
    from projections.catalog import list_resources, search_resources

    found = view.rows("SELECT term FROM catalog_terms WHERE term LIKE ? ORDER BY term LIMIT 1", ("payTo:%",))
    names = {"devnet": DEVNET.caip2, "pay_to": found[0][0].removeprefix("payTo:") if found else "none"}
    runs = []
    timed: list[tuple[str, Any]] = []
    for kind, params in FILTERED.items():
        terms = tuple(t.format(**names) for t in params["terms"])
        tags = tuple(t for t in params.get("tags", "").split(",") if t)
        timed.append((f"list {kind}", lambda n, terms=terms, tags=tags: list_resources(
            view, tags=tags, terms=terms, limit=20, offset=(round_ * args.queries + n) % 200)))
    for kind, words in SEARCHES.items():
        terms = (f"network:{DEVNET.caip2}",) if kind.endswith("+net") else ()
        timed.append((f"search {kind}", lambda n, words=words, terms=terms: search_resources(
            view, search_words(words, round_, n, args), terms=terms, limit=20)))
    for kind, query in timed:
        report = Report("discovery", args.queries, 1, 0.0)
        load, started = os.getloadavg()[0], time.perf_counter()
        for n in range(args.queries):
            began = time.perf_counter()
            query(n)
            report.latencies_ms.append((time.perf_counter() - began) * 1000)
            report.answers["ok"] += 1
        report.seconds = time.perf_counter() - started
        runs.append(_line({"label": label}, kind, report, load))
    return runs


def _summary(runs: list[dict[str, Any]]) -> None:
    print("medians over the rounds (p50 / p99 ms):")
    labels = list(dict.fromkeys(r["store"] for r in runs))
    kinds = list(dict.fromkeys(r["what"] for r in runs))
    print(f"{'':>20} " + "".join(f"{label:>24}" for label in labels))
    for kind in kinds:
        cells = []
        for label in labels:
            mine = [r for r in runs if r["store"] == label and r["what"] == kind]
            cells.append(f"{statistics.median(r['p50_ms'] for r in mine):>10.2f} / "
                         f"{statistics.median(r['p99_ms'] for r in mine):>9.2f}")
        print(f"{kind:>20} " + "".join(f"{c:>24}" for c in cells))
    for label in labels:  # CPU per verify of each process, median over the rounds
        measured = [r["cpu_ms_per_verify"] for r in runs if r["store"] == label and "cpu_ms_per_verify" in r]
        if measured:
            names = sorted({name for m in measured for name in m})
            medians = {n: statistics.median(m.get(n, 0.0) for m in measured) for n in names}
            print(f"{label}: CPU per verify (median ms) {statistics.median(sum(m.values()) for m in measured):.2f}"
                  " = " + ", ".join(f"{n} {ms:.2f}" for n, ms in medians.items() if ms >= 0.005))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="paywarden-bench history", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
