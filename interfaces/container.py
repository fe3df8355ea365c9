"""The composition root: builds the applications, views and adapters that a configuration asks for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

from eventsourcing.persistence import InfrastructureFactory
from eventsourcing.utils import Environment

from application.access import Access
from application.books import Books
from application.listings import BatchFirst, Listings, StoredPayments
from application.merchants import DomainUsage, MerchantRecords, Merchants, MerchantSettings
from application.payment_store import Settings
from application.payments import Payments
from application.ports import Chain, QueryCache, Resolver, ResultCache, SystemClock
from application.proxy_services import ProxyServices
from application.webhooks import Webhooks
from domain.networks import DEVNET, MAINNET
from interfaces.adapters.accounts_cache import (
    CachedAccounts,
    ChangePublisher,
    DataVersion,
    Freshness,
    PushedChanges,
    TrackingPosition,
)
from interfaces.adapters.chain.instrumented import instrument_chains
from interfaces.adapters.domain_checks import DnsHttpChallenges, PslSuffixes
from interfaces.adapters.gateways import ProxyGateways
from interfaces.adapters.key_usage import KeyUsage
from interfaces.adapters.memory import InProcessLocks, TtlCache
from interfaces.adapters.passwords import Argon2Hasher
from interfaces.adapters.postgres import is_postgres, postgres_env
from interfaces.adapters.resolver import GetaddrinfoResolver
from interfaces.adapters.secret_box import build_secret_box
from interfaces.adapters.secrets import BoxedSecrets
from interfaces.adapters.signers import KeypairFeePayers, parse_secret, read_keypair, sandbox_keypair
from interfaces.adapters.siwx import SdkSignIns
from interfaces.adapters.sqlite import FACTORY_TOPIC as SQLITE_FACTORY_TOPIC
from interfaces.adapters.sqlite import SYNCHRONOUS as SQLITE_SYNCHRONOUS
from interfaces.adapters.sqlite import WAL_AUTOCHECKPOINT as SQLITE_WAL_AUTOCHECKPOINT
from interfaces.adapters.sqlite import LeanDatastore
from interfaces.adapters.sqlite_durability import durable_sends
from interfaces.config import Config, ConfigError
from interfaces.runtime.probes import ProbedChain
from projections.accounts import AccountsProjection, AccountsView, PostgresAccountsView, SqliteAccountsView
from projections.audit_log import PostgresAuditLogView, SqliteAuditLogView
from projections.catalog import CatalogProjection, CatalogView, PostgresCatalogView, SqliteCatalogView
from projections.key_use import STORE as KEY_USE_STORE
from projections.key_use import KeyUseView, PostgresKeyUseView, SqliteKeyUseView
from projections.paid_access import PaidAccessView, PostgresPaidAccessView, SqlitePaidAccessView
from projections.payment_list import PaymentListView, PostgresPaymentListView, SqlitePaymentListView
from projections.payment_volume import PaymentVolumeView, PostgresPaymentVolumeView, SqlitePaymentVolumeView
from projections.read_your_writes import ReadYourWrites
from projections.results import PostgresResultCacheView, SqliteResultCacheView, SqlResultCacheView
from projections.runner import BatchEvents
from projections.service_scopes import (
    PostgresServiceScopesView,
    ServiceScopesProjection,
    ServiceScopesView,
    SqliteServiceScopesView,
)
from projections.sql import SqlView
from projections.webhook_outbox import WebhookEndpointsProjection
from projections.webhooks import PostgresWebhooksView, SqliteWebhooksView, WebhooksView

if TYPE_CHECKING:  # LiteSVM only in sandbox mode; solana-py, redis only when configured (a CLI command starts fast)
    from redis import Redis

    from interfaces.sandbox.chain import Sandbox

V = TypeVar("V", bound=SqlView)
# Each read model's two stores: the SQLite view, and the PostgreSQL view built in its place on PostgreSQL.
POSTGRES_VIEWS: dict[type[SqlView], type[SqlView]] = {
    SqliteAccountsView: PostgresAccountsView, SqliteAuditLogView: PostgresAuditLogView,
    SqliteCatalogView: PostgresCatalogView, SqliteKeyUseView: PostgresKeyUseView,
    SqlitePaymentListView: PostgresPaymentListView, SqlitePaymentVolumeView: PostgresPaymentVolumeView,
    SqliteResultCacheView: PostgresResultCacheView, SqliteServiceScopesView: PostgresServiceScopesView,
    SqliteWebhooksView: PostgresWebhooksView, SqlitePaidAccessView: PostgresPaidAccessView,
}
PAYMENTS_STORE = "payments"
# Read models rebuilt from the events alone: a commit lost to a power cut loses its tracking record with it, and
# the projection applies those events again (docs/performance.md). Not the accounts (a revocation must hold at
# once, even after a power cut), the keys' last use (not events), the webhook outbox (delivery state) nor the audit
# log (signed checkpoints).
DERIVED_VIEWS = ("payment_list", "payment_volume", "merchant_activity", "result_cache", "paid_access")
# The payments store's automatic checkpoint, in the committing request of the API worker, every this many WAL pages
# (~80 MB) instead of SQLite's 1,000: the projection worker copies the WAL back every 20 ms
# (interfaces/adapters/sqlite.py, BackgroundCheckpoints), so the API's own checkpoints find little to copy, and
# fewer of them means fewer fsyncs on the worker's hub queued behind the read models' writes (docs/performance.md,
# "Cost with history").
PAYMENTS_WAL_AUTOCHECKPOINT = 20_000


def store_env(config: Config, name: str) -> dict[str, str]:
    """The eventsourcing environment of one application or view: PostgreSQL when PAYWARDEN_DATABASE_URL is
    postgresql://… (tables named after the application or view), else SQLite files (one each)."""
    if is_postgres(config.database_url):
        return postgres_env(config.database_url, pool_max=config.database_pool_max,
                            timeout_seconds=config.database_timeout_seconds)
    directory = sqlite_dir(config)
    directory.mkdir(parents=True, exist_ok=True)
    env = {
        "PERSISTENCE_MODULE": SQLITE_FACTORY_TOPIC,
        "SQLITE_DBNAME": str(directory / f"{name}.db"),
        "SQLITE_LOCK_TIMEOUT": "30",
        # payments: NORMAL, made durable before every broadcast (DurableSends); the derived views: NORMAL; all
        # else FULL (docs/performance.md)
        SQLITE_SYNCHRONOUS: "NORMAL" if name in (PAYMENTS_STORE, *DERIVED_VIEWS) else "FULL",
    }
    if name == PAYMENTS_STORE:  # the projection worker checkpoints it (BackgroundCheckpoints); the API's own
        env[SQLITE_WAL_AUTOCHECKPOINT] = str(PAYMENTS_WAL_AUTOCHECKPOINT)  # checkpoints, on its hub, come seldom
    return env


