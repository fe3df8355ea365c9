"""The Solana networks Paywarden serves, their USDC mints, and the programs an `exact` payment may use."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

X402_VERSION = 2
SCHEME_EXACT = "exact"
USDC_DECIMALS = 6
DEFAULT_MAX_TIMEOUT_SECONDS = 60


class KeyEnv(StrEnum):
    """The environment an API key belongs to: `test` keys pay on devnet, `live` keys on mainnet."""

    TEST = "test"
    LIVE = "live"


@dataclass(frozen=True)
class Network:
    caip2: str
    usdc_mint: str
    key_env: KeyEnv
    name: str


MAINNET = Network(
    caip2="solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
    usdc_mint="EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
    key_env=KeyEnv.LIVE,
    name="mainnet",
)
DEVNET = Network(
    caip2="solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
    usdc_mint="4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
    key_env=KeyEnv.TEST,
    name="devnet",
)
NETWORKS: dict[str, Network] = {n.caip2: n for n in (MAINNET, DEVNET)}


def network(caip2: str) -> Network | None:
    return NETWORKS.get(caip2)


class Programs:
    """Program ids (base58) that may appear in an `exact` payment transaction."""

    COMPUTE_BUDGET = "ComputeBudget111111111111111111111111111111"
    TOKEN = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
    TOKEN_2022 = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb"
    ASSOCIATED_TOKEN = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL"
    MEMO = "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr"
    LIGHTHOUSE = "L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95"
    TOKEN_PROGRAMS = frozenset({TOKEN, TOKEN_2022})
    TRAILING = frozenset({MEMO, LIGHTHOUSE})
