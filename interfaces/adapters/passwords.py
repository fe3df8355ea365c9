"""Owner passwords: argon2id (argon2-cffi's RFC 9106 low-memory profile), verified in constant work.

An unknown email is answered after the same hash work as a wrong password (`verify(None, …)` checks against a
dummy hash), so neither the message nor the time tells whether an account exists.
"""

from __future__ import annotations

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from argon2.profiles import RFC_9106_LOW_MEMORY

# What an unknown email is checked against: an argon2id hash with the hasher's own parameters (so its check costs
# what any login's does), written here rather than made at start, which cost every process that builds a hasher (a
# CLI command too) one full hash, ~0.7 s. Nobody logs in with it: `verify(None, ...)` is False whatever it says.
DUMMY_HASH = "$argon2id$v=19$m=65536,t=3,p=4$IXWeTeCKF4lINf4r1ngKeQ$W29bFEA3DPpGvFcIFHHrvuDY+Mv6B93evgjTBbDbw3k"


class Argon2Hasher:
    def __init__(self) -> None:
        self._argon = PasswordHasher.from_parameters(RFC_9106_LOW_MEMORY)
        assert self._argon.type is Type.ID
        self._dummy = DUMMY_HASH

    def hash(self, password: str) -> str:
        return self._argon.hash(password)

    def verify(self, password_hash: str | None, password: str) -> bool:
        try:
            return self._argon.verify(password_hash or self._dummy, password) and password_hash is not None
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
