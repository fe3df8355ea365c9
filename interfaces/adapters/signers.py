"""The service's fee payers: Solana CLI JSON keypair files (a list of 64 byte values)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature

from interfaces.config import ConfigError


def read_keypair(path: Path) -> Keypair:
    try:
        values = json.loads(path.read_text())
        return Keypair.from_bytes(bytes(values))
    except (OSError, ValueError, TypeError) as bad:
        raise ConfigError(f"{path} is not a Solana CLI keypair file (a JSON list of 64 numbers): {bad}") from None


def parse_secret(secret: str) -> Keypair:
    """A keypair given in the environment: a JSON list of 64 numbers, or the base58 of those 64 bytes."""
    try:
        if secret.startswith("["):
            return Keypair.from_bytes(bytes(json.loads(secret)))
        return Keypair.from_base58_string(secret)
    except (ValueError, TypeError):
        raise ConfigError("PAYWARDEN_FEE_PAYER_KEYS holds a value that is not a Solana keypair "
                          "(a JSON list of 64 numbers or base58)") from None


def write_keypair(path: Path, keypair: Keypair) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(list(bytes(keypair)), f)
    return path


def sandbox_keypair(path: Path) -> Keypair:
    """A keypair kept in the data directory, made on first use (sandbox mode only)."""
    return read_keypair(path) if path.is_file() else _new(path)


def _new(path: Path) -> Keypair:
    keypair = Keypair()
    write_keypair(path, keypair)
    return keypair


_PROBE = b"paywarden: a fee payer's signature verifies under its address"


class KeypairFeePayers:
    """Implements the `FeePayers` port: the same signers serve every network.

    A verify's simulation does not check the fee payer's signature again (docs/performance.md): each keypair is
    proven once, here, to sign what verifies under the address it is listed at (ed25519 signing is deterministic,
    so a keypair that does once always does). The signing is OpenSSL's (`cryptography`), from the keypair's
    32-byte seed: the same signature as solders' `sign_message`, in 37 µs instead of 57 µs; the proof checks it
    with solders, under the listed address."""

    def __init__(self, keypairs: Sequence[Keypair]) -> None:
        if not keypairs:
            raise ConfigError("at least one fee payer keypair is needed")
        self._by_address = {str(k.pubkey()): Ed25519PrivateKey.from_private_bytes(bytes(k)[:32]) for k in keypairs}
        self._addresses = tuple(self._by_address)
        for address, key in self._by_address.items():
            if not Signature(key.sign(_PROBE)).verify(Pubkey.from_string(address), _PROBE):
                raise ConfigError(f"the fee payer keypair of {address} signs what does not verify under it")

    def addresses(self, caip2: str = "") -> Sequence[str]:
        return self._addresses

    def sign(self, address: str, message: bytes) -> bytes:
        return self._by_address[address].sign(message)