def sqlite_dir(config: Config) -> Path:
    """`sqlite:///DIR` names the directory of the SQLite files; otherwise PAYWARDEN_DATA_DIR holds them."""
    if config.database_url.startswith("sqlite://"):
        return Path(config.database_url.removeprefix("sqlite://") or config.data_dir)
    return config.data_dir


def build_view(config: Config, name: str, view_class: type[V], **collaborators: Any) -> V:
    """A view on the configured store: `view_class` (`SqliteAccountsView`) on SQLite, its PostgreSQL twin
    (`POSTGRES_VIEWS`: `PostgresAccountsView`) on PostgreSQL. Typed as `view_class`: the two share their read model's
    class (`AccountsView`), which holds every query, and differ only in the recorder each extends. `collaborators`
    are keyword arguments of the view's constructor (`on_change=` of `AccountsView`), given at its construction."""
    if is_postgres(config.database_url):
        twin = POSTGRES_VIEWS.get(view_class)
        if twin is None:
            raise ConfigError(f"{view_class.__name__} has no PostgreSQL twin: that read model cannot live in "
                              "PostgreSQL")
        view_class = cast("type[V]", twin)
    factory = InfrastructureFactory.construct(env=Environment(name, store_env(config, name)))
    view = factory.tracking_recorder(with_collaborators(view_class, collaborators) if collaborators else view_class)
    if not isinstance(view, view_class):  # the factory's own typing stops at TrackingRecorder
        raise TypeError(f"{name}: the store built a {type(view).__name__}, not a {view_class.__name__}")
    return view


