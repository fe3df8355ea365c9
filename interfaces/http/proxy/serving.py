"""At request time: is the service's domain still one its merchant verified, and not blocked by the operator?

The console's rules (docs/console.md) are checked when a service is created; this re-checks them on every
proxied request, so a domain the operator blocks later (`PAYWARDEN_BLOCKED_DOMAINS`, or the service's own
domains) or one the merchant no longer holds verified stops being proxied at once: 503 with the reason, nothing
forwarded, nothing charged. The verified domains come from the accounts read model (no replay on the hot path);
a domain missing there is confirmed against the Merchant aggregate before refusing, as the read model may lag
a verification by a moment.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol

from domain.merchant import merchant_id
from domain.proxy_service import ProxyService, localhost_refusal

SANDBOX_DOMAIN = "localhost"


class VerifiedDomains(Protocol):
    """A read model of merchants' verified domains (the console's)."""

    def list_verified_domains(self, merchant_id: str) -> Collection[str]: ...


class DomainCheck:
    def __init__(self, verified_view: VerifiedDomains, verified_now: Callable[[str], set[str]],
                 refusal: Callable[[str], str | None], *, sandbox: bool,
                 own_ports: frozenset[int] = frozenset()) -> None:
        self._view, self._now, self._refusal, self._sandbox = verified_view, verified_now, refusal, sandbox
        self._own_ports = own_ports

    def refusal(self, service: ProxyService) -> tuple[str, str] | None:
        """(error code, message) when the service must not be proxied now; None when it may."""
        domain = service.base.domain
        local = self._sandbox and domain == SANDBOX_DOMAIN  # the sandbox merchant's, pre-verified (checked below)
        if local and (refused := localhost_refusal(service.base, self._own_ports)) is not None:
            return "domain_blocked", refused  # a service made before the rule, or a port taken since
        if not local and (why := self._refusal(domain)) is not None:
            return "domain_blocked", f"this service's domain is refused: {why}"
        if domain in self._view.list_verified_domains(str(merchant_id(service.merchant))):
            return None
        if domain in self._now(service.merchant):
            return None
        return "domain_unverified", f"{domain} is no longer a verified domain of this service's merchant"
