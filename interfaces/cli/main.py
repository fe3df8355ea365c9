"""`paywarden`: the command line of operators (and, until the console exists, of merchants)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Sequence
from importlib import import_module

from domain.merchant import MerchantError
from domain.proxy_service import ProxyServiceError
from domain.webhook import WebhookError
from interfaces.cli import context
from interfaces.config import Config, ConfigError, default_data_dir, load_config
from interfaces.runtime.supervisor import exit_with_parent, supervise


def _upgrade_store(config: Config) -> int:
    """Before any worker serves: the claims a store written by an earlier release lacks (application/upgrades.py,
    docs/facilitator.md, the upgrade rule). Several hosts starting at once each run it; one records each claim."""
    from application.payments import Payments
    from application.upgrades import backfill_claims
    from interfaces.container import PAYMENTS_STORE, store_env

    payments = Payments(store_env(config, PAYMENTS_STORE))
    try:
        if added := backfill_claims(payments):
            logging.getLogger("paywarden.serve").warning(
                "upgrade: claimed the transactions of %d payment(s) recorded by an earlier release", added)
        return added
    finally:
        payments.close()


def upgrade(args: argparse.Namespace) -> int:
    added = _upgrade_store(load_config())
    print(f"{added} claim(s) added to payments recorded by an earlier release", file=sys.stderr)
    return 0


def serve(args: argparse.Namespace) -> int:
    config = load_config()
    args.bind = args.bind or config.bind
    args.workers = args.workers or config.workers
    if args.workers > 1 and config.sandbox and not config.devnet_rpc_url:
        raise ConfigError("the in-process sandbox chain lives in one process: use --workers 1, "
                          "or run `paywarden localnet` and set PAYWARDEN_DEVNET_RPC_URL")
    if args.workers > 1 and os.environ.get("PAYWARDEN_LOCALNET_BIND"):
        raise ConfigError("the hosted localnet lives in the API worker: use --workers 1")
    if args.workers > 1 and not config.redis_url:
        raise ConfigError("several workers share locks and rate limits through Redis: set PAYWARDEN_REDIS_URL, "
                          "or use --workers 1")
    from interfaces.runtime.observability import configure_logging
    from interfaces.runtime.startup import preflight

    preflight(config)  # an unreachable database or Redis stops here, with exit status 2
    _check_webhook_settings(config)
    if args.console_bind:
        from interfaces.adapters.secret_box import CONSOLE_CSRF, derived_key

        derived_key(config, CONSOLE_CSRF)  # production: PAYWARDEN_SECRET_KEY, before anything starts
    _check_bind(args.bind, "the API", "--bind")
    if args.proxy_bind:
        _check_bind(args.proxy_bind, "the proxy", "--proxy-bind")
        if not config.proxy_url and not config.sandbox:  # gateway URLs never come from a client's Host
            raise ConfigError("the proxy needs its public address: set PAYWARDEN_PROXY_URL (https://…)")
        os.environ.setdefault("PAYWARDEN_PROXY_URL", config.proxy_url or f"http://{args.proxy_bind}")
    if os.environ.get("PAYWARDEN_LOCALNET_BIND"):
        _check_bind(os.environ["PAYWARDEN_LOCALNET_BIND"], "the localnet", "--rpc-port")
    configure_logging()  # the supervisor's lines too are JSON on stderr
    _upgrade_store(config)
    own = [b for b in (args.bind, args.proxy_bind, args.console_bind, os.environ.get("PAYWARDEN_LOCALNET_BIND")) if b]
    os.environ.update(PAYWARDEN_BIND=args.bind, PAYWARDEN_WORKERS=str(args.workers),
                      PAYWARDEN_CONSOLE_BIND=args.console_bind or "",
                      PAYWARDEN_OWN_PORTS=",".join(b.rpartition(":")[2] for b in own))
    # interfaces.cli.entry: Ctrl-C while gunicorn boots prints no traceback
    argv = [sys.executable, "-m", "interfaces.cli.entry", "gunicorn",
            "--config", "python:interfaces.runtime.gunicorn_conf", "interfaces.http.facilitator.wsgi:application"]
    # The proxy is its own gunicorn on its own listener (interfaces/http/proxy/wsgi.py), beside the API.
    # (without the console's and the hosted localnet's listeners, which the API's gunicorn holds)
    proxy = [("env", f"PAYWARDEN_BIND={args.proxy_bind}", "PAYWARDEN_CONSOLE_BIND=", "PAYWARDEN_LOCALNET_BIND=",
              sys.executable, "-m", "interfaces.cli.entry", "gunicorn",
              "--config", "python:interfaces.runtime.gunicorn_conf", "interfaces.http.proxy.wsgi:application")
             ] if args.proxy_bind else []
    if args.no_projections and not proxy:  # the operator runs `paywarden project` on its own
        os.execvp(sys.executable, argv)
    if args.no_projections:
        code = supervise(argv, None, also=proxy)
    else:
        code = supervise(argv, [sys.executable, "-m", "interfaces.cli.entry", "interfaces.cli.main", "project",
                                "--exit-with-parent"],
                         [sys.executable, "-m", "interfaces.cli.entry", "interfaces.cli.main", "webhooks",
                          "--exit-with-parent"],
                         also=proxy)
    # Every child has exited and been reaped: skip the interpreter's teardown, as `up` does (a stop within 2 s).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _check_webhook_settings(config) -> None:
    """The webhook worker's settings and PAYWARDEN_SECRET_KEY, read before anything starts (the worker would
    otherwise refuse them only once running)."""
    from interfaces.adapters.secret_box import build_secret_box
    from interfaces.runtime.webhook_worker import load_settings

    load_settings()
    build_secret_box(config)


def _check_bind(bind: str, what: str, option: str) -> None:
    from interfaces.cli.up import bind_error, port_error

    host, _, port = bind.rpartition(":")
    if host and port.isdigit():
        busy = bind_error(host.strip("[]"), int(port))
        if busy is not None:
            raise port_error(host, int(port), what, option, busy)


def project(args: argparse.Namespace) -> int:
    from interfaces.runtime import workers
    from interfaces.runtime.observability import configure_logging

    unknown = [name for name in args.names if name not in workers.PROJECTIONS]
    if unknown:
        raise ConfigError(f"no projection named {', '.join(unknown)}; known: {', '.join(workers.PROJECTIONS)}")
    configure_logging()
    stop = threading.Event()
    if args.exit_with_parent:
        exit_with_parent(stop)
    try:
        workers.run(context.container(beside_up=False), args.names, stop)
    except ValueError as unavailable:  # an unknown read model, or one this configuration has not
        raise ConfigError(str(unavailable)) from None
    return context.leave(0) if args.exit_with_parent else 0


def up(args: argparse.Namespace) -> int:
    from interfaces.cli.up import run

    code = run(args)
    # Every child is stopped and reaped and every server shut down: skip the interpreter's teardown (LiteSVM,
    # threads), which under load adds most of a second to Ctrl-C.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def localnet(args: argparse.Namespace) -> int:
    from interfaces.cli.up import port_error
    from interfaces.sandbox.localnet import serve_localnet

    try:
        serve_localnet(args.host, args.port, on_ready=lambda server: print(f"localnet listening on {server.url}",
                                                                           flush=True))
    except OSError as busy:
        raise port_error(args.host, args.port, "the localnet", "--port", busy) from None
    return 0


def faucet(args: argparse.Namespace) -> int:
    import httpx

    url = args.rpc_url or load_config().devnet_rpc_url or "http://127.0.0.1:8899"
    try:
        answer = httpx.post(f"{url.rstrip('/')}/faucet", timeout=10,
                            json={"address": args.address, "usdc": args.usdc, "sol": args.sol})
    except httpx.HTTPError as down:
        raise ConfigError(f"no faucet at {url}: {down}") from None
    if answer.status_code != 200:
        raise ConfigError(f"the faucet refused: {answer.text}")
    print(answer.text)
    return 0


def bench(args: argparse.Namespace) -> int:
    from interfaces.cli.bench import run

    return run(args)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paywarden", description="x402 exact payments in USDC on Solana",
                                epilog=_store_note(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                   help="print the version and exit")
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from interfaces.cli.merchants import add_commands

    add_commands(commands, context.container)  # merchant, key, capability, domain

    s = commands.add_parser("serve", help="run the API under gunicorn with gevent workers")
    s.add_argument("--bind", help="HOST:PORT (default PAYWARDEN_BIND, else 127.0.0.1:8402)")
    s.add_argument("--workers", type=int, help="gunicorn worker processes (default PAYWARDEN_WORKERS, else 1)")
    s.add_argument("--proxy-bind", help="also run the transparent proxy on HOST:PORT (e.g. 127.0.0.1:8405)")
    s.add_argument("--console-bind", metavar="HOST:PORT",
                   help="also serve the merchant console there (docs/console.md); default: not served")
    s.add_argument("--no-projections", action="store_true",
                   help="do not start the projection and webhook workers (run `paywarden project` and "
                        "`paywarden webhooks` yourself)")
    s.set_defaults(func=serve)

    ug = commands.add_parser("upgrade", help="record what a store written by an earlier release lacks (`serve` "
                                             "does it at start; docs/facilitator.md)")
    ug.set_defaults(func=upgrade)

    pr = commands.add_parser("project", help="run projection workers (read models) until interrupted")
    pr.add_argument("names", nargs="*", help="projections to run (default: all)")
    pr.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
    pr.set_defaults(func=project)

    u = commands.add_parser("up", help="start the whole sandbox stack: localnet, API, projections (Ctrl-C stops)")
    from interfaces.cli.up import add_arguments as up_arguments

    up_arguments(u)
    u.set_defaults(func=up)

    ln = commands.add_parser("localnet", help="run the sandbox chain alone (Solana JSON-RPC over LiteSVM)")
    ln.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ln.add_argument("--port", type=int, default=8899, help="JSON-RPC port (default 8899)")
    ln.set_defaults(func=localnet)

    fc = commands.add_parser("faucet", help="fund a wallet on the sandbox chain with SOL and test USDC")
    fc.add_argument("address", help="the wallet to fund (base58)")
    fc.add_argument("--usdc", default="10", help="test USDC to mint (decimal, default 10)")
    fc.add_argument("--sol", default="1", help="SOL to airdrop (decimal, default 1)")
    fc.add_argument("--rpc-url", help="the localnet (default PAYWARDEN_DEVNET_RPC_URL or http://127.0.0.1:8899)")
    fc.set_defaults(func=faucet)

    from interfaces.cli.webhooks import add_commands as webhooks_commands

    webhooks_commands(commands)

    from interfaces.cli.proxy import add_commands as proxy_commands

    proxy_commands(commands)

    from interfaces.cli.payments import add_commands as payments_commands

    payments_commands(commands)

    from interfaces.cli.bench import add_arguments

    b = commands.add_parser("bench", help="load-test a running Paywarden with real signed payments")
    add_arguments(b)
    b.set_defaults(func=bench)

    from interfaces.cli.audit import add_parser as audit_commands
    from interfaces.cli.audit import add_witness_parser

    audit_commands(commands)
    add_witness_parser(commands)

    from interfaces.cli.bench_reference import add_arguments as reference_arguments

    r = commands.add_parser("bench-reference", help="Paywarden beside the x402 SDK's facilitator, same load")
    reference_arguments(r)
    r.set_defaults(func=lambda args: import_module("interfaces.cli.bench_reference").run(args))

    from interfaces.cli.bench_load import add_arguments as load_arguments

    bl = commands.add_parser("bench-load", help="fill the store with a long history (payments, listings, read "
                                                "models) for the large-store benchmark")
    load_arguments(bl)
    bl.set_defaults(func=lambda args: import_module("interfaces.cli.bench_load").run(args))

    from interfaces.cli.bench_history import add_arguments as history_arguments

    bh = commands.add_parser("bench-history", help="verify and discovery latency on stores with and without a "
                                                   "long history, side by side")
    history_arguments(bh)
    bh.set_defaults(func=lambda args: import_module("interfaces.cli.bench_history").run(args))

    from interfaces.cli.bench_floor import add_arguments as floor_arguments

    bf = commands.add_parser("bench-floor", help="the CPU of a verify's chain work alone, in one process: the "
                                                 "ceiling of one core, beside the reference's own verify")
    floor_arguments(bf)
    bf.set_defaults(func=lambda args: import_module("interfaces.cli.bench_floor").run(args))

    from interfaces.cli.bench_http_floor import add_arguments as http_floor_arguments

    bh2 = commands.add_parser("bench-http-floor", help="the HTTP server alone, CPU per request: Paywarden's "
                                                        "(gunicorn + gevent) beside the reference's (uvicorn)")
    http_floor_arguments(bh2)
    bh2.set_defaults(func=lambda args: import_module("interfaces.cli.bench_http_floor").run(args))
    _note_store_in_help(commands, skip={"localnet", "faucet", "bench", "bench-reference", "bench-history",
                                                  "bench-floor", "bench-http-floor"})
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("paywarden")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _store_note() -> str:
    """Which store the commands open, absolute: it does not depend on the working directory."""
    url = os.environ.get("PAYWARDEN_DATABASE_URL", "").strip()
    if url.startswith(("postgresql://", "postgres://")):
        return "store: the PostgreSQL database of PAYWARDEN_DATABASE_URL"
    return f"data directory: {default_data_dir()} (set PAYWARDEN_DATA_DIR to use another)"


def _note_store_in_help(commands: argparse._SubParsersAction, skip: set[str]) -> None:
    """Every command that opens the store names it (absolute) at the end of its --help."""
    for name, sub in commands.choices.items():
        if name in skip:
            continue
        sub.epilog = _store_note()
        sub.formatter_class = argparse.RawDescriptionHelpFormatter  # the path on one line, never wrapped
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                _note_store_in_help(action, skip=set())


def check_environment() -> None:
    """Every variable of README.md's table, read and checked before any command does anything: one bad value stops
    every command with one line naming it (exit 2). What is *required* (production's fee payers, the secret key)
    is asked for only by the commands that need it."""
    from interfaces.adapters.secret_box import ENV as SECRET_KEY
    from interfaces.adapters.secret_box import SecretBox
    from interfaces.runtime.webhook_worker import load_settings

    load_config(require=False)
    load_settings()
    SecretBox([k.strip() for k in os.environ.get(SECRET_KEY, "").split(",") if k.strip()])


def _quiet_stdout() -> None:
    """The reader of our output went away (`paywarden … | head`): later writes, and the interpreter's final flush,
    go nowhere instead of raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        check_environment()
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush
        return code
    except BrokenPipeError:  # as Unix tools do: output to a closed pipe ends quietly, with status 0
        _quiet_stdout()
        return 0
    except (ConfigError, WebhookError, ProxyServiceError) as refused:
        print(f"paywarden: {refused}", file=sys.stderr)
        return 2
    except MerchantError as refused:  # "no merchant named ...": say which store was asked
        print(f"paywarden: {refused} ({_store_note()})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C in a command that does not handle it: no traceback
        return 130


if __name__ == "__main__":
    sys.exit(main())