def with_collaborators(view_class: type[V], collaborators: dict[str, Any]) -> type[V]:
    """`view_class`, constructed with `collaborators` besides the datastore: eventsourcing's factories build a
    tracking recorder from its datastore alone (`tracking_recorder_class(datastore=…)`, a subclass of their recorder
    asserted), so the class they are given is a subclass of `view_class` made here, whose constructor adds them."""

    def __init__(self: V, *args: Any, **kwargs: Any) -> None:
        view_class.__init__(self, *args, **collaborators, **kwargs)

    namespace = {"__init__": __init__, "__module__": __name__, "__qualname__": view_class.__qualname__}  # made here
    return cast("type[V]", type(view_class.__name__, (view_class,), namespace))


@dataclass
class Chains:
    """Implements the `Chains` port: the chain adapter of each served network (which the probes ask too)."""

    by_network: dict[str, ProbedChain] = field(default_factory=dict)

    def for_network(self, caip2: str) -> Chain | None:
        return self.by_network.get(caip2)


def build_chains(config: Config, sandbox: Sandbox | None = None, *,
                 local_chain: bool = True) -> tuple[Chains, Sandbox | None]:
    """`local_chain=False`: no in-process sandbox chain (LiteSVM) even where the configuration would have one; a
    command that verifies nothing (the CLI's) does not pay for building and funding it."""
    chains = Chains()
    if config.devnet_rpc_url or config.mainnet_rpc_url:
        from interfaces.adapters.chain.rpc import RpcChain
    if config.devnet_rpc_url:
        chains.by_network[DEVNET.caip2] = RpcChain(config.devnet_rpc_url)
    elif config.sandbox and local_chain:
        from interfaces.adapters.chain.litesvm import LiteSvmChain
        from interfaces.sandbox.chain import Sandbox

        sandbox = sandbox or Sandbox()
        chains.by_network[DEVNET.caip2] = LiteSvmChain(sandbox)
    if config.mainnet_rpc_url:
        chains.by_network[MAINNET.caip2] = RpcChain(config.mainnet_rpc_url)
    return chains, sandbox


def build_fee_payers(config: Config) -> KeypairFeePayers:
    if config.fee_payer_keypairs or config.fee_payer_keys:
        keypairs = [read_keypair(p) for p in config.fee_payer_keypairs]
        return KeypairFeePayers(keypairs + [parse_secret(k) for k in config.fee_payer_keys])
    return KeypairFeePayers([sandbox_keypair(config.data_dir / "fee-payer.json")])


SANDBOX_FEE_PAYER_LAMPORTS = 10 * 10**9


def fund_fee_payers(sandbox: Sandbox, addresses: Sequence[str]) -> None:
    """On the sandbox chain the service's signers start with SOL, as an operator would fund them."""
    for address in addresses:
        if sandbox.sol_balance(address) < SANDBOX_FEE_PAYER_LAMPORTS // 10:
            sandbox.airdrop(address, SANDBOX_FEE_PAYER_LAMPORTS)


