"""`create_proxy_app(container)`: the proxy's WSGI application over the container's applications."""

from __future__ import annotations

import ssl
from typing import Any

from interfaces.adapters.outbound import OutboundClient, OutboundPolicy
from interfaces.adapters.resolver import GetaddrinfoResolver
from interfaces.container import Container
from interfaces.http.proxy.app import ProxyApp
from interfaces.http.proxy.serving import DomainCheck


def create_proxy_app(container: Container, *, resolver: Any = None, ssl_context: ssl.SSLContext | None = None,
                     policy: OutboundPolicy | None = None) -> ProxyApp:
    """Production refuses internal upstream addresses; sandbox mode reaches localhost backends."""
    outbound = OutboundClient(resolver or GetaddrinfoResolver(),
                              policy or OutboundPolicy.for_mode(sandbox=container.config.sandbox),
                              ssl_context=ssl_context)
    domains = DomainCheck(container.accounts, container.proxies.verified_domains_of,
                          container.merchants.settings.refusal, sandbox=container.config.sandbox,
                          own_ports=container.config.own_ports)
    return ProxyApp(container.proxies, container.payments, container.accounts, container.fee_payers, outbound,
                    public_url=container.config.proxy_url, domains=domains,
                    trusted_proxies=container.config.trusted_proxies,
                    metrics_token=container.config.proxy_metrics_token)
