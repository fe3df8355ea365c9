"""`paywarden` answers at once: a command imports what it uses, not every command's module, the webhook worker and
the container (docs/operations.md, "The command line answers at once")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from interfaces.cli.main import COMMANDS, parser

PROBE = """
import json, sys
from interfaces.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as done:
    code = done.code
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported(tmp_path, *argv: str) -> set[str]:
    """The modules a `paywarden ARGV` process imported, on a fresh data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                          env={**env, "PAYWARDEN_DATA_DIR": str(tmp_path)})
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


COMMAND_MODULES = {module for module, _ in COMMANDS.values() if module} | {"interfaces.cli.up_stack",
                                                                           "interfaces.cli.bench_merchant"}
HEAVY = {"interfaces.container", "interfaces.runtime.webhook_worker", "interfaces.adapters.chain.rpc", "solana",
         "dns.resolver", "redis", "httpx", "interfaces.bench"}


@pytest.mark.parametrize("argv", [["--version"], ["--help"]], ids=["version", "help"])
def test_the_version_and_the_help_import_no_command_and_nothing_heavy(tmp_path, argv):
    modules = imported(tmp_path, *argv)
    assert "interfaces.cli.main" in modules
    assert modules & (COMMAND_MODULES | HEAVY) == set()


def test_a_read_command_imports_its_own_group_only(tmp_path):
    modules = imported(tmp_path, "merchant", "list")
    assert "interfaces.cli.merchants" in modules and "interfaces.container" in modules  # it did read the store
    assert modules & (COMMAND_MODULES - {"interfaces.cli.merchants"}) == set()
    # The start-up checks read the webhook settings without the worker; a sandbox without Redis imports no Redis
    # client, nothing imports the domain checks' DNS resolver before a domain is checked, and a command a person
    # runs builds no in-process sandbox chain (LiteSVM), nor solana-py's client without an RPC URL.
    assert modules & {"interfaces.runtime.webhook_worker", "redis", "dns.resolver", "interfaces.bench",
                      "interfaces.adapters.chain.litesvm", "interfaces.sandbox.chain", "solana"} == set()


def test_a_merchant_made_by_the_cli_without_a_chain_still_gets_the_sandbox_devnet(tmp_path, monkeypatch):
    from interfaces.cli.main import main
    from interfaces.config import load_config
    from interfaces.container import build

    for name in [k for k in os.environ if k.startswith("PAYWARDEN_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    assert main(["merchant", "create", "acme"]) == 0
    container = build(load_config(), local_chain=False)
    try:
        assert container.chains.for_network("solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1") is None
        networks = {c.network for c in container.accounts.list_capabilities(
            container.accounts.get_merchant_by_name("acme").merchant_id)}
        assert networks == {"solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"}
    finally:
        container.close()


def test_every_command_is_listed_with_the_help_its_module_gives():
    def listed(p) -> dict[str, str]:
        commands = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
        return {choice.dest: choice.help for choice in commands._choices_actions}

    complete = listed(parser([], every=True))
    assert listed(parser(["--help"])) == complete
    assert list(complete) == list(COMMANDS)  # the order of `paywarden --help`
    assert {"bench-reference", "bench-load", "bench-floor", "bench-proxy"} & set(complete) == set()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_parses_its_own_arguments_when_asked_for(name):
    p = parser([name])
    commands = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    sub = commands.choices[name]
    assert sub._actions[1:] or sub._subparsers is not None or name == "upgrade", name
    assert sub.get_default("func") is not None or any(
        a.__class__.__name__ == "_SubParsersAction" for a in sub._actions), name
