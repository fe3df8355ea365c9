"""The fee payers: what they sign verifies under their address, proven once when they are loaded."""

from __future__ import annotations

import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature

from interfaces.adapters.signers import KeypairFeePayers
from interfaces.config import ConfigError


def test_a_fee_payers_signature_verifies_under_its_address():
    keypairs = [Keypair(), Keypair()]
    fee_payers = KeypairFeePayers(keypairs)
    for address in fee_payers.addresses():
        signature = Signature.from_bytes(fee_payers.sign(address, b"a message"))
        assert signature.verify(Pubkey.from_string(address), b"a message")
        assert not signature.verify(Pubkey.from_string(address), b"another message")


class _Mislabelled:
    """A signer listed under an address whose key it does not hold: one key's secret half beside another's public
    half (solders' `Keypair.from_bytes` refuses such a file; a signer given some other way is proven the same)."""

    def __init__(self) -> None:
        self._listed, self._signer = Keypair(), Keypair()

    def pubkey(self) -> Pubkey:
        return self._listed.pubkey()

    def __bytes__(self) -> bytes:
        return bytes(self._signer)[:32] + bytes(self._listed.pubkey())


def test_the_signature_is_the_one_solders_makes_for_the_keypair():
    keypair = Keypair()
    fee_payers = KeypairFeePayers([keypair])
    for message in (b"", b"a message", bytes(range(256)) * 4):
        assert fee_payers.sign(str(keypair.pubkey()), message) == bytes(keypair.sign_message(message))


def test_a_signer_whose_signatures_do_not_verify_under_its_address_is_refused_at_start():
    with pytest.raises(ConfigError, match="does not verify"):
        KeypairFeePayers([Keypair(), _Mislabelled()])  # type: ignore[list-item]
