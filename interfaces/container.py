"""The composition root: builds the applications, views and adapters that a configuration asks for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import InfrastructureFactory
from eventsourcing.utils import Environment

from application.merchants import Merchants
from application.payments import Payments, Settings
from application.ports import Chain, ResultCache
from domain.networks import DEVNET, MAINNET
from interfaces.config import Config
from interfaces.inprocess import InProcessLocks, InProcessResultCache, SystemClock
from interfaces.signers import KeypairFeePayers, read_keypair, sandbox_keypair
from projections.accounts import AccountsProjection, AccountsView, SqliteAccountsView
from projections.runner import catch_up


def store_env(config: Config, name: str) -> dict[str, str]:
    """The eventsourcing environment of one application or view (SQLite: one file each)."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    return {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(config.data_dir / f"{name}.db"),
        "SQLITE_LOCK_TIMEOUT": "30",
    }


def build_view(config: Config, name: str, view_class: type[Any]) -> Any:
    factory = InfrastructureFactory.construct(env=Environment(name, store_env(config, name)))
    return factory.tracking_recorder(view_class)


@dataclass
class Chains:
    """Implements the `Chains` port: the chain adapter of each served network."""

    by_network: dict[str, Chain] = field(default_factory=dict)

    def for_network(self, caip2: str) -> Chain | None:
        return self.by_network.get(caip2)


def build_chains(config: Config, sandbox: Any = None) -> tuple[Chains, Any]:
    from interfaces.chain.rpc import RpcChain

    chains = Chains()
    if config.devnet_rpc_url:
        chains.by_network[DEVNET.caip2] = RpcChain(config.devnet_rpc_url)
    elif config.sandbox:
        from interfaces.chain.litesvm import LiteSvmChain
        from interfaces.chain.sandbox import Sandbox

        sandbox = sandbox or Sandbox()
        chains.by_network[DEVNET.caip2] = LiteSvmChain(sandbox)
    if config.mainnet_rpc_url:
        chains.by_network[MAINNET.caip2] = RpcChain(config.mainnet_rpc_url)
    return chains, sandbox


def build_fee_payers(config: Config) -> KeypairFeePayers:
    if config.fee_payer_keypairs:
        return KeypairFeePayers([read_keypair(p) for p in config.fee_payer_keypairs])
    return KeypairFeePayers([sandbox_keypair(config.data_dir / "fee-payer.json")])


SANDBOX_FEE_PAYER_LAMPORTS = 10 * 10**9


def fund_fee_payers(sandbox: Any, addresses: Sequence[str]) -> None:
    """On the sandbox chain the service's signers start with SOL, as an operator would fund them."""
    for address in addresses:
        if sandbox.sol_balance(address) < SANDBOX_FEE_PAYER_LAMPORTS // 10:
            sandbox.airdrop(address, SANDBOX_FEE_PAYER_LAMPORTS)


@dataclass
class Container:
    config: Config
    payments: Payments
    merchants: Merchants
    accounts: AccountsView
    chains: Chains
    fee_payers: KeypairFeePayers
    sandbox: Any = None

    def refresh_accounts(self) -> int:
        """Bring the accounts view up to date now (the CLI does, so a new key works at once)."""
        return catch_up(self.merchants, AccountsProjection(self.accounts))

    def close(self) -> None:
        self.payments.close()
        self.merchants.close()
        self.accounts.datastore.close()


def build(config: Config, *, sandbox: Any = None, cache: ResultCache | None = None) -> Container:
    chains, sandbox = build_chains(config, sandbox)
    fee_payers = build_fee_payers(config)
    if sandbox is not None:
        fund_fee_payers(sandbox, fee_payers.addresses())
    settings = Settings(limits=config.limits, confirmation_budget_seconds=config.confirmation_budget_seconds)
    payments = Payments(
        store_env(config, "payments"), chains=chains, fee_payers=fee_payers, locks=InProcessLocks(),
        cache=cache or InProcessResultCache(), clock=SystemClock(), settings=settings,
    )
    merchants = Merchants(store_env(config, "merchants"))
    accounts = build_view(config, "accounts", SqliteAccountsView)
    return Container(config, payments, merchants, accounts, chains, fee_payers, sandbox)
