"""Each import-linter contract goes red on the leak it is for: adds one offending import at a time, runs
`lint-imports`, prints the contracts it broke, and restores the file (even on failure).

Run from the checkout, with nothing else editing it: `COLUMNS=200 .venv/bin/python -m tests.import_contracts_demo`.
Exits 1 if a leak leaves every contract kept. The output of a run is in docs/code-rules.md.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

LEAKS = [  # (file, the offending import, what it is)
    ("domain/payment.py", "import httpx", "domain imports httpx"),
    ("domain/payment.py", "import limits", "domain imports limits"),
    ("domain/payment.py", "import prometheus_client", "domain imports prometheus_client"),
    ("domain/payment.py", "import eventsourcing.postgres", "domain imports eventsourcing.postgres"),
    ("domain/payment.py", "from application import ports", "domain imports the application"),
    ("application/payments.py", "import redis", "application imports redis"),
    ("application/payments.py", "from eventsourcing import sqlite", "application imports eventsourcing.sqlite"),
    ("projections/results.py", "import falcon", "projections import falcon"),
    ("projections/results.py", "import redis", "projections import redis"),
    ("projections/results.py", "import marshmallow", "projections import marshmallow"),
    ("interfaces/http/console/api.py", "from interfaces.http.proxy import app as _proxy_app",
     "the console imports the proxy app"),
    ("interfaces/http/discovery/resources.py", "from interfaces.http.facilitator import payments as _payments",
     "discovery imports the facilitator"),
    ("interfaces/http/common/auth.py", "from interfaces.http.console import sessions as _sessions",
     "http/common imports the console"),
    ("interfaces/adapters/redis.py", "from interfaces.http.common import errors as _errors",
     "an adapter imports http"),
    ("interfaces/http/facilitator/app.py", "from interfaces.container import Container as _Container",
     "the API app imports the container"),
    ("interfaces/http/console/pages.py", "from interfaces.wiring import console_collaborators as _wired",
     "the console imports the wiring"),
    ("interfaces/runtime/probes.py", "from interfaces import container as _container",
     "the probes import the container"),
    ("interfaces/cli/webhooks.py", "from interfaces.cli.main import parser as _parser",
     "a CLI command module imports main"),
    ("interfaces/cli/context.py", "from interfaces.cli import audit as _audit",
     "the CLI's shared context imports a command module"),
    ("interfaces/cli/bench.py", "from interfaces.bench import reference as _reference",
     "the operator's CLI imports the developers' benchmarks"),
]


def with_leak(path: str, statement: str) -> subprocess.CompletedProcess[str]:
    file = pathlib.Path(path)
    original = file.read_text()
    lines = original.split("\n")
    last_import = max(n for n, text in enumerate(lines)
                      if text.startswith(("import ", "from ")) and not text.startswith("from __future__"))
    lines.insert(last_import + 1, statement + "  # deliberate leak")
    file.write_text("\n".join(lines))
    try:
        return subprocess.run([".venv/bin/lint-imports", "--no-cache"], capture_output=True, text=True)
    finally:
        file.write_text(original)


def main() -> int:
    all_red = True
    for path, statement, what in LEAKS:
        run = with_leak(path, statement)
        report = run.stdout.split("\n")
        broken = [text.strip() for text in report if " BROKEN" in text]
        print(f"### {what}: `{statement}` in {path} -> exit {run.returncode}")
        for text in broken + [text.strip() for text in report if text.startswith("Contracts:")]:
            print(f"    {text}")
        all_red &= run.returncode == 1 and bool(broken)
    return 0 if all_red else 1


if __name__ == "__main__":
    sys.exit(main())
