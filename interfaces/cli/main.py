"""`paywarden`: the command line of operators and merchants. A command imports what it uses, no more: the parser
imports the module of the command asked for (`COMMANDS`), and the start-up checks read settings without building
anything (docs/operations.md, "The command line answers at once")."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable, Sequence
from importlib import import_module

from interfaces.cli import context
from interfaces.config import ConfigError, default_data_dir, load_config


def project(args: argparse.Namespace) -> int:
    from interfaces.runtime import workers
    from interfaces.runtime.observability import configure_logging
    from interfaces.runtime.supervisor import exit_with_parent

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
    from interfaces.cli.up_stack import port_error
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


# Every command, in the order `paywarden --help` lists them: (its group's module, its one line of help). Building
# the parser imports only the group of the command asked for; the others are listed by name and help alone
# (tests/integration/test_cli_fast.py checks that each line here is the one its module gives).
COMMANDS: dict[str, tuple[str, str]] = {
    "merchant": ("interfaces.cli.merchants", "merchant accounts"),
    "key": ("interfaces.cli.merchants", "API keys"),
    "capability": ("interfaces.cli.merchants", "capabilities"),
    "domain": ("interfaces.cli.merchants", "verified domains"),
    "service": ("interfaces.cli.proxy", "proxy services"),
    "route": ("interfaces.cli.proxy", "priced routes of a service"),
    "tool": ("interfaces.cli.mcp_tools", "priced tools of an mcp service"),
    "payments": ("interfaces.cli.payments", "a merchant's payments (export as CSV)"),
    "webhooks": ("interfaces.cli.webhooks", "webhook endpoints, and the delivery worker (no action: run it)"),
    "audit": ("interfaces.cli.audit", "the auditor's tools"),
    "witness": ("interfaces.cli.audit", "a C2SP tlog-witness that cosigns consistent checkpoints of audit logs "
                                        "(docs/audit.md)"),
    "serve": ("interfaces.cli.serve", "run the API under gunicorn with gevent workers"),
    "upgrade": ("interfaces.cli.serve", "record what a store written by an earlier release lacks (`serve` does it "
                                        "at start; docs/facilitator.md)"),
    "project": ("", "run projection workers (read models) until interrupted"),
    "up": ("interfaces.cli.up", "start the whole sandbox stack: localnet, API, projections (Ctrl-C stops)"),
    "localnet": ("", "run the sandbox chain alone (Solana JSON-RPC over LiteSVM)"),
    "faucet": ("", "fund a wallet on the sandbox chain with SOL and test USDC"),
    "bench": ("interfaces.cli.bench", "load-test a running Paywarden with real signed payments (a merchant of "
                                      "its own with --up)"),
}
# The commands that open no store: their --help names none.
STORELESS = {"localnet", "faucet", "bench"}


def _add_project(commands: argparse._SubParsersAction) -> None:
    pr = commands.add_parser("project", help=COMMANDS["project"][1])
    pr.add_argument("names", nargs="*", help="projections to run (default: all)")
    pr.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
    pr.set_defaults(func=project)


def _add_up(commands: argparse._SubParsersAction) -> None:
    from interfaces.cli.up import add_arguments

    u = commands.add_parser("up", help=COMMANDS["up"][1])
    add_arguments(u)
    u.set_defaults(func=up)


def _add_localnet(commands: argparse._SubParsersAction) -> None:
    ln = commands.add_parser("localnet", help=COMMANDS["localnet"][1])
    ln.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ln.add_argument("--port", type=int, default=8899, help="JSON-RPC port (default 8899)")
    ln.set_defaults(func=localnet)


def _add_faucet(commands: argparse._SubParsersAction) -> None:
    fc = commands.add_parser("faucet", help=COMMANDS["faucet"][1])
    fc.add_argument("address", help="the wallet to fund (base58)")
    fc.add_argument("--usdc", default="10", help="test USDC to mint (decimal, default 10)")
    fc.add_argument("--sol", default="1", help="SOL to airdrop (decimal, default 1)")
    fc.add_argument("--rpc-url", help="the localnet (default PAYWARDEN_DEVNET_RPC_URL or http://127.0.0.1:8899)")
    fc.set_defaults(func=faucet)


def _add_bench(commands: argparse._SubParsersAction) -> None:
    from interfaces.cli.bench import add_arguments

    b = commands.add_parser("bench", help=COMMANDS["bench"][1])
    add_arguments(b)
    b.set_defaults(func=bench)



def _add_group(module: str) -> Callable[[argparse._SubParsersAction], None]:
    def add(commands: argparse._SubParsersAction) -> None:
        group = import_module(module)
        if module == "interfaces.cli.merchants":
            group.add_commands(commands, context.container)
        elif module == "interfaces.cli.audit":
            group.add_parser(commands)
            group.add_witness_parser(commands)
        else:
            group.add_commands(commands)
    return add


OWN: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "project": _add_project, "up": _add_up,
    "localnet": _add_localnet, "faucet": _add_faucet, "bench": _add_bench}


def parser(argv: Sequence[str] | None = None, *, every: bool = False) -> argparse.ArgumentParser:
    """The parser of `paywarden ARGV`: the command asked for (the first word of ARGV that is not an option) with its
    arguments, every other command by name and help only. `every`: all of them complete."""
    p = argparse.ArgumentParser(prog="paywarden", description="x402 exact payments in USDC on Solana",
                                epilog=_store_note(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                   help="print the version and exit")
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    added: set[str] = set()
    for name, (module, help) in COMMANDS.items():
        if name in added:
            continue
        if every or name == chosen or (module and module == COMMANDS.get(chosen or "", ("", ""))[0]):
            before = set(commands.choices)
            (OWN.get(name) or _add_group(module))(commands)
            added |= set(commands.choices) - before
        else:
            commands.add_parser(name, help=help)
            added.add(name)
    _note_store_in_help(commands, skip=STORELESS)
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
    from interfaces.runtime.webhook_settings import load_settings

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
        args = parser(argv).parse_args(argv)
        check_environment()
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush
        return code
    except BrokenPipeError:  # as Unix tools do: output to a closed pipe ends quietly, with status 0
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:  # Ctrl-C in a command that does not handle it: no traceback
        return 130
    except Exception as failure:
        refused = _refusal(failure)
        if refused is None:
            raise
        print(f"paywarden: {refused}", file=sys.stderr)
        return 2


def _refusal(failure: Exception) -> str | None:
    """The one line a refused command prints (exit 2), or None for a failure that is not a refusal. The domain's
    error classes are imported here, once something failed, not by every command at start."""
    from domain.merchant import MerchantError
    from domain.proxy_service import ProxyServiceError
    from domain.webhook import WebhookError

    if isinstance(failure, (ConfigError, WebhookError, ProxyServiceError)):
        return str(failure)
    if isinstance(failure, MerchantError):  # "no merchant named ...": say which store was asked (after a semicolon:
        # the message and the note may hold parentheses of their own, which must not nest)
        return f"{failure}; {_store_note()}"
    return None


if __name__ == "__main__":
    sys.exit(main())
