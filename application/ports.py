"""Ports: what the applications need from the outside world, as `typing.Protocol`s.

Adapters live in `interfaces/` (LiteSVM, Solana JSON-RPC, Redis, in-process); unit tests inject fakes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol
from uuid import UUID

from domain.payment import Payment


@dataclass(frozen=True)
class Simulation:
    """Outcome of simulating a fully signed transaction. `error_code` is the chain's error name."""

    ok: bool
    error: str = ""
    error_code: str = ""
    logs: Sequence[str] = field(default_factory=tuple)


class Confirmation(StrEnum):
    UNKNOWN = "unknown"  # the chain has not seen the signature
    PENDING = "pending"  # seen (processed) but not yet at `confirmed`
    CONFIRMED = "confirmed"  # confirmed (or finalized) without error
    FAILED = "failed"  # landed with an error


@dataclass(frozen=True)
class SignatureStatus:
    confirmation: Confirmation
    error: str = ""


class ChainUnavailableError(Exception):
    """The chain could not be reached or answered nonsense: a server fault, never a verdict."""


class SubmissionError(Exception):
    """The chain refused the broadcast (preflight, expired blockhash, ...)."""


class Chain(Protocol):
    """One Solana network, as the facilitator needs it. Signatures and addresses are base58 strings."""

    def simulate(self, transaction: bytes, *, signatures_verified: bool = False) -> Simulation:
        """Simulate a fully signed transaction (signature verification on, blockhash checked).

        `signatures_verified`: the caller has verified every signature of `transaction` over its message itself
        (the exact inspection, the client's) or made it (the fee payer's), so an adapter may skip verifying them
        again; one that verifies anyway (a remote node) is as correct. Everything else is checked as without it.
        """
        ...

    def send(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        """Broadcast a fully signed transaction; return its signature. Raises `SubmissionError`.

        `signatures_verified` as for `simulate`: an adapter may skip verifying the signatures in its preflight and
        execution (the in-process sandbox does); a node verifies them anyway."""
        ...

    def signature_status(self, signature: str) -> SignatureStatus: ...

    def is_blockhash_valid(self, blockhash: str) -> bool: ...

    def account_exists(self, address: str) -> bool: ...

    def lookup_table_addresses(self, table: str) -> Sequence[str]:
        """The addresses stored in an address lookup table account, in order (empty if none)."""
        ...


class Chains(Protocol):
    def for_network(self, caip2: str) -> Chain | None: ...


class FeePayers(Protocol):
    """The service's own signers: they pay the fees of the transactions the service settles."""

    def addresses(self, caip2: str) -> Sequence[str]: ...

    def sign(self, address: str, message: bytes) -> bytes:
        """Sign serialized message bytes with the signer at `address` (64-byte ed25519 signature)."""
        ...


class Locks(Protocol):
    """Mutual exclusion per idempotency key across every worker; `hold` never blocks."""

    def hold(self, key: str, ttl_seconds: float) -> AbstractContextManager[bool]:
        """Context manager yielding True if this caller holds the lock, False if someone else does."""
        ...


class ResultCache(Protocol):
    """Terminal results by idempotency key and operation, read-only: `projections.results.ResultCacheProjection`
    is its one writer. Read only while another request holds the payment's lock (application/payment_store.py);
    a miss is never an answer: the event store is."""

    def get(self, key: str, operation: str) -> dict[str, Any] | None: ...


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


DISCOVERY_TTL_SECONDS = 60  # the discovery query cache's lifetime (docs/architecture.md#the-interface-contract)


class QueryCache(Protocol):
    """The discovery query cache: a miss is never an error (the catalog view answers)."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, value: dict[str, Any]) -> None: ...


class Resolver(Protocol):
    """The addresses a hostname resolves to, as written (empty when it does not resolve)."""

    def resolve(self, hostname: str) -> list[str]: ...


class DiscoverySettings(Protocol):
    """Whether a merchant has discovery turned on (the accounts read model)."""

    def get_discovery_enabled(self, merchant_id: str) -> bool: ...


class VerifiedDomains(Protocol):
    """A merchant's verified domains (the accounts read model): where its listings' resource URLs may be."""

    def list_verified_domains(self, merchant_id: str) -> Collection[str]: ...


@dataclass(frozen=True)
class GatewayRoute:
    """The proxy route a gateway URL is paid through: whose it is and what its merchant declared."""

    owner: str  # the client id payments through it are recorded under (`merchant:<uuid>`)
    resource: str  # the route's gateway URL, its pattern as a template (`…/quotes/:var1`)
    info: dict[str, Any] | None  # the route's discovery settings as `extensions.bazaar.info`, the method filled in


class Gateways(Protocol):
    """The proxy's routes, found by gateway URL (and the listing's method)."""

    def find_gateway_route(self, url: str, method: str) -> GatewayRoute | None: ...


class ReceivedPayments(Protocol):
    """The `Payment.Received` event of a payment: what the request carried (extensions, resource, terms)."""

    def get_received(self, payment_id: UUID) -> Payment.Received | None: ...


class RecentEvents(Protocol):
    """The events of the batch of a log being applied (projections/runner.py, `BatchEvents`)."""

    def get(self, originator_id: UUID, version: int) -> Any | None:
        """The event `originator_id` recorded at `version` if the batch holds it, else None."""


# -- the upstream a delivery forwards to (application/deliveries.py) ------------------------------------------------


def _nothing() -> None:
    return None


@dataclass
class UpstreamAnswer:
    """What the upstream answered: its status, headers and body, the body as it arrives (an iterable of chunks
    that raises `UpstreamFailedError` if it breaks off). `close` drops what is left of it."""

    status: int
    headers: list[tuple[str, str]]
    body: Iterable[bytes]
    close: Callable[[], None] = _nothing


class Upstream(Protocol):
    """A transport's way to the service's backend: forward the request (the one it received, bound to the
    payment whose key is given, which the proxy sends as `X-Paywarden-Payment-Hash`) and return the answer once
    its status and headers are in; `UpstreamFailedError` when there is none."""

    def __call__(self, payment_key: str) -> UpstreamAnswer: ...


# -- what an application built from its environment alone gets ----------------------------------------------------
# eventsourcing's runners build an application as `App(env)` (`ProjectionRunner`, `System`): to follow its log a
# projection needs its recorder only. These defaults make that possible and refuse, safely, anything more: no
# network is served (every payment is `invalid_network`), every lock is someone else's (`duplicate_request`), the
# result cache always misses (the event store answers), nothing resolves (no listing, no webhook URL), and no
# secret can be sealed. The composition root (`interfaces/container.py`) passes the real adapters.


class NoNetworks:
    """`Chains` and `FeePayers` that serve no network."""

    def for_network(self, caip2: str) -> Chain | None:
        return None

    def addresses(self, caip2: str) -> Sequence[str]:
        return ()

    def sign(self, address: str, message: bytes) -> bytes:
        raise LookupError(f"{address} is not a signer of this application (it serves no network)")


class LocksHeldElsewhere:
    """`Locks` that are never free: a command that needs one answers `duplicate_request`."""

    @contextmanager
    def hold(self, key: str, ttl_seconds: float) -> Iterator[bool]:
        yield False


class NoResults:
    """A `ResultCache` that always misses."""

    def get(self, key: str, operation: str) -> dict[str, Any] | None:
        return None


class SystemClock:
    """The process's monotonic clock (`Clock`)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ResolvesNothing:
    """A `Resolver` for which no hostname resolves."""

    def resolve(self, hostname: str) -> list[str]:
        return []


class DiscoveryOff:
    """`DiscoverySettings` with discovery off for every merchant."""

    def get_discovery_enabled(self, merchant_id: str) -> bool:
        return False


class NoVerifiedDomains:
    """`VerifiedDomains` of merchants who verified nothing."""

    def list_verified_domains(self, merchant_id: str) -> Collection[str]:
        return ()


class NoGateways:
    """`Gateways` of a deployment without a proxy."""

    def find_gateway_route(self, url: str, method: str) -> GatewayRoute | None:
        return None


class NoReceivedPayments:
    """`ReceivedPayments` that knows no payment."""

    def get_received(self, payment_id: UUID) -> Payment.Received | None:
        return None
