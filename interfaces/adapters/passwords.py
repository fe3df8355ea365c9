"""Owner passwords: argon2id (argon2-cffi's RFC 9106 low-memory profile), verified in constant work.

An unknown email is answered after the same hash work as a wrong password (`verify(None, …)` checks against a
dummy hash), so neither the message nor the time tells whether an account exists.
"""

from __future__ import annotations

import functools

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from argon2.profiles import RFC_9106_LOW_MEMORY


@functools.cache
def _dummy_hash() -> str:
    """The dummy hash, made once per process (one full hash's work, ~0.7 s) when the first hasher is built, not on
    the first unknown email: that login takes the same time as any other."""
    return PasswordHasher.from_parameters(RFC_9106_LOW_MEMORY).hash("paywarden-no-such-account")


class Argon2Hasher:
    def __init__(self) -> None:
        self._argon = PasswordHasher.from_parameters(RFC_9106_LOW_MEMORY)
        assert self._argon.type is Type.ID
        self._dummy = _dummy_hash()

    def hash(self, password: str) -> str:
        return self._argon.hash(password)

    def verify(self, password_hash: str | None, password: str) -> bool:
        try:
            return self._argon.verify(password_hash or self._dummy, password) and password_hash is not None
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
