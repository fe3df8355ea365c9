"""`paywarden serve` and `paywarden upgrade`: the production server's start (its checks, then gunicorn with the
projection and webhook workers under one supervisor), and the store upgrade it runs first."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from interfaces.config import Config, ConfigError, load_config


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
    from interfaces.runtime.supervisor import supervise

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
    from interfaces.runtime.webhook_settings import load_settings

    load_settings()
    build_secret_box(config)


def _check_bind(bind: str, what: str, option: str) -> None:
    from interfaces.cli.up_stack import bind_error, port_error

    host, _, port = bind.rpartition(":")
    if host and port.isdigit():
        busy = bind_error(host.strip("[]"), int(port))
        if busy is not None:
            raise port_error(host, int(port), what, option, busy)


def add_commands(commands: argparse._SubParsersAction) -> None:
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

    commands.add_parser("upgrade", help="record what a store written by an earlier release lacks (`serve` does it "
                                             "at start; docs/facilitator.md)").set_defaults(func=upgrade)
