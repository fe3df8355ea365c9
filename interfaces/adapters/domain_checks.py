"""Domain verification against the outside world: DNS TXT records (dnspython) and the HTTPS token file; and the
Public Suffix List (the `publicsuffixlist` package, which ships its list)."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from domain.slugs import public_suffix_list

if TYPE_CHECKING:
    import dns.resolver

TIMEOUT_SECONDS = 5.0
MAX_BODY = 1024


class DnsHttpChallenges:
    """Implements `DomainChallenges`. `nameservers`: IP or IP:PORT entries; empty: the system's resolvers. dnspython
    and httpx are imported at the first check, not by every process that builds a container (a CLI command)."""

    def __init__(self, nameservers: Sequence[str] = (), *, ca_file: str | None = None) -> None:
        self._nameservers = list(nameservers)
        # the system's trust store, or a given CA (tests)
        self._tls: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True

    @cached_property
    def _resolver(self) -> dns.resolver.Resolver:
        import dns.resolver

        resolver = dns.resolver.Resolver(configure=not self._nameservers)
        if self._nameservers:
            hosts, ports = [], set()
            for server in self._nameservers:
                host, _, port = server.rpartition(":") if server.count(":") == 1 else (server, "", "")
                hosts.append(host)
                ports.add(int(port or 53))
            resolver.nameservers = hosts
            resolver.port = ports.pop()
        resolver.lifetime = TIMEOUT_SECONDS
        return resolver

    def txt_records(self, name: str) -> list[str]:
        import dns.exception
        import dns.resolver

        try:
            answer = self._resolver.resolve(name, "TXT", search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer, dns.resolver.NoNameservers, dns.exception.Timeout):
            return []
        return [b"".join(record.strings).decode("utf-8", "replace") for record in answer]

    def fetch(self, url: str) -> str | None:
        """The body of `url` over HTTPS (no redirects, 5 s, 1 KiB), or None."""
        if not url.startswith("https://"):
            return None
        import httpx

        try:
            with httpx.stream("GET", url, timeout=TIMEOUT_SECONDS, follow_redirects=False,
                              verify=self._tls) as answer:
                if answer.status_code != 200:
                    return None
                body = b""
                for chunk in answer.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY:
                        return None
                return body.decode("utf-8", "replace")
        except httpx.HTTPError:
            return None


class PslSuffixes:
    """Implements `PublicSuffixes` with the list the package ships (no download at run time)."""

    def is_public_suffix(self, domain: str) -> bool:
        return public_suffix_list().is_public(domain)  # the one parse of the process (domain/slugs.py)
