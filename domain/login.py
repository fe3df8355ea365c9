"""The OwnerLogin aggregate: one email address that logs in to one merchant's console.

Its id is derived from the email address, so an address can belong to one merchant only: the event store refuses
a second `Created`. The password is stored as an argon2id hash (computed by the application's hasher port); a
password-setting link is stored as the SHA-256 of its token, with an expiry, and works once.
"""

from __future__ import annotations

import re
from datetime import datetime
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from domain.merchant import MerchantConflictError, MerchantError

EMAIL_PATTERN = re.compile(r"^[^@\s]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}$|^[^@\s]{1,64}@localhost$")
LOGIN_NAMESPACE = uuid5(NAMESPACE_URL, "https://paywarden.dev/owner-logins")
MIN_PASSWORD_LENGTH = 10


def normalize_email(email: str) -> str:
    """Compared case-insensitively and without surrounding spaces."""
    return email.strip().lower()


def login_id(email: str) -> UUID:
    return uuid5(LOGIN_NAMESPACE, normalize_email(email))


def check_email(email: str) -> str:
    normalized = normalize_email(email)
    if not EMAIL_PATTERN.fullmatch(normalized):
        raise MerchantError(f"{email!r} is not an email address", field="email")
    return normalized


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH or len(password) > 1024:
        raise MerchantError(f"a password has {MIN_PASSWORD_LENGTH} to 1024 characters", field="password")


class OwnerLogin(Aggregate):
    class Created(Aggregate.Created):
        email: str
        merchant_id: UUID

    class InviteIssued(Aggregate.Event):
        token_hash: str
        expires_at: datetime

    class PasswordSet(Aggregate.Event):
        password_hash: str

    @staticmethod
    def create_id(email: str, **_: object) -> UUID:
        return login_id(email)

    @event(Created)
    def __init__(self, email: str, merchant_id: UUID) -> None:
        self.email, self.merchant_id = email, merchant_id
        self.password_hash: str | None = None
        self.invite: tuple[str, datetime] | None = None

    def issue_invite(self, token_hash: str, expires_at: datetime) -> None:
        self._issue_invite(token_hash=token_hash, expires_at=expires_at)

    @event(InviteIssued)
    def _issue_invite(self, token_hash: str, expires_at: datetime) -> None:
        self.invite = (token_hash, expires_at)

    def redeem_invite(self, token_hash: str, now: datetime, password_hash: str) -> None:
        """Set the password with a one-time link: refused when it is not the latest, is used, or expired."""
        if self.invite is None or self.invite[0] != token_hash or now >= self.invite[1]:
            raise MerchantConflictError("this password link is not valid (used, replaced or expired)",
                                        field="token")
        self.set_password(password_hash)

    def set_password(self, password_hash: str) -> None:
        self._set_password(password_hash=password_hash)

    @event(PasswordSet)
    def _set_password(self, password_hash: str) -> None:
        self.password_hash, self.invite = password_hash, None
