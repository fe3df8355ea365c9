"""The terms a payment is bound to: the digest recorded with it, and the comparison that needs no hash."""

from __future__ import annotations

import itertools

from domain.x402 import Requirements

NETWORK = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
ASSET = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU"
PAY_TO = "56CHWJVmJRJv2KxV4HVc4tdy53gZdgnravhQvhxKTqRp"


def test_the_digest_is_the_one_earlier_releases_recorded():
    # Recorded in every Payment.Received (terms_digest) and compared with each later request's: it never changes.
    assert Requirements("exact", NETWORK, 1000, ASSET, PAY_TO).digest == \
        "8c4a6d03c2f78a182f29b067b1f5836863712ec5d05578fabd130b786a962104"
    assert Requirements("exact", NETWORK, 1000, ASSET, PAY_TO, extra={"memo": "order 7 – é"}).digest == \
        "f128fd6f8c725275cb8d259573d17e468e4c5801f92513462d368aeee29e6f02"


def test_same_terms_is_equal_digests():
    variants = [
        Requirements("exact", NETWORK, 1000, ASSET, PAY_TO),
        Requirements("exact", NETWORK, 1000, ASSET, PAY_TO, max_timeout_seconds=5, extra={"feePayer": "x"}),
        Requirements("exact", NETWORK, 1000, ASSET, PAY_TO, extra={"memo": ""}),  # an empty memo is no memo
        Requirements("exact", NETWORK, 1000, ASSET, PAY_TO, extra={"memo": "a"}),
        Requirements("exact", NETWORK, 1000, ASSET, PAY_TO, extra={"memo": "b"}),
        Requirements("exact", NETWORK, 1001, ASSET, PAY_TO),
        Requirements("exact", "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp", 1000, ASSET, PAY_TO),
        Requirements("exact", NETWORK, 1000, PAY_TO, ASSET),
        Requirements("upto", NETWORK, 1000, ASSET, PAY_TO),
    ]
    for a, b in itertools.product(variants, repeat=2):
        assert a.same_terms(b) is (a.digest == b.digest)
    assert sum(a.same_terms(b) for a, b in itertools.product(variants, repeat=2)) == len(variants) + 2 * 3
