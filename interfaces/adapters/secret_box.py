"""The `SecretCipher` port over Fernet (AES-128-CBC with HMAC-SHA256, from the `cryptography` package).

`PAYWARDEN_SECRET_KEY` holds one or more Fernet keys, comma-separated: the first seals, every one opens, so a key
is rotated by putting the new one first and dropping the old one once `paywarden webhooks` has re-sealed nothing
under it (sealed values carry their own timestamp, never an expiry). In the sandbox a key is made on first use in
`DATA_DIR/secret.key` (mode 0600); in production the variable is required as soon as a secret is sealed or opened.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from interfaces.config import Config, ConfigError

ENV = "PAYWARDEN_SECRET_KEY"
CONSOLE_CSRF = "the console's CSRF tokens"  # the purpose of the key the console's CSRF tokens are derived with
SEARCH_CURSORS = "discovery search cursors"  # the purpose of the key the search's cursors are MAC'd with


class SecretBox:
    def __init__(self, keys: list[str]) -> None:
        try:
            self._fernet = MultiFernet([Fernet(k.encode()) for k in keys]) if keys else None
        except ValueError:
            raise ConfigError(f"{ENV} must be Fernet keys (32 url-safe base64 bytes), comma-separated") from None

    def seal(self, plaintext: str) -> str:
        return self._box().encrypt(plaintext.encode()).decode()

    def open(self, sealed: str) -> str:
        try:
            return self._box().decrypt(sealed.encode()).decode()
        except InvalidToken:
            raise ConfigError(f"a stored secret does not open with {ENV}: was the key changed?") from None

    def _box(self) -> MultiFernet:
        if self._fernet is None:
            raise ConfigError(f"{ENV} is required in production to seal and open webhook secrets "
                              "(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key())')")
        return self._fernet


def build_secret_box(config: Config, env: dict[str, str] | None = None) -> SecretBox:
    raw = (os.environ if env is None else env).get(ENV, "").strip()
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    if not keys and config.sandbox:
        keys = [_sandbox_key(config.data_dir / "secret.key")]
    return SecretBox(keys)


def _sandbox_key(path: Path) -> str:
    """The sandbox's key, made once: written to a temporary file and linked into place, so a process starting at
    the same moment reads either no file or the whole key."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(Fernet.generate_key())
        try:
            os.link(temporary, path)  # fails if another process got there first: its key wins
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    return path.read_text().strip()


def derived_key(config: Config, purpose: str, env: dict[str, str] | None = None) -> bytes:
    """A key for `purpose` (an HMAC key, never an encryption key) derived from the first key of
    `PAYWARDEN_SECRET_KEY` (the sandbox's `DATA_DIR/secret.key`); in production the variable is required."""
    raw = (os.environ if env is None else env).get(ENV, "").strip()
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    if not keys and config.sandbox:
        keys = [_sandbox_key(config.data_dir / "secret.key")]
    if not keys:
        raise ConfigError(f"{ENV} is required in production for {purpose} "
                          "(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key())')")
    return hmac.new(keys[0].encode(), f"paywarden {purpose}".encode(), hashlib.sha256).digest()
