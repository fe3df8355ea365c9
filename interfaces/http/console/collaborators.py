"""What the console app is built from (`create_app(collaborators)`; the composition root, interfaces/wiring.py,
builds them), and what each group of its resources is built from: a typed part of them, exactly what the group uses
(`create_app` makes the parts; `mount` builds each resource class from its group's)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, Protocol, TypeVar
from urllib.parse import urlsplit

import falcon

from application.listings import Listings
from application.merchants import Merchants
from application.proxy_services import ProxyServices
from domain.proxy_service import SANDBOX_MERCHANT, ProxyService
from interfaces.http.console.security import LoginThrottle
from interfaces.http.console.sessions import Sessions
from interfaces.runtime.probes import Probes
from interfaces.runtime.webhook_service import WebhookService
from projections.accounts import AccountsView
from projections.catalog import CatalogView
from projections.key_use import KeyUseView
from projections.payment_list import PaymentListView
from projections.payment_volume import NamedVolume, PaymentVolumeView, VolumeReader

P = ParamSpec("P")
C = TypeVar("C")
VolumeOf = Callable[[str], NamedVolume | None]  # a merchant's payment_volume, its services by name (`named_volume`)


@dataclass
class Collaborators:
    merchants: Merchants
    accounts: AccountsView  # merchants, logins, keys, capabilities, domains (projections/accounts.py)
    key_uses: KeyUseView  # the keys' last use
    sessions: Sessions
    throttle: LoginThrottle
    verify_password: Callable[[str | None, str], bool]
    proxies: ProxyServices  # the services and routes API (services.py) and pages (service_pages.py)
    webhooks: WebhookService  # the webhook pages and API
    payment_list: PaymentListView  # the overview, the payments pages and API
    catalog: CatalogView | None = None
    listings: Listings | None = None
    cursor_key: bytes = b""  # the Discovery page's search cursors (the API's key: interfaces/wiring.py)
    console_url: str = ""
    secure_cookies: bool = True
    sandbox: bool = False  # devnet is the sandbox's localnet: no public explorer links for it
    trusted_proxies: tuple[str, ...] = ()
    api_url: str = ""  # the facilitator API, for the pages' examples
    fee_payers: Callable[[], list[dict[str, str]]] = lambda: []  # the overview's fee payer health
    books: Callable[[], dict[str, Any] | None] = lambda: None  # the last reconciliation with the chain
    proxy_url: str = ""  # the proxy's public address, for gateway URLs
    payment_volume: PaymentVolumeView | None = None  # the overview's chart, payments' services
    mcp_tools: Callable[[ProxyService], list[dict[str, Any]]] | None = None  # an mcp service's server's tools/list
    sandbox_wallet: str | None = None  # `up`'s merchant-wallet.json: the sandbox merchant's wallet


@dataclass(frozen=True)
class Logins:
    """The login check (`api.Login`, the session API and the login pages): logins, sessions, the throttle."""

    accounts: AccountsView  # the logins and their password hashes
    sessions: Sessions
    throttle: LoginThrottle
    verify_password: Callable[[str | None, str], bool]
    trusted_proxies: tuple[str, ...]
    secure_cookies: bool


@dataclass(frozen=True)
class Passwords:
    """The password page: a one-time token's new password, which ends every session of its login."""

    merchants: Merchants
    sessions: Sessions


@dataclass(frozen=True)
class Account:
    """The merchant's own account in the JSON API and its pages: keys, capabilities, domains, discovery."""

    merchants: Merchants
    accounts: AccountsView  # merchants, keys, capabilities, domains (projections/accounts.py)
    key_uses: KeyUseView  # the keys' last use


@dataclass(frozen=True)
class Catalog:
    """The merchant's listings in the discovery catalog (listed, confirmed, delisted) and the Discovery page's
    search."""

    catalog: CatalogView | None
    listings: Listings | None
    cursor_key: bytes  # the search cursors' key (the API's: interfaces/wiring.py)


@dataclass(frozen=True)
class Overview:
    """The overview page: today's figures, the charts, the last payments, the keys, the fee payers, the books."""

    payment_list: PaymentListView
    accounts: AccountsView
    volume: VolumeOf
    fee_payers: Callable[[], list[dict[str, str]]]
    books: Callable[[], dict[str, Any] | None]


@dataclass(frozen=True)
class PaymentViews:
    """The payments API, export and pages (payments.py)."""

    payment_list: PaymentListView
    volume: VolumeOf  # each payment's service
    sandbox: bool  # no public explorer links for the sandbox's devnet


@dataclass(frozen=True)
class ServicePages:
    """The pages of proxy services, their routes and an mcp service's tools (service_pages.py, tool_pages.py)."""

    proxies: ProxyServices
    accounts: AccountsView  # the verified domains a service's base URL may use
    proxy_url: str
    sandbox: bool
    sandbox_wallet: str | None
    mcp_tools: Callable[[ProxyService], list[dict[str, Any]]] | None


@dataclass(frozen=True)
class ServiceTools:
    """The JSON API of an mcp service's tool prices (tools_api.py): the services' commands, and the MCP servers'
    `tools/list`."""

    proxies: ProxyServices
    mcp_tools: Callable[[ProxyService], list[dict[str, Any]]] | None


class Resource(Generic[C]):
    """Base of the console's resources: each answers from what it is built with (`C`, its group's part of the
    collaborators), at its `route`."""

    route = ""

    def __init__(self, c: C) -> None:
        self._c = c


class Mountable(Protocol[P]):
    """A resource class: where it answers, and what it is built from."""

    route: str

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> object: ...


def mount(app: falcon.App, resources: Iterable[Mountable[P]], *args: P.args, **kwargs: P.kwargs) -> None:
    """Add each resource class at its `route`, each built from the same arguments: what those resources use."""
    for resource in resources:
        app.add_route(resource.route, resource(*args, **kwargs))


def named_volume(volume: VolumeReader | None, proxies: ProxyServices, proxy_url: str,
                 merchant: str) -> NamedVolume | None:
    """The payment_volume read model as `merchant` reads it: its proxy services' series by their names (the
    console's pages, API and export, and `paywarden payments export`)."""
    if volume is None:
        return None
    return NamedVolume.of(volume, ((s.slug, s.name) for s in proxies.list_services(merchant)),
                          urlsplit(proxy_url).netloc)


def volume_of(c: Collaborators) -> VolumeOf:
    return functools.partial(named_volume, c.payment_volume, c.proxies, c.proxy_url)


def default_pay_to(proxies: ProxyServices, merchant: str, sandbox_wallet: str | None) -> str | None:
    """The pay-to a new route starts with (the console's route form, `route add` without `--pay-to`): the
    merchant's wallet as its routes name it, else, for the sandbox merchant, the wallet `up` made; None otherwise."""
    return proxies.wallet_of(merchant) or (sandbox_wallet if merchant == SANDBOX_MERCHANT else None)


def fee_payer_health(probes: Probes) -> list[dict[str, str]]:
    """Each fee payer's SOL balance on each served network: ok, low (under PAYWARDEN_FEE_PAYER_MIN_LAMPORTS)
    or down (the chain did not answer)."""
    rows = []
    floor = probes.fee_payer_floor
    for (network, address), balance in sorted(probes.fee_payer_balances().items()):
        if isinstance(balance, int):
            rows.append({"network": network, "address": address, "balance": f"{balance / 10**9:,.3f} SOL",
                         "health": "ok" if balance >= floor else "low"})
        else:
            rows.append({"network": network, "address": address, "balance": "unknown", "health": "down"})
    return rows