@dataclass
class Container:
    """Every collaborator a configuration asks for; all are built by `build` (only `sandbox`, `redis` and the
    SQL result cache depend on the configuration)."""

    config: Config
    payments: Payments
    merchants: Merchants
    accounts: AccountsView
    chains: Chains
    fee_payers: KeypairFeePayers
    listings: Listings  # discovery: follows approved payments, records listings
    payments_batch: BatchEvents  # the batch of the Payments log a projection worker applies; Listings reads it first
    catalog: CatalogView  # discovery: the catalog read model, fed by the listings
    discovery_cache: QueryCache
    webhooks: Webhooks  # merchants' webhook endpoints
    webhooks_view: WebhooksView  # their read model and the outbox (projections/webhooks.py)
    proxies: ProxyServices  # the transparent proxy's services and routes
    merchant_records: MerchantRecords  # the merchants' store, read by ProxyServices
    payment_list: PaymentListView  # the payments read model (console, audit, GET /v1/payments)
    key_uses: KeyUseView  # the last use of API keys (not events; projections/key_use.py)
    key_usage: KeyUsage  # records the last use of API keys (interfaces/adapters/key_usage.py)
    service_scopes: ServiceScopesView  # proxy services and routes, for keys scoped to a service
    sandbox: Sandbox | None = None  # the in-process sandbox chain (interfaces/sandbox/chain.py) in sandbox mode
    redis: Redis | None = None  # the Redis client when PAYWARDEN_REDIS_URL is set
    result_cache: SqlResultCacheView | None = None  # the terminal result cache's SQL view when there is no Redis
    payment_volume: PaymentVolumeView | None = None  # settled USDC per day/hour and service; payments' services
    books: Books | None = None  # the reconciliation of the payments with the chain (interfaces/audit/books.py)
    paid_access: PaidAccessView | None = None  # which wallet paid which proxy route when (projections/paid_access.py)
    access: Access | None = None  # once-paid routes' Sign-In-With-X grants (application/access.py)

    def key_lookup(self) -> CachedAccounts:
        """The API's key lookup: the accounts view cached in this process, dropped when the view changes (pushed
        over Redis when there is Redis; else, on SQLite, the view file's data version, on PostgreSQL the view's
        tracking position, read per request)."""
        freshness: Freshness
        if self.redis is not None:
            freshness = PushedChanges(self.config.redis_url)
        elif isinstance(self.accounts.datastore, LeanDatastore):
            freshness = DataVersion(self.accounts.datastore.pool.db_name)
        else:
            freshness = TrackingPosition(self.accounts, self.merchants.name)
        return CachedAccounts(self.accounts, freshness)

    def close(self) -> None:
        self.payments.close()
        self.merchants.close()
        self.listings.close()
        self.webhooks.close()
        self.proxies.close()
        self.merchant_records.close()
        for view in (self.accounts, self.catalog, self.webhooks_view, self.payment_list, self.key_uses,
                     self.service_scopes):
            view.datastore.close()
        if self.access is not None:
            self.access.close()
        for optional in (self.result_cache, self.payment_volume, self.paid_access):
            if optional is not None:
                optional.datastore.close()
        if self.books is not None:
            self.books.close()
        if self.redis is not None:
            self.redis.close()


def build(config: Config, *, sandbox: Sandbox | None = None, cache: ResultCache | None = None,
          resolver: Resolver | None = None, local_chain: bool = True) -> Container:
    """`local_chain=False` (the CLI's commands): Payments has no in-process sandbox chain to verify on; the sandbox's
    devnet is served all the same (merchants get its capability)."""
    chains, sandbox = build_chains(config, sandbox, local_chain=local_chain)
    if not is_postgres(config.database_url):  # the payments store is durable before any broadcast
        durable_sends(chains.by_network, Path(store_env(config, PAYMENTS_STORE)["SQLITE_DBNAME"]))
    instrument_chains(chains.by_network)  # chain RPC latency and errors in /metrics
    fee_payers = build_fee_payers(config)
    if sandbox is not None:
        fund_fee_payers(sandbox, fee_payers.addresses())
    settings = Settings(limits=config.limits, confirmation_budget_seconds=config.confirmation_budget_seconds,
                        lock_margin_seconds=config.lock_margin_seconds)
    redis = locks = result_cache = None
    if config.redis_url:
        from interfaces.adapters.redis import RedisLocks, RedisResultCache, redis_client

        redis = redis_client(config.redis_url)
        locks = RedisLocks(redis)
        cache = cache or RedisResultCache(redis)
    else:  # the result cache is a SQL read model (projections/results.py), filled by the projection worker
        result_cache = build_view(config, "result_cache", SqliteResultCacheView)
        cache = cache or result_cache
    payments = Payments(
        store_env(config, PAYMENTS_STORE), chains=chains, fee_payers=fee_payers, locks=locks or InProcessLocks(),
        cache=cache, clock=SystemClock(), settings=settings,
    )
    # ProxyServices reads merchants (their verified domains and capabilities) from the merchants' store; Merchants
    # asks ProxyServices which domains its services use (DomainUsage): built in that order, neither set afterwards.
    merchant_records = MerchantRecords(store_env(config, "merchants"))
    proxies = ProxyServices(store_env(config, "proxy_services"), merchants=merchant_records,
                            secrets=build_secrets(config), sandbox=config.sandbox, own_ports=config.own_ports)
    served = frozenset(chains.by_network) | (frozenset({DEVNET.caip2}) if config.sandbox else frozenset())
    merchants = build_merchants(config, served=served, usage=proxies)
    accounts = build_view(config, "accounts", SqliteAccountsView,
                          on_change=ChangePublisher(redis) if redis is not None else None)
    # The projection worker's Payments follower fills `payments_batch` as it applies a batch
    # (interfaces/runtime/workers.py); Listings reads a payment's Received there first, else from the store.
    payments_batch = BatchEvents()
    listings = Listings(store_env(config, "listings"), payments=BatchFirst(payments_batch, StoredPayments(payments)),
                        discovery=accounts, resolver=resolver or GetaddrinfoResolver(),
                        production=config.discovery_public_only, domains=accounts, sandbox=config.sandbox,
                        gateways=ProxyGateways(proxies, config.proxy_url, sandbox=config.sandbox))
    catalog = build_view(config, "catalog", SqliteCatalogView)
    discovery_cache: QueryCache = TtlCache()
    if redis is not None:
        from interfaces.adapters.redis import RedisQueryCache

        discovery_cache = RedisQueryCache(redis)
    webhooks, webhooks_view = build_webhooks(config, resolver or GetaddrinfoResolver())
    payment_list = build_view(config, "payment_list", SqlitePaymentListView)
    key_uses = build_view(config, KEY_USE_STORE, SqliteKeyUseView)
    paid_access = build_view(config, "paid_access", SqlitePaidAccessView)

    container = Container(
        config, payments, merchants, accounts, chains, fee_payers, listings=listings, payments_batch=payments_batch,
        catalog=catalog, discovery_cache=discovery_cache, webhooks=webhooks, webhooks_view=webhooks_view,
        proxies=proxies, merchant_records=merchant_records, payment_list=payment_list, key_uses=key_uses,
        key_usage=KeyUsage(key_uses), service_scopes=build_view(config, "service_scopes", SqliteServiceScopesView),
        sandbox=sandbox, redis=redis, result_cache=result_cache,
        payment_volume=build_view(config, "payment_volume", SqlitePaymentVolumeView),
        books=Books(store_env(config, "books")), paid_access=paid_access,
        access=Access(store_env(config, "access"), sign_ins=SdkSignIns(), paid=paid_access))
    read_your_writes(container)
    return container


