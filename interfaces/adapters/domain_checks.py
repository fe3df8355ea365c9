"""Domain verification against the outside world: DNS TXT records (dnspython) and the HTTPS token file; and the
Public Suffix List (the `publicsuffixlist` package, which ships its list)."""

from __future__ import annotations

import ssl
from collections.abc import Sequence

import dns.exception
import dns.resolver
import httpx

from domain.slugs import public_suffix_list

TIMEOUT_SECONDS = 5.0
MAX_BODY = 1024


class DnsHttpChallenges:
    """Implements `DomainChallenges`. `nameservers`: IP or IP:PORT entries; empty: the system's resolvers."""

    def __init__(self, nameservers: Sequence[str] = (), *, ca_file: str | None = None) -> None:
        self._resolver = dns.resolver.Resolver(configure=not nameservers)
        if nameservers:
            hosts, ports = [], set()
            for server in nameservers:
                host, _, port = server.rpartition(":") if server.count(":") == 1 else (server, "", "")
                hosts.append(host)
                ports.add(int(port or 53))
            self._resolver.nameservers = hosts
            self._resolver.port = ports.pop()
        self._resolver.lifetime = TIMEOUT_SECONDS
        # the system's trust store, or a given CA (tests)
        self._tls: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True

    def txt_records(self, name: str) -> list[str]:
        try:
            answer = self._resolver.resolve(name, "TXT", search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer, dns.resolver.NoNameservers, dns.exception.Timeout):
            return []
        return [b"".join(record.strings).decode("utf-8", "replace") for record in answer]

    def fetch(self, url: str) -> str | None:
        """The body of `url` over HTTPS (no redirects, 5 s, 1 KiB), or None."""
        if not url.startswith("https://"):
            return None
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
