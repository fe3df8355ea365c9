"""The checkpoint signing key: Ed25519 (via `cryptography`), in the sumdb/note signer-key text format.

`PAYWARDEN_AUDIT_SIGNING_KEY` holds `PRIVATE+KEY+name+keyid+base64(0x01 || seed)`; in sandbox mode, without it,
one is made in the data directory (`audit-signing.key`, mode 0600) on first use. Production requires it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from domain.checkpoint import (
    Checkpoint,
    NoteError,
    VerifierKey,
    parse_signing_key,
    sign_note,
    signing_key_text,
    verifier_key,
)

SIGNING_KEY_VARIABLE = "PAYWARDEN_AUDIT_SIGNING_KEY"
SANDBOX_KEY_FILE = "audit-signing.key"


@dataclass(frozen=True)
class CheckpointSigner:
    name: str
    private_key: Ed25519PrivateKey

    @property
    def public_key(self) -> bytes:
        return self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @property
    def verifier(self) -> VerifierKey:
        return verifier_key(self.name, self.public_key)

    def sign(self, checkpoint: Checkpoint) -> str:
        return self.sign_text(checkpoint.text())

    def sign_text(self, text: str) -> str:
        return sign_note(text, self.name, self.public_key, self.private_key.sign)

    @classmethod
    def parse(cls, encoded: str) -> CheckpointSigner:
        name, seed = parse_signing_key(encoded)
        return cls(name, Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def generate(cls, name: str) -> CheckpointSigner:
        return cls(name, Ed25519PrivateKey.generate())

    def encoded(self) -> str:
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        seed = self.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return signing_key_text(self.name, seed, self.public_key)


def ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def load_signer(encoded: str, data_dir: Path, *, sandbox: bool, origin: str) -> CheckpointSigner:
    """The configured key; in sandbox mode a key kept in the data directory, made on first use."""
    encoded = encoded.strip()
    if encoded:
        try:
            return CheckpointSigner.parse(encoded)
        except (NoteError, ValueError) as bad:
            raise NoteError(f"{SIGNING_KEY_VARIABLE}: {bad}") from None
    if not sandbox:
        raise NoteError(f"{SIGNING_KEY_VARIABLE} is required in production (PRIVATE+KEY+name+keyid+key; "
                        "make one with `paywarden audit keygen NAME`)")
    path = data_dir / SANDBOX_KEY_FILE
    if path.is_file():
        return CheckpointSigner.parse(path.read_text())
    signer = CheckpointSigner.generate(origin)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(signer.encoded() + "\n")
    return signer