def read_your_writes(c: Container) -> None:
    """Every command returns once the read models of its application's log hold its events, whichever process
    issues it (projections/read_your_writes.py); the accounts view's change then reaches every API worker."""
    c.merchants.lead(ReadYourWrites(c.merchants, [AccountsProjection(c.accounts)], then=c.accounts.on_change,
                                    level=True))
    c.proxies.lead(ReadYourWrites(c.proxies, [ServiceScopesProjection(c.service_scopes)], level=True))
    c.webhooks.lead(ReadYourWrites(c.webhooks, [WebhookEndpointsProjection(c.webhooks_view)], level=True))
    c.listings.lead(ReadYourWrites(c.listings, [CatalogProjection(c.catalog)]))  # a delisting


def build_webhooks(config: Config, resolver: Resolver) -> tuple[Webhooks, WebhooksView]:
    view = build_view(config, "webhooks_outbox", SqliteWebhooksView)
    webhooks = Webhooks(store_env(config, "webhooks"), cipher=build_secret_box(config), resolver=resolver,
                        production=not config.sandbox, endpoints=view)
    return webhooks, view


def build_secrets(config: Config) -> BoxedSecrets:
    """Upstream credentials are sealed with PAYWARDEN_SECRET_KEY, as webhook secrets are (secret_box.py)."""
    return BoxedSecrets(build_secret_box(config))


def build_merchants(config: Config, *, served: frozenset[str], usage: DomainUsage) -> Merchants:
    """The Merchants application with this deployment's rules: served networks, the service's own and the
    operator's blocked domains, argon2id passwords, DNS/HTTPS domain checks, the Public Suffix List, and the proxy
    services' answer to which domains they use."""
    own = config.service_domains + ((urlsplit(config.console_url).hostname or "",) if config.console_url else ())
    settings = MerchantSettings(served_networks=served, production=not config.sandbox,
                                own_domains=tuple(d for d in own if d), blocked_domains=config.blocked_domains)
    return Merchants(store_env(config, "merchants"), settings=settings, hasher=Argon2Hasher(),
                     challenges=DnsHttpChallenges(config.dns_nameservers), suffixes=PslSuffixes(), usage=usage)
