"""`create_app(collaborators) -> ProxyApp`: the proxy's WSGI application (the composition root,
interfaces/wiring.py, builds the collaborators)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from application.access import Access
from application.payments import Payments
from application.ports import FeePayers
from application.proxy_services import ProxyServices
from interfaces.adapters.outbound import OutboundClient
from interfaces.http.proxy.app import ProxyApp
from interfaces.http.proxy.serving import DomainCheck, VerifiedDomains
from projections.accounts import AccountsView


@dataclass(frozen=True)
class Collaborators:
    proxies: ProxyServices  # the services and routes, and a merchant's verified domains now
    payments: Payments  # each paid request's payment, in-process
    accounts: AccountsView  # the merchants' capabilities and rate limits
    fee_payers: FeePayers
    outbound: OutboundClient  # to the upstreams, under the mode's policy (no internal addresses in production)
    verified_domains: VerifiedDomains  # the read model asked first on every request (serving.py)
    refusal: Callable[[str], str | None]  # why a domain is refused: the operator's blocked and the service's own
    sandbox: bool = False
    own_ports: frozenset[int] = frozenset()  # Paywarden's own listeners, which no localhost service may name
    public_url: str = ""  # PAYWARDEN_PROXY_URL
    trusted_proxies: tuple[str, ...] = ()
    metrics_token: str = ""
    access: Access | None = None  # once-paid routes' Sign-In-With-X (None: every route charges every request)


def create_app(c: Collaborators) -> ProxyApp:
    domains = DomainCheck(c.verified_domains, c.proxies.verified_domains_of, c.refusal, sandbox=c.sandbox,
                          own_ports=c.own_ports)
    return ProxyApp(c.proxies, c.payments, c.accounts, c.fee_payers, c.outbound, public_url=c.public_url,
                    domains=domains, trusted_proxies=c.trusted_proxies, metrics_token=c.metrics_token,
                    access=c.access)
