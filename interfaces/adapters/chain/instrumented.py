"""A `Chain` decorator that times every call and counts the ones that raise; the container wraps each adapter."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from application.ports import ChainUnavailableError, SignatureStatus, Simulation, SubmissionError
from domain.networks import network as known_network
from interfaces.runtime.metrics_registry import CHAIN_DURATION, CHAIN_ERRORS, child

if TYPE_CHECKING:  # probes.py imports this module
    from interfaces.runtime.probes import ProbedChain

T = TypeVar("T")


def network_label(caip2: str) -> str:
    known = known_network(caip2)
    return known.name if known is not None else caip2


class InstrumentedChain:
    """Implements `Chain` (and the optional `health`/`sol_balance` probes) over another adapter, with metrics."""

    def __init__(self, caip2: str, inner: ProbedChain) -> None:
        self.inner, self.network = inner, network_label(caip2)

    def simulate(self, transaction: bytes, *, signatures_verified: bool = False) -> Simulation:
        return self._timed("simulate", self.inner.simulate, transaction, signatures_verified=signatures_verified)

    def send(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        return self._timed("send", self.inner.send, transaction, signatures_verified=signatures_verified)

    def signature_status(self, signature: str) -> SignatureStatus:
        return self._timed("signature_status", self.inner.signature_status, signature)

    def is_blockhash_valid(self, blockhash: str) -> bool:
        return self._timed("is_blockhash_valid", self.inner.is_blockhash_valid, blockhash)

    def account_exists(self, address: str) -> bool:
        return self._timed("account_exists", self.inner.account_exists, address)

    def lookup_table_addresses(self, table: str) -> Sequence[str]:
        return self._timed("lookup_table_addresses", self.inner.lookup_table_addresses, table)

    def health(self) -> None:
        return self._timed("health", self.inner.health)

    def sol_balance(self, address: str) -> int:
        return self._timed("sol_balance", self.inner.sol_balance, address)

    def _timed(self, method: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        except SubmissionError:
            CHAIN_ERRORS.labels(self.network, method, "refused").inc()
            raise
        except ChainUnavailableError:
            CHAIN_ERRORS.labels(self.network, method, "unavailable").inc()
            raise
        except Exception as other:
            CHAIN_ERRORS.labels(self.network, method, type(other).__name__).inc()
            raise
        finally:
            child(CHAIN_DURATION, self.network, method).observe(time.perf_counter() - started)


def instrument_chains(by_network: dict[str, ProbedChain]) -> None:
    """Wrap each adapter of a `Chains`' `by_network` mapping in place; idempotent."""
    for caip2, chain in list(by_network.items()):
        if not isinstance(chain, InstrumentedChain):
            by_network[caip2] = InstrumentedChain(caip2, chain)
