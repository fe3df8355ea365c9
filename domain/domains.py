"""Domain names a merchant may claim: the pure rules (no DNS, no list lookups; those are ports).

A name is lowercased, its trailing dot dropped and its labels IDNA-encoded; IP literals, single-label names and
names that are not valid host names are refused here. Public suffixes, the service's own domains and the
operator's blocked list are checked by the application with the lists it is given.
"""

from __future__ import annotations

import ipaddress
import re

from domain.merchant import MerchantError

LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
CHALLENGE_LABEL = "_paywarden-challenge"
CHALLENGE_PATH = "/.well-known/paywarden-challenge/"
SANDBOX_DOMAIN = "localhost"


class DomainRefusedError(MerchantError):
    """A domain name that cannot be claimed (malformed, an IP literal, a public suffix, blocked)."""

    field = "domain"


def normalize_domain(raw: str) -> str:
    text = raw.strip().rstrip(".").lower()
    if not text or len(text) > 253:
        raise DomainRefusedError("a domain name has 1 to 253 characters")
    if text.startswith("[") or _is_ip(text):
        raise DomainRefusedError(f"{raw!r} is an IP address; claim a domain name")
    try:
        ascii_name = text.encode("idna").decode("ascii")
    except UnicodeError:
        raise DomainRefusedError(f"{raw!r} is not a valid domain name") from None
    labels = ascii_name.split(".")
    if not all(LABEL.fullmatch(label) for label in labels):
        raise DomainRefusedError(f"{raw!r} is not a valid domain name (letters, digits, hyphens, dots)")
    if len(labels) < 2:
        raise DomainRefusedError(f"{raw!r} is a single-label name; claim a registered domain such as example.com")
    if labels[-1].isdigit():
        raise DomainRefusedError(f"{raw!r} is not a valid domain name (numeric top-level label)")
    return ascii_name


def within(domain: str, blocked: str) -> bool:
    """`domain` is `blocked` or one of its subdomains."""
    return domain == blocked or domain.endswith("." + blocked)


def challenge_name(domain: str) -> str:
    return f"{CHALLENGE_LABEL}.{domain}"


def challenge_value(token: str) -> str:
    return f"paywarden-verification={token}"


def challenge_url(domain: str, token: str) -> str:
    return f"https://{domain}{CHALLENGE_PATH}{token}"


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False
