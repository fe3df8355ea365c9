"""A merchant's client id: written once, read back by every read model and log line."""

import itertools
from uuid import UUID

from domain.clients import ANONYMOUS_ID, Capability, Client, merchant_client_id, merchant_of

MERCHANT = UUID("6f1c2a9e-0b7d-4c1e-9a55-3f0e8d2b7c41")


def test_a_merchants_client_id_gives_back_its_merchant():
    assert merchant_client_id(MERCHANT) == f"merchant:{MERCHANT}"
    assert merchant_of(merchant_client_id(MERCHANT)) == str(MERCHANT)


def test_the_anonymous_identity_and_other_ids_have_no_merchant():
    assert merchant_of(ANONYMOUS_ID) is None
    assert merchant_of("merchants:x") is None
    assert merchant_of(f"x-merchant:{MERCHANT}") is None


def test_may_use_is_membership_of_the_capability():
    held = frozenset({Capability("solana:a", "exact", "A"), Capability("solana:b", "exact", "B")})
    client = Client(id="merchant:m", registered=True, capabilities=held)
    for network, scheme, asset in itertools.product(("solana:a", "solana:b"), ("exact", "upto"), ("A", "B")):
        assert client.may_use(network, scheme, asset) is (Capability(network, scheme, asset) in held)
    assert Client(id="x", registered=False, any_capability=True).may_use("solana:c", "upto", "C")
    assert not Client(id="x", registered=False).may_use("solana:a", "exact", "A")
