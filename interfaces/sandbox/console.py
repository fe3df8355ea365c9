"""The sandbox merchant's console login, made by `paywarden up` on first run and kept in the data directory
(`sandbox-console-password`, one file per store, mode 0600), like its API key."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from domain.merchant import MerchantConflictError
from interfaces.config import Config, ConfigError, without_password

SANDBOX_EMAIL = "sandbox@paywarden.localhost"


def password_file(config: Config) -> Path:
    """The file of the sandbox console password of this configuration's store: the embedded store's is
    `sandbox-console-password`; a PostgreSQL database's is named after its address (without the password), so one
    data directory used with two stores keeps each login's own password."""
    if not config.database_url or config.database_url.startswith("sqlite://"):
        suffix = "" if not config.database_url or config.database_url == "sqlite://" else \
            "-" + hashlib.sha256(config.database_url.encode()).hexdigest()[:12]
    else:
        suffix = "-" + hashlib.sha256(without_password(config.database_url).encode()).hexdigest()[:12]
    return config.data_dir / f"sandbox-console-password{suffix}"


def console_login(config: Config, merchant: str) -> tuple[str, str]:
    """(email, password) of the sandbox merchant's owner login; created, or reset when its file is missing or
    holds a password this store's login does not accept."""
    from interfaces.adapters.passwords import Argon2Hasher
    from interfaces.container import build

    secret_file = password_file(config)
    container = build(config)
    try:
        login = container.accounts.get_login(SANDBOX_EMAIL)
        if login is not None and login.password_hash and secret_file.is_file():
            kept = secret_file.read_text().strip()
            if Argon2Hasher().verify(login.password_hash, kept):
                return SANDBOX_EMAIL, kept
        password = secrets.token_urlsafe(18)
        try:
            container.merchants.add_login(merchant, SANDBOX_EMAIL, password=password)
        except MerchantConflictError:  # the login exists but its password file is gone or wrong: set a new one
            container.merchants.set_password(SANDBOX_EMAIL, password)
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        return SANDBOX_EMAIL, password
    finally:
        container.close()


def sandbox_wallet(config: Config) -> str | None:
    """The sandbox merchant's wallet: the address of `DATA_DIR/merchant-wallet.json`, which `paywarden up` makes
    and funds (`up --json`'s `pay_to`); None outside the sandbox or before `up` ran."""
    from interfaces.adapters.signers import read_keypair

    path = config.data_dir / "merchant-wallet.json"
    if not config.sandbox or not path.is_file():
        return None
    try:
        return str(read_keypair(path).pubkey())
    except ConfigError:
        return None
