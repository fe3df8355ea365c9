"""A merchant's client id: written once, read back by every read model and log line."""

from uuid import UUID

from domain.clients import ANONYMOUS_ID, merchant_client_id, merchant_of

MERCHANT = UUID("6f1c2a9e-0b7d-4c1e-9a55-3f0e8d2b7c41")


def test_a_merchants_client_id_gives_back_its_merchant():
    assert merchant_client_id(MERCHANT) == f"merchant:{MERCHANT}"
    assert merchant_of(merchant_client_id(MERCHANT)) == str(MERCHANT)


def test_the_anonymous_identity_and_other_ids_have_no_merchant():
    assert merchant_of(ANONYMOUS_ID) is None
    assert merchant_of("merchants:x") is None
    assert merchant_of(f"x-merchant:{MERCHANT}") is None
