"""The CPU of a verify in one process, through the API's Falcon app and the real stores (no socket, no gunicorn):
what docs/performance.md's A/B comparisons of how eventsourcing is used ("eventsourcing through its supported
surface") measure, one process per variant, alternating.

    python -m tests.store_ab                     # embedded SQLite stores, gevent-patched as an API worker is
    python -m tests.store_ab --postgres-url postgresql://postgres@127.0.0.1:5432/postgres --redis-url redis://…/6

Run it from each checkout compared (`PYTHONPATH=<checkout>` and the checkout as the working directory), in turns.
Each round verifies `--payments` distinct payments, signed before the round, and prints one JSON line: the
process's CPU (every thread: the API's code, the stores' client side, the in-process sandbox chain) and wall time
per verify. On PostgreSQL a throwaway database is made on the server of `--postgres-url` and dropped after.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.store_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--payments", type=int, default=1000, help="verifies per round (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, after one of warm-up (default 3)")
    parser.add_argument("--postgres-url", help="PostgreSQL server (a database is made on it) instead of SQLite")
    parser.add_argument("--redis-url", help="an empty Redis database, with --postgres-url")
    parser.add_argument("--no-gevent", action="store_true", help="do not patch the process with gevent")
    args = parser.parse_args(argv)
    if not args.no_gevent:
        from gevent import monkey  # type: ignore[import-untyped]

        monkey.patch_all()
    from interfaces.sandbox.chain import Sandbox
    from tests.conftest import make_gateway

    options: dict[str, str] = {"rate_limit_per_key": "1000000/minute"}
    database = None
    if args.postgres_url:
        from tests.services import drop_postgres_database, fresh_postgres_database

        database = fresh_postgres_database()
        options.update(database_url=database, redis_url=args.redis_url or "")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            gateway = make_gateway(Path(tmp), Sandbox(), **options)
            try:
                for round_ in range(args.rounds + 1):
                    bodies = [gateway.body(amount=10_000 + round_ * args.payments + i) for i in range(args.payments)]
                    cpu, wall = time.process_time(), time.perf_counter()
                    for body in bodies:
                        answer = gateway.post("/verify", body)
                        if answer.status_code != 200 or not answer.json["isValid"]:
                            raise SystemExit(f"store_ab: a verify answered {answer.status_code} {answer.text}")
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                    if round_:
                        print(json.dumps({"round": round_, "cpu_us": round(cpu / args.payments * 1e6, 1),
                                          "wall_us": round(wall / args.payments * 1e6, 1)}), flush=True)
            finally:
                gateway.container.close()
    finally:
        if database:
            drop_postgres_database(database)
    return 0


if __name__ == "__main__":
    sys.exit(main())
