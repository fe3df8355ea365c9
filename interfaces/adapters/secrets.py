"""The `Secrets` port: AES-256-GCM over merchants' upstream credentials, keyed by PAYWARDEN_SECRET_KEY.

A ciphertext reads `v1.<base64url(nonce + sealed)>`; the key is 32 bytes given as base64url (or 64 hex digits).
In sandbox mode without a key, one is made on first use in DATA_DIR/secret.key (mode 0600).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "v1."


class SecretKeyError(ValueError):
    """PAYWARDEN_SECRET_KEY is not 32 bytes of base64url or hex, or a ciphertext does not open with it."""


def parse_key(text: str) -> bytes:
    text = text.strip()
    try:
        raw = bytes.fromhex(text) if len(text) == 64 else base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error):
        raise SecretKeyError("PAYWARDEN_SECRET_KEY must be 32 bytes as base64url or 64 hex digits") from None
    if len(raw) != 32:
        raise SecretKeyError("PAYWARDEN_SECRET_KEY must be 32 bytes as base64url or 64 hex digits")
    return raw


def sandbox_key(path: Path) -> bytes:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
    return parse_key(path.read_text())


class AesGcmSecrets:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def encrypt(self, plaintext: str) -> str:
        nonce = secrets.token_bytes(12)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), b"paywarden-upstream-auth")
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def decrypt(self, ciphertext: str) -> str:
        if not ciphertext.startswith(PREFIX):
            raise SecretKeyError("not a Paywarden ciphertext")
        raw = base64.urlsafe_b64decode(ciphertext[len(PREFIX):])
        try:
            return self._aead.decrypt(raw[:12], raw[12:], b"paywarden-upstream-auth").decode()
        except InvalidTag:
            raise SecretKeyError("the upstream credential does not open with PAYWARDEN_SECRET_KEY") from None
