"""`paywarden-bench` (also `python -m interfaces.bench`): the developers' comparisons, one subcommand each.

The operator's load test of a running deployment is `paywarden bench`; these start what they measure themselves
(docs/performance.md). Building the parser imports only the module of the subcommand asked for.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from importlib import import_module

# subcommand: (module, one line of help). Each module has `add_arguments(parser)` and `run(args) -> int`.
COMMANDS = {
    "reference": ("interfaces.bench.reference", "Paywarden beside the x402 SDK's facilitator, same load"),
    "production": ("interfaces.bench.production", "every facilitator with the chain out of process (one localnet): "
                                                  "the TypeScript and Python references, Paywarden embedded and on "
                                                  "PostgreSQL + Redis, alternating; CPU per request of every process"),
    "floor": ("interfaces.bench.floor", "the CPU of a verify's chain work alone, in one process: the ceiling of one "
                                         "core, beside the reference's own verify"),
    "http-floor": ("interfaces.bench.http_floor", "the HTTP server alone, CPU per request: Paywarden's (gunicorn + "
                                                   "gevent) beside the reference's (uvicorn)"),
    "load": ("interfaces.bench.load", "fill the store with a long history (payments, listings, read models) for "
                                      "the large-store benchmark"),
    "history": ("interfaces.bench.history", "verify and discovery latency on stores with and without a long "
                                            "history, side by side"),
    "proxy": ("interfaces.bench.proxy", "the proxy's added latency over calling the backend directly"),
}


def parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paywarden-bench", description="Paywarden's developer benchmarks "
                                "(docs/performance.md); `paywarden bench` load-tests a running deployment")
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (module, help) in COMMANDS.items():
        sub = commands.add_parser(name, help=help, description=help)
        if name == chosen:
            import_module(module).add_arguments(sub)
            sub.set_defaults(module=module)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(argv).parse_args(argv)
    if signal.getsignal(signal.SIGINT) is signal.SIG_DFL:  # imported: Ctrl-C is a KeyboardInterrupt again
        signal.signal(signal.SIGINT, signal.default_int_handler)
    from interfaces.config import ConfigError

    try:
        return int(import_module(args.module).run(args))
    except ConfigError as refused:
        print(f"paywarden-bench: {refused}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def entry() -> int:
    """The console script: Ctrl-C while Python imports ends the process quietly (as `paywarden`'s entry)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return main()


if __name__ == "__main__":
    sys.exit(main())
