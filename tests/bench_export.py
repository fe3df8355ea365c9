"""The CSV export's memory, measured: `python -m tests.bench_export --payments 100000 [--database-url URL]`.

Fills a fresh store (embedded by default) with one merchant's generated payments (tests/history.py: real
`Payment` events, read models built by the real projections), then, in a fresh process as a worker would be,
streams `GET /api/v1/payments/export` through the console's WSGI app chunk by chunk, as gunicorn sends them,
and samples the process's resident memory (VmRSS) after every chunk. Prints the rows, bytes, seconds and the
resident memory before the request and at its peak. The figures: docs/console.md, "Exporting payments".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fill(data_dir: str, database_url: str, payments: int) -> None:
    from interfaces.config import Config
    from interfaces.container import build
    from interfaces.runtime.workers import catch_up_all
    from tests.history import record_history
    from tests.integration.console_helpers import add_owner

    container = build(Config(data_dir=Path(data_dir), database_url=database_url))
    try:
        container.merchants.register("acme")
        add_owner(container, "acme", "owner@acme.test")
        acme = container.accounts.get_merchant_by_name("acme").merchant_id
        record_history(container.payments, acme, "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin", payments=payments,
                       days=365)
        catch_up_all(container, ["payment_list", "payment_volume", "accounts"])
    finally:
        container.close()


def export(data_dir: str, database_url: str) -> dict[str, float]:
    from falcon import testing

    from interfaces.config import Config
    from interfaces.container import build
    from interfaces.http.console.app import create_app
    from interfaces.http.console.sessions import COOKIE
    from interfaces.wiring import console_collaborators
    from tests.integration.console_helpers import PASSWORD

    container = build(Config(data_dir=Path(data_dir), database_url=database_url))
    app = create_app(console_collaborators(container))
    login = testing.TestClient(app).simulate_post(
        "/api/v1/session", json={"email": "owner@acme.test", "password": PASSWORD},
        headers={"Origin": "http://falconframework.org"})
    cookie = login.cookies[COOKIE].value
    environ = testing.create_environ(path="/api/v1/payments/export", headers={"Cookie": f"{COOKIE}={cookie}"})
    before = peak = rss_kib()
    started, size, rows = time.perf_counter(), 0, -1
    status: list[str] = []
    body = app(environ, lambda s, h, *_: status.append(s))
    for chunk in body:  # what gunicorn does: write each chunk as it comes
        size, rows = size + len(chunk), rows + chunk.count(b"\r\n")
        peak = max(peak, rss_kib())
    getattr(body, "close", lambda: None)()
    container.close()
    assert status and status[0].startswith("200"), status
    return {"rows": rows, "bytes": size, "seconds": round(time.perf_counter() - started, 2),
            "rss_before_mib": round(before / 1024, 1), "rss_peak_mib": round(peak / 1024, 1),
            "rss_growth_mib": round((peak - before) / 1024, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--payments", type=int, default=100_000)
    p.add_argument("--database-url", default="")
    p.add_argument("--export-only", metavar="DATA_DIR", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.export_only:
        print(json.dumps(export(args.export_only, args.database_url)))
        return 0
    with tempfile.TemporaryDirectory(prefix="paywarden-export-") as data_dir:
        started = time.perf_counter()
        fill(data_dir, args.database_url, args.payments)
        print(f"filled {args.payments:,} payments in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        command = [sys.executable, "-m", "tests.bench_export", "--export-only", data_dir]
        if args.database_url:
            command += ["--database-url", args.database_url]
        print(subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
