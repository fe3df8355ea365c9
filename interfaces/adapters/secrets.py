"""The proxy's `Secrets` port over the project's one secret box (`secret_box.py`: Fernet keys from
PAYWARDEN_SECRET_KEY, rotated by listing the new key first; made once in the sandbox's data directory)."""

from __future__ import annotations

from typing import Any


class BoxedSecrets:
    """Seals a merchant's upstream credential before it goes into an event; opens it for forwarding."""

    def __init__(self, box: Any) -> None:
        self._box = box

    def encrypt(self, plaintext: str) -> str:
        return str(self._box.seal(plaintext))

    def decrypt(self, ciphertext: str) -> str:
        return str(self._box.open(ciphertext))
