"""The sandbox merchant's console login, made by `paywarden up` on first run and kept in the data directory
(`sandbox-console-password`, mode 0600), like its API key."""

from __future__ import annotations

import os
import secrets

from domain.merchant import MerchantConflictError
from interfaces.config import Config

SANDBOX_EMAIL = "sandbox@paywarden.localhost"


def console_login(config: Config, merchant: str) -> tuple[str, str]:
    """(email, password) of the sandbox merchant's owner login; created or reset when the file is missing."""
    from interfaces.container import build

    secret_file = config.data_dir / "sandbox-console-password"
    container = build(config)
    try:
        container.refresh_accounts()
        login = container.console.get_login(SANDBOX_EMAIL) if container.console else None
        if login is not None and login.password_hash and secret_file.is_file():
            return SANDBOX_EMAIL, secret_file.read_text().strip()
        password = secrets.token_urlsafe(18)
        try:
            container.merchants.add_login(merchant, SANDBOX_EMAIL, password=password)
        except MerchantConflictError:  # the login exists but its password file is gone: set a new one
            container.merchants.set_password(SANDBOX_EMAIL, password)
        container.refresh_accounts()
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        return SANDBOX_EMAIL, password
    finally:
        container.close()
