"""Slugs of proxy services (docs/architecture.md#the-interface-contract, "Slugs") and the event-sourced claim that
keeps each one unique.

Candidates in order: the service's name when it makes a slug (`My Quotes` → `my-quotes`, accents dropped:
`Café Prices` → `cafe-prices`), then that with a counter (`my-quotes-2`, `-3`, ...), so a merchant recognises its
gateway URL. A name with no letter or digit of the Latin alphabet falls back to the base URL's host: the core
domain name from the Public Suffix List (`api.weather.co.uk` → `weather`, hyphens kept); then the whole host with
dots as hyphens (`api-weather-co-uk`); then that with a counter (`api-weather-co-uk-2`, `-3`, ...). The list is the
`publicsuffixlist` package's own copy (no download).

A `SlugClaim` has an id derived from the slug, so two services claiming one slug cannot both be saved: the event
store refuses the second creation. A released claim (its service moved to another base URL, or was deleted) can be
claimed again; a concurrent re-claim loses on the aggregate's version.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterator
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event
from publicsuffixlist import PublicSuffixList

from domain.errors import DomainError

SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
SLUG_NAMESPACE = uuid5(NAMESPACE_URL, "https://paywarden.dev/slugs")


@functools.cache
def public_suffix_list() -> PublicSuffixList:
    """The Public Suffix List the package ships, parsed once per process when first needed (0.1-0.5 s: a process
    that never reads it, the API worker's verify path, a CLI command, never pays it); only read afterwards."""
    return PublicSuffixList()


class SlugError(DomainError):
    """A slug that is malformed or already claimed by another service."""


def core_name(host: str) -> str:
    """The label just left of the host's public suffix (`api.weather.co.uk` → `weather`); for a host that is
    itself a suffix or has none registered (`localhost`), its first label."""
    host = host.lower().rstrip(".")
    registrable = public_suffix_list().privatesuffix(host)
    return (registrable or host).split(".")[0]


def candidates(host: str, name: str = "") -> Iterator[str]:
    """The slugs to try for a service named `name` at a base URL's host, best first; endless (the counter grows)."""
    latin = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    named = _clean(re.sub(r"[^a-z0-9]+", "-", latin.lower()))  # each run of spaces and signs: one hyphen
    if named:
        yield named
        yield from (f"{named[:58]}-{counter}" for counter in itertools.count(2))
    host = host.lower().rstrip(".")
    first, whole = _clean(core_name(host)), _clean(host.replace(".", "-"))
    if first:
        yield first
    if whole and whole != first:
        yield whole
    base = whole or first or "service"
    counter = 2
    while True:
        yield f"{base[:58]}-{counter}"
        counter += 1


def _clean(text: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]", "-", text.lower()).strip("-")[:63].strip("-")
    return cleaned if SLUG.fullmatch(cleaned) else ""


def check_slug(slug: str) -> str:
    if not isinstance(slug, str) or not SLUG.fullmatch(slug):
        raise SlugError("a slug is 1-63 of a-z, 0-9 and -, starting and ending with a letter or digit")
    return slug


def slug_claim_id(slug: str) -> UUID:
    return uuid5(SLUG_NAMESPACE, slug)


class SlugClaim(Aggregate):
    """Which service a slug routes to; `owner` (a service id) is None while the slug is free again."""

    class Claimed(Aggregate.Created):
        slug: str
        service_id: str

    class Released(Aggregate.Event):
        pass

    class Reclaimed(Aggregate.Event):
        service_id: str

    @staticmethod
    def create_id(slug: str, service_id: str) -> UUID:
        return slug_claim_id(slug)

    @event(Claimed)
    def __init__(self, slug: str, service_id: str) -> None:
        self.slug = slug
        self.owner: str | None = service_id

    @property
    def free(self) -> bool:
        return self.owner is None

    def release(self) -> None:
        if not self.free:
            self._release()

    @event(Released)
    def _release(self) -> None:
        self.owner = None

    def reclaim(self, service_id: str) -> None:
        if not self.free:
            raise SlugError(f"slug {self.slug} is taken")
        self._reclaim(service_id=service_id)

    @event(Reclaimed)
    def _reclaim(self, service_id: str) -> None:
        self.owner = service_id
