"""The composition root's other half: each app's collaborators, from the container `interfaces/container.py` builds.

An app is built as `create_app(collaborators)`, Falcon's pattern: the WSGI entries (and `paywarden up`, the tests)
call `create_app(api_collaborators(container))`, and the app sees only the typed collaborators it uses. No app
imports this module or the container (setup.cfg, the `apps-get-collaborators` contract).
"""

from __future__ import annotations

import functools
import ssl

from interfaces.adapters.outbound import OutboundClient, OutboundPolicy, Resolver
from interfaces.adapters.passwords import Argon2Hasher
from interfaces.adapters.resolver import GetaddrinfoResolver
from interfaces.adapters.secret_box import CONSOLE_CSRF, SEARCH_CURSORS, derived_key
from interfaces.audit.tiles import TileSource
from interfaces.container import Container, sqlite_dir
from interfaces.http.console import collaborators as console
from interfaces.http.console.security import LoginThrottle
from interfaces.http.console.sessions import RedisSessionStore, Sessions, SessionStore, SqliteSessionStore
from interfaces.http.facilitator import app as api
from interfaces.http.proxy import factory as proxy
from interfaces.http.proxy.mcp_upstream import upstream_tools
from interfaces.runtime.probes import FollowedLog, Probes, ProbeTargets
from interfaces.runtime.webhook_service import WebhookCollaborators, WebhookService
from interfaces.runtime.workers import PROJECTIONS
from interfaces.sandbox.console import sandbox_wallet


def probe_targets(container: Container) -> ProbeTargets:
    """The stores, chains, fee payers, Redis and read models the probes ask about."""
    followed = [FollowedLog(spec.name, spec.application(container), spec.projection(spec.view(container)))
                for spec in PROJECTIONS.values() if spec.available(container)]
    return ProbeTargets(event_stores=(container.payments, container.merchants, container.listings),
                        chains=container.chains.by_network, fee_payers=container.fee_payers,
                        fee_payer_floor=container.config.fee_payer_min_lamports, followed=followed,
                        redis=container.redis, books=container.books)


def api_collaborators(container: Container, *, probes: Probes | None = None) -> api.Collaborators:
    """The API's: payments, key lookup, discovery, the operator's probes and its settings."""
    config = container.config
    return api.Collaborators(
        payments=container.payments, fee_payers=container.fee_payers, key_lookup=container.key_lookup(),
        key_usage=container.key_usage, service_scopes=container.service_scopes, payment_list=container.payment_list,
        catalog=container.catalog, discovery_cache=container.discovery_cache,
        cursor_key=derived_key(config, SEARCH_CURSORS),
        probes=probes or Probes(probe_targets(container)), webhooks_view=container.webhooks_view,
        served=tuple(sorted(container.chains.by_network)), anonymous=config.anonymous,
        rate_limit_storage=config.redis_url or "memory://", rate_limit_per_key=config.rate_limit_per_key,
        rate_limit_per_ip=config.rate_limit_per_ip, trusted_proxies=config.trusted_proxies,
        audit_tiles=TileSource(config),
    )


def webhook_service(container: Container) -> WebhookService:
    """The webhook commands the console's API and the CLI share."""
    return WebhookService(WebhookCollaborators(merchants=container.merchants, webhooks=container.webhooks,
                                               webhooks_view=container.webhooks_view))


def console_collaborators(container: Container, *, api_url: str = "",
                          probes: Probes | None = None) -> console.Collaborators:
    """The console's: the merchants' commands and read models, sessions (in Redis when there is Redis), the
    services, payments and webhooks it shows, and the fee payers' health for the overview."""
    config = container.config
    store: SessionStore
    if container.redis is not None:
        store = RedisSessionStore(container.redis)
    else:
        store = SqliteSessionStore(sqlite_dir(config) / "console-sessions.db")
    accounts = container.accounts

    def password_hash_of(email: str) -> str | None:
        login = accounts.get_login(email)
        return login.password_hash if login is not None else None

    sessions = Sessions(store, derived_key(config, CONSOLE_CSRF), password_hash_of=password_hash_of)
    health = functools.partial(console.fee_payer_health, probes or Probes(probe_targets(container)))
    outbound = OutboundClient(GetaddrinfoResolver(), OutboundPolicy.for_mode(sandbox=config.sandbox))  # tools/list
    return console.Collaborators(
        merchants=container.merchants, accounts=accounts, key_uses=container.key_uses, sessions=sessions,
        proxies=container.proxies,
        webhooks=webhook_service(container), payment_list=container.payment_list,
        throttle=LoginThrottle(config.redis_url or "memory://"), verify_password=Argon2Hasher().verify,
        catalog=container.catalog, listings=container.listings, cursor_key=derived_key(config, SEARCH_CURSORS),
        console_url=config.console_url, secure_cookies=not config.sandbox, sandbox=config.sandbox,
        trusted_proxies=config.trusted_proxies, api_url=api_url, fee_payers=health,
        proxy_url=config.proxy_url, payment_volume=container.payment_volume, sandbox_wallet=sandbox_wallet(config),
        books=container.books.status if container.books is not None else lambda: None,
        mcp_tools=functools.partial(upstream_tools, outbound, container.proxies),
    )


def proxy_collaborators(container: Container, *, resolver: Resolver | None = None,
                        ssl_context: ssl.SSLContext | None = None,
                        policy: OutboundPolicy | None = None) -> proxy.Collaborators:
    """The proxy's. Production refuses internal upstream addresses; sandbox mode reaches localhost backends."""
    config = container.config
    outbound = OutboundClient(resolver or GetaddrinfoResolver(),
                              policy or OutboundPolicy.for_mode(sandbox=config.sandbox), ssl_context=ssl_context)
    return proxy.Collaborators(
        proxies=container.proxies, payments=container.payments, accounts=container.accounts,
        fee_payers=container.fee_payers, outbound=outbound, verified_domains=container.accounts,
        refusal=container.merchants.settings.refusal, sandbox=config.sandbox, own_ports=config.own_ports,
        public_url=config.proxy_url, trusted_proxies=config.trusted_proxies, metrics_token=config.proxy_metrics_token,
        access=container.access,
    )
