"""What the console app is built from (`create_app(collaborators)`), and how to build it from a container."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import falcon

from application.listings import Listings
from application.merchants import Merchants
from interfaces.http.console.security import LoginThrottle
from interfaces.http.console.sessions import RedisSessionStore, Sessions, SqliteSessionStore
from projections.accounts import AccountsView
from projections.catalog import CatalogView
from projections.key_use import KeyUseView


@dataclass
class Collaborators:
    merchants: Merchants
    accounts: AccountsView  # merchants, logins, keys, capabilities, domains (projections/accounts.py)
    key_uses: KeyUseView  # the keys' last use
    sessions: Sessions
    throttle: LoginThrottle
    verify_password: Callable[[str | None, str], bool]
    catalog: CatalogView | None = None
    listings: Listings | None = None
    console_url: str = ""
    secure_cookies: bool = True
    sandbox: bool = False  # devnet is the sandbox's localnet: no public explorer links for it
    trusted_proxies: tuple[str, ...] = ()
    api_url: str = ""  # the facilitator API, for the pages' examples
    close: Callable[[], None] = lambda: None
    fee_payers: Callable[[], list[dict[str, Any]]] = lambda: []  # the overview's fee payer health
    proxies: Any = None  # application.proxy_services.ProxyServices: the services and routes API (services.py)
    proxy_url: str = ""  # the proxy's public address, for gateway URLs
    webhooks: Any = None  # interfaces.runtime.webhook_service.WebhookService; None: no webhook pages or API
    payment_list: Any = None  # projections.payment_list.PaymentListView: the overview, the payments pages and API
    payment_volume: Any = None  # projections.payment_volume.PaymentVolumeView: the overview's chart, services


class Resource:
    """Base of the console's resources: each answers from the collaborators it is built with, at its `route`."""

    route = ""

    def __init__(self, c: Collaborators) -> None:
        self._c = c


def mount(app: falcon.App, resources: Iterable[Any], *args: Any) -> None:
    """Add each resource class at its `route`, built from `args` (the collaborators, and a page's templates)."""
    for resource in resources:
        app.add_route(resource.route, resource(*args))


def from_container(container: Any, *, api_url: str = "") -> Collaborators:
    from interfaces.adapters.passwords import Argon2Hasher
    from interfaces.adapters.secret_box import CONSOLE_CSRF, derived_key
    from interfaces.container import sqlite_dir

    config = container.config
    if container.redis is not None:
        store: Any = RedisSessionStore(container.redis)
    else:
        store = SqliteSessionStore(sqlite_dir(config) / "console-sessions.db")
    hasher = Argon2Hasher()
    accounts = container.accounts

    def password_hash_of(email: str) -> str | None:
        login = accounts.get_login(email)
        return login.password_hash if login is not None else None

    sessions = Sessions(store, derived_key(config, CONSOLE_CSRF), password_hash_of=password_hash_of)
    return Collaborators(
        merchants=container.merchants, accounts=accounts, key_uses=container.key_uses, sessions=sessions,
        throttle=LoginThrottle(config.redis_url or "memory://"), verify_password=hasher.verify,
        catalog=container.catalog, listings=container.listings,
        console_url=config.console_url, secure_cookies=not config.sandbox, sandbox=config.sandbox,
        trusted_proxies=config.trusted_proxies,
        api_url=api_url, close=container.close, fee_payers=lambda: fee_payer_health(container),
        webhooks=_webhooks(container), proxies=container.proxies,
        proxy_url=config.proxy_url, payment_list=container.payment_list,
        payment_volume=container.payment_volume,
    )


def _webhooks(container: Any) -> Any:
    from interfaces.runtime.webhook_service import WebhookService

    return WebhookService(container) if container.webhooks is not None else None


def fee_payer_health(container: Any) -> list[dict[str, Any]]:
    """Each fee payer's SOL balance on each served network: ok, low (under PAYWARDEN_FEE_PAYER_MIN_LAMPORTS)
    or down (the chain did not answer)."""
    from interfaces.runtime.probes import Probes

    rows = []
    floor = container.config.fee_payer_min_lamports
    for (network, address), balance in sorted(Probes(container).fee_payer_balances().items()):
        if isinstance(balance, int):
            rows.append({"network": network, "address": address, "balance": f"{balance / 10**9:,.3f} SOL",
                         "health": "ok" if balance >= floor else "low"})
        else:
            rows.append({"network": network, "address": address, "balance": "unknown", "health": "down"})
    return rows
