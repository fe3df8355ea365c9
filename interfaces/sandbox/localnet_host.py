"""The localnet hosted by the API worker: `paywarden up`'s default (one API worker, no external chain).

The worker owns the sandbox LiteSVM: its own chain calls go to it in-process (`LiteSvmChain`: no JSON-RPC, no HTTP,
no second process; a verify's simulation is a function call), and the same sandbox is served as the localnet's
JSON-RPC, `/health` and `/faucet` on one more listener of the API's gunicorn (`PAYWARDEN_LOCALNET_BIND`,
`--rpc-port`), so clients, the projection and webhook workers and the proxy reach it exactly as before.

The chain lives as long as the worker: the accounts `up` funds (`PAYWARDEN_LOCALNET_ACCOUNTS`) are funded by every
new sandbox, so a worker gunicorn restarts comes back with them (the chain's history, like the localnet's when `up`
restarts, starts again).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import falcon

from interfaces.sandbox.chain import Sandbox
from interfaces.sandbox.localnet import create_localnet_app

LOCALNET_BIND = "PAYWARDEN_LOCALNET_BIND"  # host:port of the localnet's listener in the API's gunicorn
LOCALNET_ACCOUNTS = "PAYWARDEN_LOCALNET_ACCOUNTS"  # address:lamports:usdc_atomic,… funded on a new chain
SLOT_MS = 400


def format_accounts(accounts: Sequence[tuple[str, int, int | None]]) -> str:
    """`address:lamports:usdc` (usdc empty: no USDC account), comma separated."""
    return ",".join(f"{a}:{lamports}:{'' if usdc is None else usdc}" for a, lamports, usdc in accounts)


def parse_accounts(text: str) -> list[tuple[str, int, int | None]]:
    accounts = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        address, lamports, usdc = item.split(":")
        accounts.append((address, int(lamports), int(usdc) if usdc else None))
    return accounts


class HostedLocalnet:
    """A fresh sandbox with the given accounts funded, its localnet WSGI app, and a slot ticker (a greenlet under
    gunicorn's gevent worker): blockhashes expire after 150 slots as on a cluster."""

    def __init__(self, accounts: Sequence[tuple[str, int, int | None]] = (), *, slot_ms: int = SLOT_MS) -> None:
        self.sandbox = Sandbox()
        for address, lamports, usdc in accounts:
            if lamports:
                self.sandbox.airdrop(address, lamports)
            if usdc is not None:
                self.sandbox.mint_usdc(address, usdc)  # 0 makes the (empty) token account
        self.app: falcon.App = create_localnet_app(self.sandbox)
        self._stopped = threading.Event()
        threading.Thread(target=self._tick, args=(slot_ms / 1000,), name="localnet-ticker", daemon=True).start()

    def _tick(self, seconds: float) -> None:
        while not self._stopped.wait(seconds):
            self.sandbox.advance()

    def stop(self) -> None:
        self._stopped.set()
